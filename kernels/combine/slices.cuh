// Variant `slices`: work item = (token, column slice of kSliceThreads
// vectors), so a decode batch still spreads over many blocks; each thread
// loads the 16-byte vectors of up to kSliceRows of the token's rows before
// it uses any (all in flight at once), then accumulates them with the same
// j-ascending f32 fused multiply-adds as `gather`: bit for bit too.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "combine/gather.cuh"

namespace moekit::combine::detail {

constexpr int kSliceThreads = 128;
constexpr int kSliceRows = 8;  // rows whose vectors are loaded ahead

// kVec elements per thread: 16 / sizeof(T) (16-byte loads) or 1.
template <class T, int kVec>
struct SliceVec {
  static constexpr bool kWide = kVec * sizeof(T) == 16;
  using Raw = std::conditional_t<kWide, uint4, T>;
  __device__ static Raw load(const T* p) {
    if constexpr (kWide) return __ldg(reinterpret_cast<const uint4*>(p));
    else return *p;
  }
  __device__ static float elem(const Raw& r, int v) { return load_f32(reinterpret_cast<const T*>(&r) + v); }
};

template <class T, int kVec>
__global__ void __launch_bounds__(kSliceThreads)
    slices_combine_kernel(const T* __restrict__ x, const std::int32_t* __restrict__ inverse,
                          const float* __restrict__ w, T* __restrict__ out, std::int64_t tokens, int topk,
                          std::int64_t hidden, std::int64_t slices, float scaling) {
  using SV = SliceVec<T, kVec>;
  __shared__ std::int32_t rows[kMaxTopk];
  __shared__ float wt[kMaxTopk];
  prim::pdl_wait();  // expert_out, inverse and weights; out the previous kernel may still read
  prim::pdl_launch_dependents();
  for (std::int64_t it = blockIdx.x; it < tokens * slices; it += gridDim.x) {
    const std::int64_t t = it / slices;
    const std::int64_t c = ((it - t * slices) * kSliceThreads + threadIdx.x) * kVec;
    __syncthreads();  // the previous item's rows are no longer read
    for (int j = threadIdx.x; j < topk; j += kSliceThreads) {
      rows[j] = inverse[t * topk + j];
      wt[j] = w[t * topk + j];
    }
    __syncthreads();
    if (c >= hidden) continue;
    float acc[kVec];
#pragma unroll
    for (int v = 0; v < kVec; ++v) acc[v] = 0.f;
#pragma unroll 1
    for (int j0 = 0; j0 < topk; j0 += kSliceRows) {
      typename SV::Raw raw[kSliceRows];
#pragma unroll
      for (int u = 0; u < kSliceRows; ++u) {
        const int j = j0 + u;
        if (j < topk && rows[j] >= 0) raw[u] = SV::load(x + std::int64_t(rows[j]) * hidden + c);
      }
#pragma unroll
      for (int u = 0; u < kSliceRows; ++u) {
        const int j = j0 + u;
        if (j < topk && rows[j] >= 0) {
#pragma unroll
          for (int v = 0; v < kVec; ++v) acc[v] = __fmaf_rn(wt[j], SV::elem(raw[u], v), acc[v]);
        }
      }
    }
#pragma unroll
    for (int v = 0; v < kVec; ++v) store(out + t * hidden + c + v, __fmul_rn(acc[v], scaling));
  }
}

}  // namespace moekit::combine::detail
