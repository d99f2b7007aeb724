// In-warp scan of the experts' block counts, for the layouts where every warp
// scans all experts itself (`solo`, `stripe`, `cluster`) up to 128 experts.
// Comments here keep µs figures: 1 line (why alternative designs lost; not thresholds).
#pragma once

#include <type_traits>

#include "align/common.cuh"

namespace moekit::align::detail {

// Most experts the in-warp scan holds (4 per lane).
constexpr int kWarpScanMaxExperts = 4 * kWarp;

// Experts per lane of warp_scan_block_counts for E experts (1 up to 32, 4 up
// to kWarpScanMaxExperts), or 0 where the kernel takes the block scan instead.
// Host side.
inline int warp_scan_per_lane(int num_experts) {
  return num_experts <= kWarp ? 1 : num_experts <= kWarpScanMaxExperts ? 4 : 0;
}

// f(std::integral_constant<int, kP>{}) for a warp_scan_per_lane value: the
// launchers' dispatch to the instantiation of that scan width.
template <class F>
inline decltype(auto) with_warp_scan_width(int per_lane, F&& f) {
  switch (per_lane) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return f(std::integral_constant<int, 0>{});
  }
}

// nb[p]: the block counts of this lane's experts lane*kP + p -> their first
// blocks (an exclusive scan across the warp, in expert order). Returns all
// blocks, to every lane.
template <int kP>
__device__ __forceinline__ int warp_block_starts(int (&nb)[kP]) {
  int sum = 0;
#pragma unroll
  for (int j = 0; j < kP; ++j) sum += nb[j];
  const int incl = warp_inclusive_scan(sum);
  int run = incl - sum;
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int c = nb[j];
    nb[j] = run;
    run += c;
  }
  return __shfl_sync(kFullMask, incl, kWarp - 1);
}

// vals[e % kP] of the lane holding expert e (lane e / kP), to every lane
// that asks; the whole warp calls it.
template <int kP>
__device__ __forceinline__ int from_expert_lane(const int (&vals)[kP], int e) {
  int out = 0;
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int v = __shfl_sync(kFullMask, vals[j], e / kP);
    if (e % kP == j) out = v;
  }
  return out;
}

// Every warp scans all E <= 32 kP counters cs (kP per lane) itself after the
// counting barrier, so the block scan's two barriers go (8 per lane, E <= 256,
// was 0.15-0.4 us slower than the block scan: align-notes.md "solo").
// Returns all blocks; fb[k] := first block of expert ev[k] (ev[k] < 0: 0).
template <int kP, int kL, bool kPow2>
__device__ __forceinline__ int warp_scan_block_counts(const int* cs, int E, const DivB<kPow2>& db, const int (&ev)[kL],
                                                      int (&fb)[kL]) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  int pre[kP];
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int e = lane * kP + j;
    pre[j] = e < E ? db.div_up(cs[e]) : 0;
  }
  const int blocks = warp_block_starts<kP>(pre);
#pragma unroll
  for (int k = 0; k < kL; ++k) fb[k] = from_expert_lane<kP>(pre, max(ev[k], 0));
  return blocks;
}

}  // namespace moekit::align::detail
