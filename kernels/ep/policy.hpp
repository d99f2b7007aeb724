// Per-architecture choices of the ep family. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::ep {

struct Policy {
  // The receive side's layout is permute's auto pick, but with R > 1 ranks
  // permute's `fused` only up to this many slots (R * T * K): a receive
  // problem then keeps about one slot in R (the rest are other ranks'
  // experts or places nothing was sent to), while permute's own threshold
  // was fitted on problems that keep them all (as one rank's does), and
  // fused ranks every slot in every block.
  std::int64_t layout_fused_max_slots = 0;
};

// sm_90, 4 H200s, bench_ep DeepSeek-V3 shapes (K 8), p2p-reduce-signal per
// rank with the layout forced off fused and not: fused ahead at R 2 T 1 / 16
// (16 / 256 slots) and R 4 T 1 / 16 (32 / 512), behind at R 2 T 128 (2048);
// record: docs/bench/ep-notes.md "The receive layout". 1024 lies between the
// last slot count fused won and the first it lost.
inline constexpr Policy kPolicySm90 = {.layout_fused_max_slots = 1024};
// One row, measured on sm_90 (H200); older devices take it too.
inline constexpr std::array<PolicyRow<Policy>, 1> kPolicyRows = {{
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) { return policy_row_for<Policy>(kPolicyRows, caps); }

}  // namespace moekit::ep
