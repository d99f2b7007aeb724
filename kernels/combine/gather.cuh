// Variant `gather`: one block per token (grid-stride); each thread owns a few
// columns and accumulates w[t, j] * expert_out[inverse[t, j]] over j ascending
// with fused multiply-adds in f32, then multiplies by S and rounds once to the
// output dtype: the reference's arithmetic exactly, so the result is bit for
// bit. Rows load as 16-byte vectors where H and the pointers allow.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "primitives/convert.cuh"
#include "primitives/pdl.cuh"

namespace moekit::combine::detail {

using prim::load_f32;
using prim::store;

constexpr int kMaxTopk = 64;  // weights and rows of one token staged in shared memory

// kVec elements per thread step (16 bytes when kVec * sizeof(T) == 16).
template <class T, int kVec>
__global__ void gather_combine_kernel(const T* __restrict__ x, const std::int32_t* __restrict__ inverse,
                                      const float* __restrict__ w, T* __restrict__ out, std::int64_t tokens, int topk,
                                      std::int64_t hidden, float scaling) {
  __shared__ std::int32_t rows[kMaxTopk];
  __shared__ float wt[kMaxTopk];
  prim::pdl_wait();  // expert_out, inverse and weights; out the previous kernel may still read
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    __syncthreads();  // the previous token's rows are no longer read
    for (int j = threadIdx.x; j < topk; j += blockDim.x) {
      rows[j] = inverse[t * topk + j];
      wt[j] = w[t * topk + j];
    }
    __syncthreads();
    for (std::int64_t c = std::int64_t(threadIdx.x) * kVec; c < hidden; c += std::int64_t(blockDim.x) * kVec) {
      float acc[kVec];
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc[v] = 0.f;
      for (int j = 0; j < topk; ++j) {
        const std::int32_t r = rows[j];
        if (r < 0) continue;
        const T* src = x + std::int64_t(r) * hidden + c;
        if constexpr (kVec * sizeof(T) == 16) {
          const uint4 raw = __ldg(reinterpret_cast<const uint4*>(src));
          const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
          for (int v = 0; v < kVec; ++v) acc[v] = __fmaf_rn(wt[j], load_f32(e + v), acc[v]);
        } else {
#pragma unroll
          for (int v = 0; v < kVec; ++v) acc[v] = __fmaf_rn(wt[j], load_f32(src + v), acc[v]);
        }
      }
#pragma unroll
      for (int v = 0; v < kVec; ++v) store(out + t * hidden + c + v, __fmul_rn(acc[v], scaling));
    }
  }
  prim::pdl_launch_dependents();  // one block per token: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

}  // namespace moekit::combine::detail
