// Variant `vecpad`: the baseline's count block also writes the
// padding value over sorted_token_ids with 16-byte stores, so the separate
// fill launch disappears. Scan stays serial; scatter stays atomic.
#pragma once

#include "align/common.cuh"
#include "align/scatter.cuh"

namespace moekit::align::detail {

// Dynamic shared memory: E + 1 ints.
template <class IdT>
__global__ void vecpad_count_kernel(Args a, int* __restrict__ cursor) {
  extern __shared__ int cs[];
  const int t = threadIdx.x, nt = blockDim.x, E = a.num_experts;
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  // The scatter kernel runs after this one, so padding everything first is safe.
  fill_range(a.sorted, 0, a.max_padded, a.numel, t, nt);
  for (int e = t; e < E; e += nt) cs[e] = 0;
  __syncthreads();
  for (std::int64_t i = t; i < a.numel; i += nt) {
    const int e = expert_at<IdT>(a, i);
    if (e >= 0) atomicAdd(cs + e, 1);
  }
  __syncthreads();
  if (t == 0) {
    int run = 0;
    for (int e = 0; e < E; ++e) {
      const int c = cs[e];
      cs[e] = run;
      run += padded(c, a.block_size);
    }
    cs[E] = run;
    *a.total = run;
  }
  __syncthreads();
  for (int e = t; e < E; e += nt) {
    cursor[e] = cs[e];
    for (int r = cs[e]; r < cs[e + 1]; r += a.block_size)
      if (r / a.block_size < a.max_blocks) a.eids[r / a.block_size] = e;
  }
  for (std::int64_t j = cs[E] / a.block_size + t; j < a.max_blocks; j += nt) a.eids[j] = -1;
}

}  // namespace moekit::align::detail
