// Variant `cluster` (mid-sized inputs, few experts): ONE thread block
// cluster (sm_90+) of up to 16 blocks; the cluster barrier and distributed
// shared memory replace onepass's global atomics and grid-wide wait (onepass
// costs ~4.5 µs however few its slots). Every block:
//
//   1. issues its 16-byte id loads (slots [r * S, (r + 1) * S) of block r),
//      fills its 1/CS share of sorted_token_ids with the padding value while
//      they are in flight, and ranks its slots with shared atomics;
//   2. once every block of the cluster runs (a relaxed cluster barrier that
//      it arrived on at its start), stores its E counts into row r of every
//      block's [CS][E] table in shared memory;
//   3. cluster barrier (release / acquire: every table complete, and every
//      block's fill before any slot store); no shared memory of another
//      block is touched after it, so blocks leave when done;
//   4. sums its table per expert (the total and the slots of blocks before
//      it), scans the padded totals, writes its slots at start[e] +
//      before[e] + rank and its 1/CS share of expert_ids.
//
// Pushing the counts (stores, no round trip) instead of pulling them after
// the barrier (remote loads, and a second barrier so that no block leaves
// while read) was 0.3-1.1 µs faster (H100, align-notes.md "cluster").
//
// No workspace; unstable (the order inside an expert is the shared atomics').
// Every pass over E runs in every block, and the cluster's launch costs more
// the more blocks it has: a design for few experts and at most 16 K slots.
#pragma once

#include <cooperative_groups.h>

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

// sm_90's largest cluster (the non-portable size; 8 portable).
constexpr int kClusterMaxBlocks = 16;
constexpr int kClusterMaxThreads = 1024;
// E limit: (CS+3)E+1 ints per block stay at most 76 KiB, so with two 1024-thread
// blocks per SM (the launch bounds cap the registers) 16 blocks need 8 SMs
// of one GPC; beyond, every block's E-wide passes lose to onepass anyway.
constexpr int kClusterMaxExperts = 1024;

// Dynamic shared memory: (CS + 3)E + 1 ints (counts, every block's counts,
// slots of earlier blocks, the scan).
template <class IdT>
__global__ void __launch_bounds__(kClusterMaxThreads, 2) cluster_kernel(Args a, int chunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // no clusters before sm_90: cluster_not_applicable refuses the device
#else
  namespace cg = cooperative_groups;
  extern __shared__ int sm[];
  __shared__ int warp_sums[prim::kBlockScanScratch];
  constexpr int V = kVec<IdT>;
  const cg::cluster_group cl = cg::this_cluster();
  const int r = static_cast<int>(cl.block_rank()), CS = static_cast<int>(cl.num_blocks());
  const int E = a.num_experts;
  int* cnt = sm;                    // this block's count per expert
  int* table = sm + E;              // [CS][E]: every block's counts, written by each block
  int* before = table + CS * E;     // slots of expert e in blocks before this one
  int* cs = before + E;             // E + 1: padded totals, scanned
  const int t = threadIdx.x, nt = blockDim.x;
  for (int e = t; e < E; e += nt) cnt[e] = 0;
  // Another block's shared memory may be written only once that block runs:
  // arrive now (relaxed: nothing to publish yet), wait before the first
  // remote store (the loads and ranks below hide the wait).
  __cluster_barrier_arrive_relaxed();
  prim::pdl_wait();  // the ids; the fill overwrites rows the previous kernel may read
  prim::pdl_launch_dependents();

  const std::int64_t first = (static_cast<std::int64_t>(r) * nt + t) * V;
  int ev[V];
  load_experts<IdT>(a, first, ids_aligned16(a), ev);
  const unsigned mp = static_cast<unsigned>(a.max_padded);
  const unsigned r0 = min(static_cast<unsigned>(r) * static_cast<unsigned>(chunk), mp);
  fill_range(a.sorted, r0, min(r0 + static_cast<unsigned>(chunk), mp), a.numel, t, nt);
  __syncthreads();  // counters zeroed
  int rk[V];
#pragma unroll
  for (int v = 0; v < V; ++v) rk[v] = ev[v] >= 0 ? atomicAdd(cnt + ev[v], 1) : 0;
  __syncthreads();  // this block's counts
  __cluster_barrier_wait();  // every block of the cluster runs
  // Push them into row r of every block's table (stores, no round trip);
  // the cluster barrier then makes every row visible, and no block touches
  // another's shared memory after it.
  for (int i = t; i < CS * E; i += nt) {
    const int j = i / E, e = i - j * E;
    cl.map_shared_rank(table, j)[r * E + e] = cnt[e];
  }
  cl.sync();

  for (int e = t; e < E; e += nt) {
    int tot = 0, bef = 0;
    for (int j = 0; j < CS; ++j) {
      const int c = table[j * E + e];
      tot += c;
      bef += j < r ? c : 0;
    }
    cs[e] = padded(tot, a.block_size);
    before[e] = bef;
  }
  __syncthreads();
  const int total = block_exclusive_scan(cs, E, warp_sums);  // ends with a barrier
  if (r == 0 && t == 0) *a.total = total;
#pragma unroll
  for (int v = 0; v < V; ++v)
    if (ev[v] >= 0) a.sorted[cs[ev[v]] + before[ev[v]] + rk[v]] = static_cast<int>(first + v);
  const std::int64_t jchunk = (static_cast<std::int64_t>(a.max_blocks) + CS - 1) / CS;
  write_expert_ids(a, cs, jchunk * r, jchunk * (r + 1), t, nt);
#endif
}

struct ClusterPlan {
  int blocks = 0;  // blocks of the one cluster (0: not applicable)
  int threads = 0;
  int chunk = 0;   // rows of sorted_token_ids each block pads
  std::size_t smem = 0;
};

inline std::size_t cluster_smem(int num_experts, int blocks) {
  return sizeof(int) * ((static_cast<std::size_t>(blocks) + 3) * static_cast<std::size_t>(num_experts) + 1);
}

// Most slots the variant holds: one 16-byte id load per thread.
template <class IdT>
constexpr std::int64_t cluster_max_numel() {
  return std::int64_t{kClusterMaxBlocks} * kClusterMaxThreads * kVec<IdT>;
}

// Launch shape (H200 sweeps, align-notes.md "cluster"): one load per thread
// (two or four per thread were 0.5-1.5 µs slower), the fewest threads from
// policy.cluster_min_threads that hold the slots in a portable cluster of up
// to 8 blocks (at 8,192 slots 8 x 256 threads beat 8 x 512 and 16 x 256:
// a cluster's cost grows with its blocks, and blocks of 256 share SMs), else
// up to 16 blocks of 1024 threads.
template <class IdT>
inline ClusterPlan cluster_plan(const Problem& p, const DeviceCaps& caps) {
  ClusterPlan pl;
  if (p.num_experts > kClusterMaxExperts || p.numel > cluster_max_numel<IdT>()) return pl;
  const std::int64_t n = std::max<std::int64_t>(p.numel, 1);
  int threads = policy_for(caps).cluster_min_threads;
  while (threads < kClusterMaxThreads &&
         n > std::int64_t{prim::kPortableClusterBlocks} * threads * kVec<IdT>)
    threads *= 2;
  const std::int64_t blocks = ceil_div<std::int64_t>(n, std::int64_t{threads} * kVec<IdT>);
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  pl.blocks = static_cast<int>(blocks);
  pl.threads = threads;
  pl.chunk = static_cast<int>(ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, blocks), 4) * 4);
  pl.smem = cluster_smem(p.num_experts, pl.blocks);
  return pl;
}

template <class IdT>
inline const char* cluster_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.num_experts > kClusterMaxExperts) return "needs E <= 1024";
  if (p.numel > cluster_max_numel<IdT>())
    return "needs numel <= 16 blocks x 1024 threads x one 16-byte id load";
  if (caps.present() && caps.arch() < 90) return "needs thread block clusters (sm_90+)";
  return nullptr;
}

template <class IdT>
inline cudaError_t launch_cluster(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  const ClusterPlan pl = cluster_plan<IdT>(p, device_caps());
  if (pl.blocks == 0) return cudaErrorInvalidValue;  // not applicable
  prim::LaunchAttrs at = launch_attrs(p);
  at.cluster = pl.blocks;
  return prim::launch_with_smem(cluster_kernel<IdT>, dim3(pl.blocks), dim3(pl.threads), pl.smem, s, at,
                                make_args(p, bufs), pl.chunk);
}

}  // namespace moekit::align::detail
