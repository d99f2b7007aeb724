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
  // loads, larger ones with evict-first (streaming) loads. A small input is
  // likely still in L2 from the kernel that wrote it, and evict-first loads
  // give that up; a large one would only push other data out.
  int keep_in_l2_divisor = 0;
};

// sm_90: the crossover measured on the H100 (bench_act, docs/bench/act-and-mul.md):
// 2^19 outputs = one wave of 16 spread blocks per SM on 132 SMs, rounded down
// to a power of two.
// keep_in_l2_divisor: H100 (50 MB L2), 2026-11-25, `moekit act-and-mul --tokens 128,1024 --d 4096
// --variant spread,flat --bench` with both load kinds (bf16, 16 rotated input copies):
// a 2 MB input ran 6-18% faster with plain loads (flat 2.51 vs 2.94 µs PDL off,
// 2.02 vs 2.45 PDL on), a 16 MB input 1-3% faster with streaming loads (8.52 vs
// 8.76 µs): the switch sits between, at L2 / 8 = 6.25 MB.
// spread_pdl_blocks_per_sm: same day and machine, `--tokens 1,16,32,48,64,96,128,192,256,1024
// --d 4096,14336,18432 --variant spread,flat --pdl on`: spread-pdl fastest up to 2^18 outputs
// (64 x 4096: 1.63 vs 1.92 µs; 16 x 18432: 1.78 vs 1.96), flat-pdl from 393216 (96 x 4096:
// 2.02 vs 2.25; 32 x 14336: 2.09 vs 2.57). 8 blocks per SM on 132 SMs: 2^18.
inline constexpr Policy kPolicySm90 = {
    .spread_blocks_per_sm = 16, .spread_pdl_blocks_per_sm = 8, .keep_in_l2_divisor = 8};
// sm_80: not measured yet (no A100 run of `bench_act`): the sm_90 value, per SM.
inline constexpr Policy kPolicySm80 = kPolicySm90;

inline constexpr std::array<PolicyRow<Policy>, 2> kPolicyRows = {{
    {80, kPolicySm80},
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) {
  return policy_row_for<Policy>(kPolicyRows, caps);
}

// Outputs (tokens * d) up to which a problem is latency-bound on `caps`: one
// wave of spread blocks, rounded down to a power of two (0 without a device).
// pdl: the --pdl on wave (spread_pdl_blocks_per_sm).
inline std::int64_t small_max_outputs(const DeviceCaps& caps, bool pdl = false) {
  const Policy& pol = policy_for(caps);
  const std::int64_t wave = std::int64_t{kSpreadElemsPerThread} * kSpreadThreads *
                            (pdl ? pol.spread_pdl_blocks_per_sm : pol.spread_blocks_per_sm) * caps.sm_count;
  std::int64_t p = 1;
  while (p * 2 <= wave) p *= 2;
  return wave > 0 ? p : 0;
}

// Streaming (evict-first) loads for an input of `input_bytes` on `caps`;
// plain loads while it fits the policy's share of L2.
inline bool stream_loads(std::int64_t input_bytes, const DeviceCaps& caps) {
  const int div = policy_for(caps).keep_in_l2_divisor;
  if (div <= 0 || caps.l2_bytes == 0) return true;
  return input_bytes > static_cast<std::int64_t>(caps.l2_bytes / static_cast<std::size_t>(div));
}

}  // namespace moekit::act
