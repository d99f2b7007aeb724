// align in one block, in shared memory: the epilogue of a kernel that wrote
// the ids itself and aligns them in its last block (a router's top-k fused
// with align). Part of align's public kernel API; its arguments come as a
// View of align's argument pack (args.cuh) or of the caller's own.
//
// Preconditions (what makes it simpler than align's variants): every one of
// the numel ids is an int32 in [0, E) (no map, nothing dropped: the ids a
// router just picked); a.numel, E and the ranks fit one block's shared memory
// (block_align_smem_words); every row of sorted_token_ids already holds the
// padding value numel (each block of the grid wrote its share with
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

// The arguments of fill_padding_share and block_align, as a View (CUB-style: a
// concept, checked by instantiation) whose members are read where they are
// used, so a fusing kernel passes a view of its own argument pack and the
// inlined code reads its kernel parameters as if it had written the loops
// itself:
//   int numel(), num_experts(), block_size(), max_padded(), max_blocks();
//   const std::int32_t* ids(); std::int32_t* sorted(), eids(), total().
// ArgsView is the view of align's own Args.
struct ArgsView {
  const Args& a;
  __device__ int numel() const { return a.numel; }
  __device__ int num_experts() const { return a.num_experts; }
  __device__ int block_size() const { return a.block_size; }
  __device__ int max_padded() const { return a.max_padded; }
  __device__ int max_blocks() const { return a.max_blocks; }
  __device__ const std::int32_t* ids() const { return static_cast<const std::int32_t*>(a.ids); }
  __device__ std::int32_t* sorted() const { return a.sorted; }
  __device__ std::int32_t* eids() const { return a.eids; }
  __device__ std::int32_t* total() const { return a.total; }
};

// This block's share (a 1/gridDim.x slice) of the padding fill: numel in
// every row of sorted_token_ids; block_align overwrites the real slots later.
// @tparam View  the arguments (above).
template <class View>
__device__ __forceinline__ void fill_padding_share(const View& v) {
  const int n = v.numel();
  const int chunk = (v.max_padded() + gridDim.x - 1) / gridDim.x;
  const int lo = blockIdx.x * chunk, hi = min(v.max_padded(), lo + chunk);
  for (int r = lo + threadIdx.x; r < hi; r += blockDim.x) v.sorted()[r] = n;
}

// align on the numel ids (all in [0, E)), by the calling block, every thread
// of it: per-expert counts with ranks from shared atomics, one warp's scan of
// the padded counts (ceil(E / 32) experts per lane), num_tokens_post_pad,
// expert_ids per expert and the -1 tail, then the scatter. smem:
// block_align_smem_words(E, numel) words. 3 barriers.
// @tparam View  the arguments (above).
template <class View>
__device__ __forceinline__ void block_align(const View& v, int* smem) {
  const int n = v.numel(), E = v.num_experts(), B = v.block_size();
  const int tid = threadIdx.x, nt = blockDim.x;
  int* cnt = smem;
  int* start = cnt + E;
  int* rank = start + E + 1;
  for (int i = tid; i < E; i += nt) cnt[i] = 0;
  __syncthreads();
  for (int i = tid; i < n; i += nt) rank[i] = atomicAdd(&cnt[__ldcg(v.ids() + i)], 1);
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
  if (tid == 0) *v.total() = total;
  // Padding rows already hold n (fill_padding_share).
  for (int i = tid; i < E; i += nt)
    for (int b = start[i] / B; b < start[i + 1] / B; ++b) v.eids()[b] = i;
  for (int b = total / B + tid; b < v.max_blocks(); b += nt) v.eids()[b] = -1;
  for (int i = tid; i < n; i += nt) v.sorted()[start[__ldcg(v.ids() + i)] + rank[i]] = i;
}

}  // namespace moekit::align
