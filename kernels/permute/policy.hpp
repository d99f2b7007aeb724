// Launch shapes and `auto` thresholds of the permute family, per
// architecture. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::permute {

struct Policy {
  // `auto`: fused (one launch) in the compact layout up to fused_max_slots
  // slots T * K and fused_max_slots_per_expert slots per expert on average;
  // tma from tma_min_slots slots; gather between.
  std::int64_t fused_max_slots = 0;
  int fused_max_slots_per_expert = 0;
  std::int64_t tma_min_slots = 0;
  // fused: about this many blocks per SM (each of at least 4 rows), 256
  // threads up to fused_256_threads_max_slots slots, else 512.
  int fused_blocks_per_sm = 0;
  std::int64_t fused_256_threads_max_slots = 0;
  // Grid caps (grid-stride beyond) of the copy kernels, per SM.
  int copy_blocks_per_sm = 0;
  int tma_blocks_per_sm = 0;
};

// sm_90, from the H100 run of 2026-11-23 (docs/bench/permute-notes.md, CLI sweep of
// the four variants at the DeepSeek-V3, Qwen3-235B and Mixtral shapes):
// fused 4.1 / 5.2 / 15.8 us at T = 1 / 16 / 256 (E = 256, K = 8, H = 7168,
// compact) against gather's 7.9 / 11.5 / 22.5, but 25.2 against 12.4 at
// Mixtral T = 256 (64 slots per expert) and 31 against 8.0 in the padded
// layout at B = 64; tma 209 / 130 / 52 us against gather's 321 / 178 / 60 at
// 32768 / 32768 / 8192 slots, within 1 % of scatter, and 1-4 % slower than
// gather at 512-2048 slots. fused's block size: 256 threads with 4 vectors
// in flight took 4.10 / 5.24 us at T = 1 / 16 (DeepSeek-V3 shape), 512 with 8
// took 4.33 / 4.96 (second run, compare.py): 256 up to 32 slots.
inline constexpr Policy kPolicySm90 = {.fused_max_slots = 2048,
                                       .fused_max_slots_per_expert = 16,
                                       .tma_min_slots = 8192,
                                       .fused_blocks_per_sm = 1,
                                       .fused_256_threads_max_slots = 32,
                                       .copy_blocks_per_sm = 8,
                                       .tma_blocks_per_sm = 8};
// One row, measured on sm_90 (H100/H200). sm_80 and older devices, and no
// device, take it too (policy_row_for: the oldest row) until a run there
// gives them a row of their own.
inline constexpr std::array<PolicyRow<Policy>, 1> kPolicyRows = {{
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) { return policy_row_for<Policy>(kPolicyRows, caps); }

}  // namespace moekit::permute
