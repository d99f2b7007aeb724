// Launch shapes and `auto` thresholds of the permute family, per
// architecture. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::permute {

struct Policy {
  // `auto` picks `fused` (one launch) up to this many slots T * K.
  std::int64_t fused_max_slots = 0;
  // fused: about this many blocks per SM (each of at least 4 rows), 256
  // threads up to fused_256_threads_max_slots slots, else 512.
  int fused_blocks_per_sm = 0;
  std::int64_t fused_256_threads_max_slots = 0;
  // Grid caps (grid-stride beyond) of the copy kernels, per SM.
  int copy_blocks_per_sm = 0;
  int tma_blocks_per_sm = 0;
};

// sm_90: PROVISIONAL until the first H100 run of the permute sweep
// (docs/bench/permute.md replaces this line with the run it comes from).
inline constexpr Policy kPolicySm90 = {.fused_max_slots = 1024,
                                       .fused_blocks_per_sm = 1,
                                       .fused_256_threads_max_slots = 1024,
                                       .copy_blocks_per_sm = 8,
                                       .tma_blocks_per_sm = 8};
// sm_80: not measured: the sm_90 values, per SM.
inline constexpr Policy kPolicySm80 = kPolicySm90;

inline constexpr std::array<PolicyRow<Policy>, 2> kPolicyRows = {{
    {80, kPolicySm80},
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) { return policy_row_for<Policy>(kPolicyRows, caps); }

}  // namespace moekit::permute
