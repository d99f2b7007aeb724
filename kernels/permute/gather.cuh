// Variant `gather`: align (its `auto` pick) sorts the slots by expert, then
// one block per output row copies hidden[slot / K] into it (16-byte vectors
// where the row allows, else 4- or 2-byte words), writes zeros into padding
// rows and records inverse[slot] = row. The compact layout runs align with
// B = 1 and derives the per-expert offsets by a binary search per expert.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "permute/dropped.cuh"
#include "permute/offsets.cuh"
#include "primitives/pdl.cuh"

namespace moekit::permute::detail {

// Row r of permuted: its slot's token row, or zeros past the slots; and
// (compact layout) the offsets.
template <class V>
__global__ void gather_rows_kernel(const V* __restrict__ hidden, V* __restrict__ permuted,
                                   const std::int32_t* __restrict__ sorted, const std::int32_t* __restrict__ total,
                                   std::int32_t* __restrict__ inverse, std::int64_t numel, int topk,
                                   std::int64_t row_vecs, std::int64_t rows, OffsetsOut o, DroppedOut d) {
  prim::pdl_wait();  // align's outputs; the rows the previous kernel may still read
  const std::int64_t limit = *total;  // rows past num_tokens_post_pad are left alone
  const std::int64_t thread = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x,
                     threads = std::int64_t(gridDim.x) * blockDim.x;
  if (o.offsets != nullptr) write_offsets(o, static_cast<int>(limit), thread, threads);
  mark_dropped(d, thread, threads);
  for (std::int64_t r = blockIdx.x; r < rows && r < limit; r += gridDim.x) {
    const std::int32_t slot = sorted[r];
    V* out = permuted + r * row_vecs;
    if (slot < numel) {
      const V* in = hidden + (slot / topk) * row_vecs;
      for (std::int64_t i = threadIdx.x; i < row_vecs; i += blockDim.x) out[i] = in[i];
      if (threadIdx.x == 0) inverse[slot] = static_cast<std::int32_t>(r);
    } else {
      for (std::int64_t i = threadIdx.x; i < row_vecs; i += blockDim.x) out[i] = V{};
    }
  }
  prim::pdl_launch_dependents();  // at the end: a long row copy (primitives/pdl.cuh)
}

}  // namespace moekit::permute::detail
