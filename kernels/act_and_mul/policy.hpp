// The act-and-mul `auto` threshold per architecture. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::act {

// Shape of the `spread` launch (its kernel template arguments).
constexpr int kSpreadElemsPerThread = 2;
constexpr int kSpreadThreads = 128;

struct Policy {
  // Resident `spread` blocks per SM in the wave that bounds the latency-bound
  // (small) problems: up to one wave of outputs `auto` picks spread, beyond
  // it flat (bandwidth).
  int spread_blocks_per_sm = 0;
  // The same wave with PDL (--pdl on): spread-pdl's early trigger lets the
  // next grid's blocks take SM slots, so it loses to flat-pdl sooner.
  int spread_pdl_blocks_per_sm = 0;
  // Inputs of at most l2_bytes / keep_in_l2_divisor bytes are read with plain
  // loads, larger ones up to l2_bytes * stream_max_l2_multiple with
  // evict-first (streaming) loads, larger ones again with plain loads. A
  // small input is likely still in L2 from the kernel that wrote it, and
  // evict-first loads give that up; one about the size of L2 keeps less of
  // the output traffic out of L2 when streamed; past it, evict-first loads
  // measured slower (4-7% on the H200).
  int keep_in_l2_divisor = 0;
  int stream_max_l2_multiple = 0;
};

// sm_90: the spread / flat crossovers, measured 2026-11-26 on an H200 (132 SMs; the H100 has the
// same SM count) with the 4-instruction silu and flat's plain grid-stride loop (act_math.cuh,
// activation.cuh), one `moekit act-and-mul --variant V` process per variant (a second variant in
// the same process measured 0.1-0.2 us slower at these sizes), bf16, d 4096 / 14336 / 18432
// (docs/bench/act-and-mul-notes.md "auto re-fitted"):
// - PDL off: spread fastest or tied up to 147456 outputs (32 x 4096: 1.40 vs 1.41 us; 8 x 18432:
//   1.42 both), flat from 163840 (40 x 4096: 1.44 vs 1.45; 12 x 14336: 1.43 vs 1.44).
// - PDL on: spread-pdl fastest up to 147456 (32 x 4096: 1.13 vs 1.17; 8 x 18432: 1.16 vs 1.17),
//   flat-pdl from 163840 (40 x 4096: 1.19 vs 1.22).
// Both: a wave of 4 spread blocks per SM, 135168 outputs on 132 SMs. (Earlier fits: 16 / 8 blocks
// per SM rounded down to 2^19 / 2^18 with the accurate math, H100 2026-11-25; 10 / 4 after the
// new math but before flat's loop fix, from two-variant processes.)
// keep_in_l2_divisor: H100 (50 MB L2), 2026-11-25, `moekit act-and-mul --tokens 128,1024 --d 4096
// --variant spread,flat --bench` with both load kinds (bf16, 16 rotated input copies):
// a 2 MB input ran 6-18% faster with plain loads (flat 2.51 vs 2.94 µs PDL off,
// 2.02 vs 2.45 PDL on), a 16 MB input 1-3% faster with streaming loads (8.52 vs
// 8.76 µs): the switch sits between, at L2 / 8 = 6.25 MB.
// stream_max_l2_multiple: H200 (60 MB L2), 2026-11-26, the flat kernel with either load kind
// (docs/bench/act-and-mul-notes.md "Streaming loads past L2"): streaming 0.7-5.7% faster for
// 32-56 MB inputs, plain 1-7% faster from 64 MB (4096 x 4096 bf16) up: the switch at 1 x L2.
inline constexpr Policy kPolicySm90 = {
    .spread_blocks_per_sm = 4, .spread_pdl_blocks_per_sm = 4, .keep_in_l2_divisor = 8,
    .stream_max_l2_multiple = 1};
// One row, measured on sm_90 (H100/H200). sm_80 and older devices, and no
// device, take it too (policy_row_for: the oldest row) until a run there
// gives them a row of their own.
inline constexpr std::array<PolicyRow<Policy>, 1> kPolicyRows = {{
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) {
  return policy_row_for<Policy>(kPolicyRows, caps);
}

// Outputs (tokens * d) up to which a problem is latency-bound on `caps`: one
// wave of spread blocks (0 without a device). pdl: the wave of launches with
// PDL (spread_pdl_blocks_per_sm; Variant::launch's pdl, --pdl on).
inline std::int64_t small_max_outputs(const DeviceCaps& caps, bool pdl) {
  const Policy& pol = policy_for(caps);
  const std::int64_t wave = std::int64_t{kSpreadElemsPerThread} * kSpreadThreads *
                            (pdl ? pol.spread_pdl_blocks_per_sm : pol.spread_blocks_per_sm) * caps.sm_count;
  return wave > 0 ? wave : 0;
}

// Streaming (evict-first) loads for an input of `input_bytes` on `caps`:
// past the policy's share of L2 and up to its multiple of L2 (unknown L2:
// streaming).
inline bool stream_loads(std::int64_t input_bytes, const DeviceCaps& caps) {
  const Policy& pol = policy_for(caps);
  if (pol.keep_in_l2_divisor <= 0 || caps.l2_bytes == 0) return true;
  const auto l2 = static_cast<std::int64_t>(caps.l2_bytes);
  return input_bytes > l2 / pol.keep_in_l2_divisor && input_bytes <= l2 * pol.stream_max_l2_multiple;
}

}  // namespace moekit::act
