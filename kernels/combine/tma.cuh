// Variant `tma` (sm_90): work item = (token, column segment). Thread 0 hands
// the segment of each of the token's rows to the copy engine (one bulk load
// per row, all completing on one byte-counting barrier); then the block sums
// them from shared memory with `gather`'s arithmetic (j ascending, f32 fused
// multiply-adds, one rounding): bit for bit. No thread issues a global load
// of expert rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "combine/gather.cuh"
#include "primitives/bulk_copy.cuh"

namespace moekit::combine::detail {

constexpr int kTmaThreads = 128;
constexpr std::int64_t kTmaStageBytes = 32768;  // K segments per block

// row_bytes % 16 == 0 and 16-byte aligned x (the launcher checks); segment
// bytes a multiple of 16, so every segment (the last included) is too.
template <class T>
__global__ void __launch_bounds__(kTmaThreads)
    tma_combine_kernel(const T* __restrict__ x, const std::int32_t* __restrict__ inverse,
                       const float* __restrict__ w, T* __restrict__ out, std::int64_t tokens, int topk,
                       std::int64_t hidden, std::int64_t seg, std::int64_t segs, float scaling) {
  constexpr int V = static_cast<int>(16 / sizeof(T));
  extern __shared__ __align__(128) char buf[];
  __shared__ prim::BulkBarrier bar;
  __shared__ std::int32_t rows[kMaxTopk];
  __shared__ float wt[kMaxTopk];
  const T* stage = reinterpret_cast<const T*>(buf);
  if (threadIdx.x == 0) prim::bulk_barrier_init(&bar);
  prim::pdl_wait();  // expert_out, inverse and weights; out the previous kernel may still read
  prim::pdl_launch_dependents();
  unsigned parity = 0;
  for (std::int64_t it = blockIdx.x; it < tokens * segs; it += gridDim.x) {
    const std::int64_t t = it / segs, c0 = (it - t * segs) * seg;
    const std::int64_t n = hidden - c0 < seg ? hidden - c0 : seg;
    __syncthreads();  // the previous item's stage is no longer read (and the barrier is initialised)
    for (int j = threadIdx.x; j < topk; j += kTmaThreads) {
      rows[j] = inverse[t * topk + j];
      wt[j] = w[t * topk + j];
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned bytes = 0;
      for (int j = 0; j < topk; ++j) bytes += rows[j] >= 0 ? static_cast<unsigned>(n * sizeof(T)) : 0u;
      prim::bulk_barrier_expect(&bar, bytes);
      for (int j = 0; j < topk; ++j)
        if (rows[j] >= 0)
          prim::bulk_load(buf + j * seg * sizeof(T), x + std::int64_t(rows[j]) * hidden + c0,
                          static_cast<unsigned>(n * sizeof(T)), &bar);
    }
    prim::bulk_barrier_wait(&bar, parity);
    parity ^= 1;
    for (std::int64_t c = std::int64_t(threadIdx.x) * V; c < n; c += std::int64_t(kTmaThreads) * V) {
      float acc[V];
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = 0.f;
      for (int j = 0; j < topk; ++j) {
        if (rows[j] < 0) continue;
        const uint4 raw = *reinterpret_cast<const uint4*>(stage + j * seg + c);
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = __fmaf_rn(wt[j], load_f32(e + v), acc[v]);
      }
#pragma unroll
      for (int v = 0; v < V; ++v) store(out + t * hidden + c0 + c + v, __fmul_rn(acc[v], scaling));
    }
  }
}

}  // namespace moekit::combine::detail
