//! @file
//! Arg-max of (value, index) pairs over a warp or a block, ties to the lower
//! index: the comparison every top-k selection of moekit uses, so that a kernel
//! and the CPU reference agree on ties.
#pragma once

#include <cuda_runtime.h>

#include <climits>

#include "primitives/warp_scan.cuh"  // kWarpThreads, kFullWarpMask

namespace moekit::prim {

//! A candidate: its value and its index. Empty candidates are
//! {-inf, INT_MAX}, which lose to every real one.
struct ArgMax {
  float v;
  int i;
};

__device__ __forceinline__ ArgMax argmax_empty() { return {-__int_as_float(0x7f800000), INT_MAX}; }

//! a beats b: larger value, or equal value and lower index. Never NaN.
__device__ __forceinline__ bool argmax_better(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

//! The best candidate of the warp, in every lane (log2(kWidth) butterfly steps
//! of two shuffles). Every lane of the warp calls it.
//! @tparam kWidth lanes that take part, a power of two <= 32 (groups of
//!         kWidth consecutive lanes each get their own best).
template <int kWidth = kWarpThreads>
__device__ __forceinline__ ArgMax warp_argmax(ArgMax a) {
  static_assert(kWidth >= 1 && kWidth <= kWarpThreads && (kWidth & (kWidth - 1)) == 0,
                "kWidth must be a power of two <= 32");
#pragma unroll
  for (int off = kWidth / 2; off > 0; off >>= 1) {
    const float v = __shfl_xor_sync(kFullWarpMask, a.v, off);
    const int i = __shfl_xor_sync(kFullWarpMask, a.i, off);
    if (argmax_better(v, i, a.v, a.i)) a = {v, i};
  }
  return a;
}

//! A float's bits as an int that orders like the float (-0 below +0; no NaN).
__device__ __forceinline__ int argmax_key(float v) {
  const int b = __float_as_int(v);
  return b >= 0 ? b : b ^ 0x7fffffff;
}
__device__ __forceinline__ float argmax_key_value(int k) { return __int_as_float(k >= 0 ? k : k ^ 0x7fffffff); }

//! warp_argmax over the full warp in two warp-wide integer reductions (the
//! largest value's key, then the lowest index holding it): two dependent
//! instructions on sm_80+ instead of five dependent shuffle pairs. Values
//! compare as argmax_key does: callers must not mix -0 and +0.
__device__ __forceinline__ ArgMax warp_argmax_redux(ArgMax a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int k = __reduce_max_sync(kFullWarpMask, argmax_key(a.v));
  const unsigned i = __reduce_min_sync(kFullWarpMask, argmax_key(a.v) == k ? static_cast<unsigned>(a.i) : 0xffffffffu);
  return {argmax_key_value(k), static_cast<int>(i)};
#else
  return warp_argmax(a);
#endif
}

//! The best candidate of the block, in every thread: a warp arg-max, then
//! every thread reduces the warps' winners from shared memory. One barrier.
//! `slots` holds kThreads / 32 entries and must not be reused before the next
//! barrier (alternate two buffers between back-to-back calls).
//! @tparam kThreads the block size, a multiple of 32 up to 1024.
template <int kThreads>
__device__ __forceinline__ ArgMax block_argmax(ArgMax a, ArgMax* slots) {
  static_assert(kThreads % kWarpThreads == 0 && kThreads <= 1024, "kThreads: a multiple of 32 up to 1024");
  constexpr int kWarps = kThreads / kWarpThreads;
  a = warp_argmax_redux(a);
  if (kWarps == 1) return a;
  if ((threadIdx.x & (kWarpThreads - 1)) == 0) slots[threadIdx.x / kWarpThreads] = a;
  __syncthreads();
  ArgMax best = slots[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) {
    const ArgMax o = slots[w];
    if (argmax_better(o.v, o.i, best.v, best.i)) best = o;
  }
  return best;
}

}  // namespace moekit::prim
