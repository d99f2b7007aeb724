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

// sm_90: the spread / flat crossovers, on an H200 (132 SMs, as the H100) with
// the 4-instruction silu and flat's plain grid-stride loop, one
// `moekit act-and-mul --variant V` process per variant, bf16, d 4096 / 14336 /
// 18432: spread (spread-pdl with PDL on) fastest or tied up to 147456
// outputs, flat (flat-pdl) from 163840, PDL off and on: a wave of 4 spread
// blocks per SM, 135168 outputs on 132 SMs. Record:
// docs/bench/act-and-mul-notes.md "auto re-fitted again (one process per
// variant)" (earlier fits: docs/bench/act-and-mul-notes.md "auto re-fitted").
// keep_in_l2_divisor: H100 (50 MB L2), `moekit act-and-mul --tokens 128,1024
// --d 4096 --variant spread,flat --bench` with both load kinds: plain loads
// faster for a 2 MB input, streaming loads for a 16 MB one, the switch between
// at L2 / 8; fitted on 0ce799b (record not kept).
// stream_max_l2_multiple: H200 (60 MB L2), the flat kernel with either load
// kind: streaming faster for 32-56 MB inputs, plain from 64 MB up, the switch
// at 1 x L2; record: docs/bench/act-and-mul-notes.md "Streaming loads past L2".
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
