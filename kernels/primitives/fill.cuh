//! @file
//! Block- or warp-strided fills of an int32 range, e.g. the padding rows of an
//! output.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace moekit::prim {

//! dst[lo, hi) = v by threads t of nt (t in [0, nt)), 16-byte stores in the
//! aligned middle, scalar stores for the unaligned head and tail. Every index
//! must fit int32, so the math is 32-bit; the head and tail share one rolled
//! loop: this is inlined at many call sites of short kernels, where code size
//! costs instruction fetches. Pass (lane, 32) for a warp, (threadIdx.x,
//! blockDim.x) for a block.
__device__ __forceinline__ void fill_range(std::int32_t* dst, std::int64_t lo64, std::int64_t hi64,
                                           std::int32_t v, std::int64_t t64, std::int64_t nt64) {
  const int lo = static_cast<int>(lo64), hi = static_cast<int>(hi64);
  const int t = static_cast<int>(t64), nt = static_cast<int>(nt64);
  if (lo >= hi) return;
  const int mis = static_cast<int>((reinterpret_cast<std::uintptr_t>(dst + lo) & 15) / 4);
  const int head = min(hi - lo, (4 - mis) & 3);
  const int mid = lo + head;
  const int nvec = (hi - mid) >> 2;
  const int tail = mid + 4 * nvec;
  const int nscalar = head + (hi - tail);
#pragma unroll 1
  for (int k = t; k < nscalar; k += nt) dst[k < head ? lo + k : tail + (k - head)] = v;
  int4* q = reinterpret_cast<int4*>(dst + mid);
  const int4 vv = make_int4(v, v, v, v);
#pragma unroll 1
  for (int i = t; i < nvec; i += nt) q[i] = vv;
}

//! Plain element-by-element fill of dst[lo, hi) (64-bit indices), for the
//! designs measured without vector stores.
__device__ __forceinline__ void fill_range_scalar(std::int32_t* dst, std::int64_t lo,
                                                  std::int64_t hi, std::int32_t v, std::int64_t t,
                                                  std::int64_t nt) {
  for (std::int64_t i = lo + t; i < hi; i += nt) dst[i] = v;
}

}  // namespace moekit::prim
