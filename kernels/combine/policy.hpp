// Launch shapes and the `auto` threshold of the combine family, per
// architecture. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::combine {

struct Policy {
  int slices_blocks_per_sm = 0;  // grid cap of slices (grid-stride beyond)
  int tma_blocks_per_sm = 0;     // grid cap of tma
};

// sm_90: from the H100 run of 2026-11-23 (docs/bench/combine-notes.md): grid caps
// as first set; slices was the fastest variant in all 13 cells of the sweep.
inline constexpr Policy kPolicySm90 = {.slices_blocks_per_sm = 16, .tma_blocks_per_sm = 6};
// One row, measured on sm_90 (H100/H200). sm_80 and older devices, and no
// device, take it too (policy_row_for: the oldest row) until a run there
// gives them a row of their own.
inline constexpr std::array<PolicyRow<Policy>, 1> kPolicyRows = {{
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) { return policy_row_for<Policy>(kPolicyRows, caps); }

}  // namespace moekit::combine
