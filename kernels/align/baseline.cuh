// Variant `baseline` (count, then scatter; general path): a separate fill kernel writes
// the padding value everywhere, ONE block counts with shared-memory atomics,
// thread 0 scans serially and each expert's thread writes its expert_ids; the
// scatter kernel then places slots with global atomics.
#pragma once

#include "align/common.cuh"
#include "align/scatter.cuh"

namespace moekit::align::detail {

__global__ void fill_sorted_scalar_kernel(Args a) {
  prim::pdl_wait();  // the previous kernel may still read sorted_token_ids
  prim::pdl_launch_dependents();
  fill_range_scalar(a.sorted, 0, a.max_padded, a.numel,
                    static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                    static_cast<std::int64_t>(gridDim.x) * blockDim.x);
}

// Dynamic shared memory: E + 1 ints (counts, then the scan in place).
template <class IdT>
__global__ void baseline_count_kernel(Args a, int* __restrict__ cursor) {
  extern __shared__ int cs[];
  const int t = threadIdx.x, nt = blockDim.x, E = a.num_experts;
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  for (int e = t; e < E; e += nt) cs[e] = 0;
  __syncthreads();
  for (std::int64_t i = t; i < a.numel; i += nt) {
    const int e = expert_at<IdT>(a, i);
    if (e >= 0) atomicAdd(cs + e, 1);
  }
  __syncthreads();
  if (t == 0) {  // the serial scan that blelloch / warpscan parallelise
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
    for (int r = cs[e]; r < cs[e + 1]; r += a.block_size) {
      const int j = r / a.block_size;
      if (j < a.max_blocks) a.eids[j] = e;
    }
  }
  for (std::int64_t j = cs[E] / a.block_size + t; j < a.max_blocks; j += nt) a.eids[j] = -1;
}

}  // namespace moekit::align::detail
