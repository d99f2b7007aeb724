// Variant `blelloch`: the count block's serial scan becomes a
// work-efficient Blelloch scan (up-sweep, then down-sweep) over the padded
// counts, and every thread writes expert_ids by binary search over the scan
// instead of one thread per expert. Padding fused as in vecpad.
#pragma once

#include "align/common.cuh"
#include "align/scatter.cuh"

namespace moekit::align::detail {

inline int next_pow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

// Dynamic shared memory: scan_size (power of two >= E) + E + 1 ints. Loops
// over k let scan_size exceed 2 * blockDim (E up to 16384).
template <class IdT>
__global__ void blelloch_count_kernel(Args a, int* __restrict__ cursor, int scan_size) {
  extern __shared__ int sm[];
  int* buf = sm;
  int* prefix = sm + scan_size;
  const int t = threadIdx.x, nt = blockDim.x, E = a.num_experts;
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  fill_range(a.sorted, 0, a.max_padded, a.numel, t, nt);
  for (int e = t; e < scan_size; e += nt) buf[e] = 0;
  __syncthreads();
  for (std::int64_t i = t; i < a.numel; i += nt) {
    const int e = expert_at<IdT>(a, i);
    if (e >= 0) atomicAdd(buf + e, 1);
  }
  __syncthreads();
  for (int e = t; e < E; e += nt) buf[e] = padded(buf[e], a.block_size);
  __syncthreads();
  int offset = 1;
  for (int d = scan_size >> 1; d > 0; d >>= 1) {  // up-sweep: partial sums
    for (int k = t; k < d; k += nt) buf[offset * (2 * k + 2) - 1] += buf[offset * (2 * k + 1) - 1];
    offset <<= 1;
    __syncthreads();
  }
  if (t == 0) {
    prefix[E] = buf[scan_size - 1];
    *a.total = buf[scan_size - 1];
    buf[scan_size - 1] = 0;
  }
  __syncthreads();
  for (int d = 1; d < scan_size; d <<= 1) {  // down-sweep: distribute
    offset >>= 1;
    for (int k = t; k < d; k += nt) {
      const int ai = offset * (2 * k + 1) - 1;
      const int bi = offset * (2 * k + 2) - 1;
      const int x = buf[ai];
      buf[ai] = buf[bi];
      buf[bi] += x;
    }
    __syncthreads();
  }
  for (int e = t; e < E; e += nt) {
    prefix[e] = buf[e];
    cursor[e] = buf[e];
  }
  __syncthreads();
  write_expert_ids(a, prefix, 0, a.max_blocks, t, nt);
}

}  // namespace moekit::align::detail
