// align in one block, in shared memory: the epilogue of a kernel that wrote
// the ids itself and aligns them in its last block (a router's top-k fused
// with align). Part of align's public kernel API, with its argument pack
// (args.cuh).
//
// Preconditions (what makes it simpler than align's variants): every one of
// the a.numel ids is an int32 in [0, E) (no map, nothing dropped: the ids a
// router just picked); a.numel, E and the ranks fit one block's shared memory
// (block_align_smem_words); every row of sorted_token_ids already holds the
// padding value a.numel (each block of the grid wrote its share with
// fill_padding_share, while its loads were in flight), so block_align writes
// only the real slots. Slots inside an expert come in the order of the shared
// atomics (align's non-stable contract).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "align/args.cuh"
#include "align/common.cuh"
#include "primitives/warp_scan.cuh"

namespace moekit::align {

// Shared memory of block_align, in 4-byte words: counts [E], starts [E + 1],
// a rank per slot [numel].
__host__ __device__ inline std::size_t block_align_smem_words(int num_experts, std::int64_t numel) {
  return 2 * std::size_t(num_experts) + 1 + std::size_t(numel);
}

// This block's share (a 1/gridDim.x slice) of the padding fill: a.numel in
// every row of sorted_token_ids; block_align overwrites the real slots later.
__device__ __forceinline__ void fill_padding_share(const Args& a) {
  const int n = a.numel;
  const int chunk = (a.max_padded + gridDim.x - 1) / gridDim.x;
  const int lo = blockIdx.x * chunk, hi = min(a.max_padded, lo + chunk);
  for (int r = lo + threadIdx.x; r < hi; r += blockDim.x) a.sorted[r] = n;
}

// align on the a.numel ids of a.ids (all in [0, E)), by the calling block,
// every thread of it: per-expert counts with ranks from shared atomics, one
// warp's scan of the padded counts (ceil(E / 32) experts per lane),
// num_tokens_post_pad, expert_ids per expert and the -1 tail, then the
// scatter. smem: block_align_smem_words(E, numel) words. 3 barriers.
__device__ __forceinline__ void block_align(const Args& a, int* smem) {
  const std::int32_t* ids = static_cast<const std::int32_t*>(a.ids);
  const int n = a.numel, E = a.num_experts, B = a.block_size;
  const int tid = threadIdx.x, nt = blockDim.x;
  int* cnt = smem;
  int* start = cnt + E;
  int* rank = start + E + 1;
  for (int i = tid; i < E; i += nt) cnt[i] = 0;
  __syncthreads();
  for (int i = tid; i < n; i += nt) rank[i] = atomicAdd(&cnt[__ldcg(ids + i)], 1);
  __syncthreads();
  if (tid < 32) {  // exclusive scan of the padded counts, ceil(E / 32) experts per lane
    const int chunk = (E + 31) / 32, lo = min(E, tid * chunk), hi = min(E, lo + chunk);
    int acc = 0;
    for (int i = lo; i < hi; ++i) acc += detail::padded(cnt[i], B);
    const int incl = prim::warp_inclusive_scan(acc);
    int run = incl - acc;
    for (int i = lo; i < hi; ++i) start[i] = run, run += detail::padded(cnt[i], B);
    if (tid == 31) start[E] = incl;
  }
  __syncthreads();
  const int total = start[E];
  if (tid == 0) *a.total = total;
  // Padding rows already hold n (fill_padding_share).
  for (int i = tid; i < E; i += nt)
    for (int b = start[i] / B; b < start[i + 1] / B; ++b) a.eids[b] = i;
  for (int b = total / B + tid; b < a.max_blocks; b += nt) a.eids[b] = -1;
  for (int i = tid; i < n; i += nt) a.sorted[start[__ldcg(ids + i)] + rank[i]] = i;
}

}  // namespace moekit::align
