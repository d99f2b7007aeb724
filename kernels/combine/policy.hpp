// Launch shapes and the `auto` threshold of the combine family, per
// architecture. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::combine {

struct Policy {
  // slices at K <= 2: two tokens per block when its one-token grid has from
  // .._from to .._to blocks per SM (both inclusive); else one.
  int slices_pair_from_blocks_per_sm = 0;
  int slices_pair_to_blocks_per_sm = 0;
  int tma_blocks_per_sm = 0;  // grid cap of tma
};

// sm_90, H100: the pair band from the launch-shape probe's second round
// (docs/bench/combine-notes.md "combine: launch-shape probe"): at Mixtral's
// K 2 H 4096, two tokens per block won at T 256 (7.8 blocks per SM; 2-5 %
// with PDL off and on) and lost at T 16 and 4096 (0.5 and 124 per SM). tma's
// cap was set, not swept: fitted on 3599bd1 (record not kept).
inline constexpr Policy kPolicySm90 = {
    .slices_pair_from_blocks_per_sm = 2, .slices_pair_to_blocks_per_sm = 16, .tma_blocks_per_sm = 6};
// One row, measured on sm_90 (H100/H200). sm_80 and older devices, and no
// device, take it too (policy_row_for: the oldest row) until a run there
// gives them a row of their own.
inline constexpr std::array<PolicyRow<Policy>, 1> kPolicyRows = {{
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) { return policy_row_for<Policy>(kPolicyRows, caps); }

}  // namespace moekit::combine
