//! @file
//! Warp-wide max and sum by butterfly shuffles: every lane gets the same
//! result, bit for bit (each step adds two values that are the same pair in
//! both lanes, and IEEE addition commutes).
#pragma once

#include <cuda_runtime.h>

#include "primitives/warp_scan.cuh"  // kWarpThreads, kFullWarpMask

namespace moekit::prim {

//! @tparam kWidth lanes that take part, a power of two <= 32.
template <int kWidth = kWarpThreads>
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = kWidth / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullWarpMask, v, off));
  return v;
}

template <int kWidth = kWarpThreads>
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = kWidth / 2; off > 0; off >>= 1) v += __shfl_xor_sync(kFullWarpMask, v, off);
  return v;
}

}  // namespace moekit::prim
