// Launch shapes and the `auto` threshold of the combine family, per
// architecture. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::combine {

struct Policy {
  // `auto` picks `slices` while T <= slices_tokens_per_sm * SMs (small
  // batches: one block per token leaves most SMs idle), else `gather`.
  int slices_tokens_per_sm = 0;
  int slices_blocks_per_sm = 0;  // grid cap of slices (grid-stride beyond)
  int tma_blocks_per_sm = 0;     // grid cap of tma
};

// sm_90: PROVISIONAL until the first H100 run of the combine sweep
// (docs/bench/combine.md replaces this line with the run it comes from).
inline constexpr Policy kPolicySm90 = {.slices_tokens_per_sm = 1, .slices_blocks_per_sm = 16, .tma_blocks_per_sm = 6};
// sm_80: not measured: the sm_90 values, per SM.
inline constexpr Policy kPolicySm80 = kPolicySm90;

inline constexpr std::array<PolicyRow<Policy>, 2> kPolicyRows = {{
    {80, kPolicySm80},
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) { return policy_row_for<Policy>(kPolicyRows, caps); }

}  // namespace moekit::combine
