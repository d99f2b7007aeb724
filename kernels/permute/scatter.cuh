// Variant `scatter` (and the first half of `tma`): align sorts the slots, a
// rows pass turns its row -> slot map into the slot -> row map (inverse) and
// zeroes the padding rows, then the copy goes token by token: each hidden
// vector is loaded ONCE and stored to the token's K rows, kUnroll vectors in
// flight per thread, so K * kUnroll stores are in flight per thread where the
// gather design re-reads the token's row K times (once per row, one row per
// block).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "permute/dropped.cuh"
#include "permute/offsets.cuh"
#include "primitives/pdl.cuh"

namespace moekit::permute::detail {

// One warp per row of [0, num_tokens_post_pad): a slot's row records
// inverse[slot] = row; a padding row (slot >= numel) is zeroed.
template <class V>
__global__ void rows_pass_kernel(V* __restrict__ permuted, const std::int32_t* __restrict__ sorted,
                                 const std::int32_t* __restrict__ total, std::int32_t* __restrict__ inverse,
                                 std::int64_t numel, std::int64_t row_vecs, std::int64_t rows, OffsetsOut o,
                                 DroppedOut d) {
  prim::pdl_wait();  // align's outputs; the rows the previous kernel may still read
  const std::int64_t thread = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x,
                     threads = std::int64_t(gridDim.x) * blockDim.x;
  if (o.offsets != nullptr) write_offsets(o, *total, thread, threads);
  mark_dropped(d, thread, threads);
  const std::int64_t limit = min(static_cast<std::int64_t>(*total), rows);
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = std::int64_t(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t r = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < limit; r += warps) {
    const std::int32_t slot = sorted[r];
    if (slot < numel) {
      if (lane == 0) inverse[slot] = static_cast<std::int32_t>(r);
    } else {
      V* out = permuted + r * row_vecs;
      for (std::int64_t i = lane; i < row_vecs; i += 32) out[i] = V{};
    }
  }
  prim::pdl_launch_dependents();  // at the end: a long row copy (primitives/pdl.cuh)
}

constexpr int kScatterThreads = 128;
constexpr int kScatterUnroll = 4;
constexpr int kScatterMaxTopk = 64;  // a token's rows staged in shared memory

// Work item w = (token, column slice of kScatterThreads * kScatterUnroll
// vectors): a slice keeps small batches spread over many blocks.
template <class V>
__global__ void __launch_bounds__(kScatterThreads)
    scatter_tokens_kernel(const V* __restrict__ hidden, V* __restrict__ permuted,
                          const std::int32_t* __restrict__ inverse, std::int64_t tokens, int topk,
                          std::int64_t row_vecs, std::int64_t slices) {
  constexpr int U = kScatterUnroll, kSlice = kScatterThreads * U;
  __shared__ std::int32_t rows[kScatterMaxTopk];
  prim::pdl_wait();  // inverse from the rows pass
  for (std::int64_t w = blockIdx.x; w < tokens * slices; w += gridDim.x) {
    const std::int64_t t = w / slices, c0 = (w - t * slices) * kSlice;
    __syncthreads();  // the previous item's rows are no longer read
    for (int j = threadIdx.x; j < topk; j += kScatterThreads) rows[j] = inverse[t * topk + j];
    __syncthreads();
    V v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t c = c0 + u * kScatterThreads + threadIdx.x;
      if (c < row_vecs) v[u] = __ldg(hidden + t * row_vecs + c);
    }
    for (int j = 0; j < topk; ++j) {
      const std::int32_t r = rows[j];
      if (r < 0) continue;
      V* out = permuted + std::int64_t(r) * row_vecs;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const std::int64_t c = c0 + u * kScatterThreads + threadIdx.x;
        if (c < row_vecs) out[c] = v[u];
      }
    }
  }
  prim::pdl_launch_dependents();  // at the end: a long row copy (primitives/pdl.cuh)
}

}  // namespace moekit::permute::detail
