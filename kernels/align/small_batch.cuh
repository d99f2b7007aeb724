// Variant `small-batch` (baseline's one-launch path for small inputs) and the
// small path of `fill-overlap`: one block, one launch. Every compute thread keeps its
// own row of per-expert counters in shared memory, so counting needs no
// atomics; a column prefix over the rows then gives every thread its private
// starting row per expert. Sized for numel < 1024 and E <= 64.
#pragma once

#include "align/common.cuh"

namespace moekit::align::detail {

constexpr int kSmallBatchThreads = 64;       // compute threads; must be >= E
constexpr int kSmallBatchMaxExperts = 64;
constexpr int kSmallBatchMaxNumel = 1023;
constexpr int kOverlapFillThreads = 256;     // fill-overlap: dedicated padding threads

inline std::size_t small_batch_smem(int num_experts) {
  return sizeof(int) * (static_cast<std::size_t>(num_experts) + 1 +
                        static_cast<std::size_t>(kSmallBatchThreads + 1) * num_experts);
}

// kFillThreads == 0: all threads fill first (small-batch). kFillThreads > 0: those
// threads only fill, with 16-byte stores, while the others count (fill-overlap). The
// three barriers are reached by every thread at the same call sites; the fill
// is complete at the first one, long before any slot is placed.
template <class IdT, int kFillThreads>
__global__ void small_batch_kernel(Args a) {
  extern __shared__ int sm[];
  const int E = a.num_experts;
  const int C = blockDim.x - kFillThreads;  // compute threads
  int* cs = sm;                             // E + 1: expert starts
  int* cnt = sm + E + 1;                    // (C + 1) x E; row r + 1 = thread r
  const bool filler = static_cast<int>(threadIdx.x) < kFillThreads;
  const int t = static_cast<int>(threadIdx.x) - kFillThreads;
  prim::pdl_wait();
  prim::pdl_launch_dependents();

  if constexpr (kFillThreads == 0) {
    fill_range_scalar(a.sorted, 0, a.max_padded, a.numel, threadIdx.x, blockDim.x);
  } else if (filler) {
    fill_range(a.sorted, 0, a.max_padded, a.numel, threadIdx.x, kFillThreads);
  }
  if (!filler) {
    int* mine = cnt + (t + 1) * E;
    for (int e = 0; e < E; ++e) mine[e] = 0;
    for (int i = t; i < a.numel; i += C) {
      const int e = expert_at<IdT>(a, i);
      if (e >= 0) ++mine[e];
    }
  }
  __syncthreads();
  if (!filler && t < E) {  // column prefix: row r = slots of threads < r
    cnt[t] = 0;
    for (int r = 1; r <= C; ++r) cnt[r * E + t] += cnt[(r - 1) * E + t];
  }
  __syncthreads();
  if (!filler && t == 0) {
    int run = 0;
    for (int e = 0; e < E; ++e) {
      cs[e] = run;
      run += padded(cnt[C * E + e], a.block_size);
    }
    cs[E] = run;
    *a.total = run;
  }
  __syncthreads();
  if (filler) return;
  for (int e = t; e < E; e += C)
    for (int r = cs[e]; r < cs[e + 1]; r += a.block_size)
      if (r / a.block_size < a.max_blocks) a.eids[r / a.block_size] = e;
  for (int j = cs[E] / a.block_size + t; j < a.max_blocks; j += C) a.eids[j] = -1;
  int* mine = cnt + t * E;
  for (int i = t; i < a.numel; i += C) {
    const int e = expert_at<IdT>(a, i);
    if (e < 0) continue;
    const int row = cs[e] + mine[e]++;
    if (row < a.max_padded) a.sorted[row] = i;
  }
}

}  // namespace moekit::align::detail
