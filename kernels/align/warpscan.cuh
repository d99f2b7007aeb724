// Variants `warpscan` and `fill-overlap` (its large path).
// warpscan: the scan is a two-level warp-shuffle scan (3 barriers instead of
// 2 log2(E)); here each thread first sums a contiguous chunk so E may exceed
// the block size. fill-overlap: the launch gets a second block whose only job is the
// padding fill, which then overlaps the count block.
#pragma once

#include "align/common.cuh"
#include "align/scatter.cuh"

namespace moekit::align::detail {

// Dynamic shared memory: E + 1 ints. kFillBlock: launched with 2 blocks and
// block 1 fills; otherwise the count block fills first.
template <class IdT, bool kFillBlock>
__global__ void warpscan_count_kernel(Args a, int* __restrict__ cursor) {
  extern __shared__ int cs[];
  __shared__ int warp_sums[kWarp + 1];
  const int t = threadIdx.x, nt = blockDim.x, E = a.num_experts;
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  if constexpr (kFillBlock) {
    if (blockIdx.x == 1) {
      fill_range(a.sorted, 0, a.max_padded, a.numel, t, nt);
      return;
    }
  } else {
    fill_range(a.sorted, 0, a.max_padded, a.numel, t, nt);
  }
  for (int e = t; e < E; e += nt) cs[e] = 0;
  __syncthreads();
  for (std::int64_t i = t; i < a.numel; i += nt) {
    const int e = expert_at<IdT>(a, i);
    if (e >= 0) atomicAdd(cs + e, 1);
  }
  __syncthreads();
  for (int e = t; e < E; e += nt) cs[e] = padded(cs[e], a.block_size);
  __syncthreads();
  const int total = block_exclusive_scan(cs, E, warp_sums);
  if (t == 0) *a.total = total;
  for (int e = t; e < E; e += nt) cursor[e] = cs[e];
  write_expert_ids(a, cs, 0, a.max_blocks, t, nt);
}

}  // namespace moekit::align::detail
