// The compact layout's expert offsets from align's expert_ids (one binary
// search per expert), as a device function for the first kernel after align
// and as a kernel of its own where no such kernel runs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "primitives/pdl.cuh"

namespace moekit::permute::detail {

// The compact layout's offsets, written by the first kernel after align
// (gather's or the rows pass; a kernel of their own only where neither
// runs): offsets == nullptr in the padded layout.
struct OffsetsOut {
  const std::int32_t* __restrict__ expert_ids;
  std::int64_t* __restrict__ offsets;
  int experts;
};

// offsets[e] = the first row of expert e (rows are in expert order; experts
// with no rows start where the next one does), offsets[E] = the first row
// after the E experts: the row count, or where the bucket starts (its rows
// read -1, which the unsigned compare puts after every expert). Grid-strided
// over e from thread `first` of `stride`; n: align's num_tokens_post_pad.
__device__ __forceinline__ void write_offsets(const OffsetsOut& o, int n, std::int64_t first, std::int64_t stride) {
  for (std::int64_t e = first; e <= o.experts; e += stride) {
    int lo = 0, hi = n;  // first row whose expert is >= e
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (static_cast<unsigned>(o.expert_ids[mid]) < static_cast<unsigned>(e)) lo = mid + 1;
      else hi = mid;
    }
    o.offsets[e] = lo;
  }
}

__global__ void compact_offsets_kernel(OffsetsOut o, const std::int32_t* __restrict__ total) {
  prim::pdl_wait();  // align's expert_ids and num_tokens_post_pad
  prim::pdl_launch_dependents();
  write_offsets(o, *total, blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x, std::int64_t(gridDim.x) * blockDim.x);
}

}  // namespace moekit::permute::detail
