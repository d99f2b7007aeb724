//! @file
//! Warp-wide inclusive prefix sum by register shuffles.
#pragma once

#include <cuda_runtime.h>

namespace moekit::prim {

constexpr int kWarpThreads = 32;
constexpr unsigned kFullWarpMask = 0xffffffffu;

//! Inclusive prefix sum of `v` over the lanes of each warp, in log2(kWidth)
//! shuffle steps: lane l < kWidth gets v[0] + ... + v[l]. Lanes at or past
//! kWidth get partial sums (of their last kWidth lanes); callers ignore them.
//! Every lane of the warp must call it (full-mask shuffles). The lane is
//! threadIdx.x % 32 (one-dimensional blocks).
//!
//! @tparam kWidth lanes that take part, a power of two <= 32: fewer steps when
//!         only a few values are scanned (e.g. 8 for the warp sums of a
//!         256-thread block).
//! @tparam T      an arithmetic type __shfl_up_sync accepts.
template <int kWidth = kWarpThreads, class T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
  static_assert(kWidth >= 1 && kWidth <= kWarpThreads && (kWidth & (kWidth - 1)) == 0,
                "kWidth must be a power of two <= 32");
  const int lane = threadIdx.x & (kWarpThreads - 1);
#pragma unroll
  for (int d = 1; d < kWidth; d <<= 1) {
    const T n = __shfl_up_sync(kFullWarpMask, v, d);
    if (lane >= d) v += n;
  }
  return v;
}

}  // namespace moekit::prim
