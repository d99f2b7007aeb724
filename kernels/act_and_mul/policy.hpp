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
};

// sm_90: the crossover measured on the H100 (bench_act, docs/bench/act-and-mul.md):
// 2^19 outputs = one wave of 16 spread blocks per SM on 132 SMs, rounded down
// to a power of two.
inline constexpr Policy kPolicySm90 = {.spread_blocks_per_sm = 16};
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
inline std::int64_t small_max_outputs(const DeviceCaps& caps) {
  const std::int64_t wave = std::int64_t{kSpreadElemsPerThread} * kSpreadThreads *
                            policy_for(caps).spread_blocks_per_sm * caps.sm_count;
  std::int64_t p = 1;
  while (p * 2 <= wave) p *= 2;
  return wave > 0 ? p : 0;
}

}  // namespace moekit::act
