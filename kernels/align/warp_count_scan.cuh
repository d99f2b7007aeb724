// In-warp scan of the experts' block counts, for the one-block layouts
// (`solo`, `stripe`) up to 128 experts.
#pragma once

#include "align/common.cuh"

namespace moekit::align::detail {

// Every warp scans all E <= 32 kP counters cs (kP per lane) itself after the
// counting barrier, so the block scan's two barriers go (8 per lane, E <= 256,
// was 0.15-0.4 us slower than the block scan: align-notes.md "solo").
// Returns all blocks; fb[k] := first block of expert ev[k] (ev[k] < 0: 0).
template <int kP, int kL, bool kPow2>
__device__ __forceinline__ int warp_scan_block_counts(const int* cs, int E, const DivB<kPow2>& db, const int (&ev)[kL],
                                                      int (&fb)[kL]) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  int pre[kP], sum = 0;
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int e = lane * kP + j;
    pre[j] = e < E ? db.div_up(cs[e]) : 0;
    sum += pre[j];
  }
  const int incl = warp_inclusive_scan(sum);
  int run = incl - sum;
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int nb = pre[j];
    pre[j] = run;
    run += nb;
  }
#pragma unroll
  for (int k = 0; k < kL; ++k) {
    const int e = max(ev[k], 0);
    fb[k] = 0;
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int v = __shfl_sync(kFullMask, pre[j], e / kP);
      if (e % kP == j) fb[k] = v;
    }
  }
  return __shfl_sync(kFullMask, incl, kWarp - 1);
}

}  // namespace moekit::align::detail
