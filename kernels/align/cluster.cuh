// Variant `cluster` (mid-sized inputs, few experts): ONE thread block
// cluster (sm_90+) of up to 16 blocks; the cluster barrier and distributed
// shared memory replace onepass's global atomics and grid-wide wait (onepass
// costs ~4.5 µs however few its slots). Every block:
//
//   1. issues its 16-byte id loads (slots [r * S, (r + 1) * S) of block r),
//      sets its 1/CS share of sorted_token_ids to the padding value and of
//      expert_ids to -1 while they are in flight, and ranks its slots with
//      shared atomics;
//   2. once every block of the cluster runs (a relaxed cluster barrier that
//      it arrived on at its start), stores its E counts into row r of every
//      block's [CS][E] table in shared memory;
//   3. cluster barrier (release / acquire: every table complete, and every
//      block's fill before any slot store); no shared memory of another
//      block is touched after it, so blocks leave when done;
//   4. every warp, with no block barrier (as `solo` does): each lane sums its
//      experts' counts over the table (the total, and the slots of blocks
//      before this one) and the warp scans their block counts; each slot is
//      written at its expert's start + earlier blocks' slots + its rank, and
//      the slot at the first row of an expert block writes its expert_ids
//      entry (every block of an expert starts with a slot).
//
// Pushing the counts (stores, no round trip) instead of pulling them after
// the barrier (remote loads, and a second barrier so that no block leaves
// while read) was 0.3-1.1 µs faster (H100, align-notes.md "cluster"). The
// in-warp scan and the slot-written expert_ids (four barriers in all, not
// seven, and no binary search) took another 0.5-1.0 µs off (4096 x 2, E = 8:
// 3.80 -> 2.99 µs; the one-block kernel measured 3.2 µs at 300 slots where
// `solo` takes 1.6: align-notes.md "cluster, lean").
//
// No workspace; unstable (the order inside an expert is the shared atomics').
// Every warp reads CS x E counts, and the cluster's launch costs more the
// more blocks it has: a design for few experts and at most 16 K slots.
// Comments here keep µs figures: 5 lines (why alternative designs lost; not thresholds).
#pragma once

#include <cooperative_groups.h>

#include <algorithm>
#include <string>

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/warp_count_scan.cuh"

namespace moekit::align::detail {

// sm_90's largest cluster (the non-portable size; 8 portable).
constexpr int kClusterMaxBlocks = 16;
constexpr int kClusterMaxThreads = 1024;
// E limit: every warp scans all E itself (the in-warp scan's widths); at
// E >= 128 the kernel already lost to tiny and onepass (every warp reads
// CS x E counts).
constexpr int kClusterMaxExperts = kWarpScanMaxExperts;

// Dynamic shared memory: (CS + 1)E ints (this block's counts, then every
// block's). kP: experts per lane of the in-warp scan (warp_scan_per_lane);
// kPow2: B is a power of two. jchunk: expert_ids entries each block sets to -1.
template <class IdT, int kP, bool kPow2>
__global__ void __launch_bounds__(kClusterMaxThreads, 2) cluster_kernel(Args a, int chunk, int jchunk) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // no clusters before sm_90: cluster_not_applicable refuses the device
#else
  namespace cg = cooperative_groups;
  extern __shared__ int sm[];
  constexpr int V = kVec<IdT>;
  const cg::cluster_group cl = cg::this_cluster();
  const int r = static_cast<int>(cl.block_rank()), CS = static_cast<int>(cl.num_blocks());
  const int E = a.num_experts;
  int* cnt = sm;        // this block's count per expert
  int* table = sm + E;  // [CS][E]: every block's counts, written by each block
  const int t = threadIdx.x, nt = blockDim.x;
#pragma unroll 1
  for (int e = t; e < E; e += nt) cnt[e] = 0;
  // Another block's shared memory may be written only once that block runs:
  // arrive now (relaxed: nothing to publish yet), wait before the first
  // remote store (the loads and ranks below hide the wait).
  __cluster_barrier_arrive_relaxed();
  prim::pdl_wait();  // the ids; the fill overwrites rows the previous kernel may read
  prim::pdl_launch_dependents();

  const int first = (r * nt + t) * V;
  int ev[V];
  load_experts<IdT>(a, first, ids_aligned16(a), ev);
  // While they load: this block's share of the padding rows and of expert_ids
  // (-1); the slots and each expert block's first slot overwrite them after
  // the cluster barrier below, which orders every block's fill before them.
  const unsigned mp = static_cast<unsigned>(a.max_padded);
  const unsigned r0 = min(static_cast<unsigned>(r) * static_cast<unsigned>(chunk), mp);
  fill_range(a.sorted, r0, min(r0 + static_cast<unsigned>(chunk), mp), a.numel, t, nt);
  const int j0 = min(r * jchunk, a.max_blocks), j1 = min(j0 + jchunk, a.max_blocks);
#pragma unroll 1
  for (int j = j0 + t; j < j1; j += nt) a.eids[j] = -1;
  __syncthreads();  // counters zeroed
  int rk[V];
#pragma unroll
  for (int v = 0; v < V; ++v) rk[v] = ev[v] >= 0 ? atomicAdd(cnt + ev[v], 1) : 0;
  __syncthreads();  // this block's counts
  __cluster_barrier_wait();  // every block of the cluster runs
  // Push them into row r of every block's table (stores, no round trip);
  // the cluster barrier then makes every row visible, and no block touches
  // another's shared memory after it.
#pragma unroll 1
  for (int i = t; i < CS * E; i += nt) {
    const int j = i / E, e = i - j * E;
    cl.map_shared_rank(table, j)[r * E + e] = cnt[e];
  }
  cl.sync();

  // Every warp, no barrier: lane l sums experts l*kP .. l*kP+kP-1 over the
  // blocks (the total, and the slots of blocks before this one) and scans
  // their block counts across the warp.
  const DivB<kPow2> db = make_divb<kPow2>(a.block_size);
  const int lane = t % kWarp;
  int start[kP], bef[kP];
#pragma unroll
  for (int p = 0; p < kP; ++p) start[p] = bef[p] = 0;
  // Blocks outer, experts inner: up to 4 kP independent loads in flight.
#pragma unroll 4
  for (int j = 0; j < CS; ++j)
#pragma unroll
    for (int p = 0; p < kP; ++p) {
      const int e = lane * kP + p;
      const int c = e < E ? table[j * E + e] : 0;
      start[p] += c;
      bef[p] += j < r ? c : 0;
    }
#pragma unroll
  for (int p = 0; p < kP; ++p) start[p] = db.div_up(start[p]);  // the total's blocks
  const int blocks = warp_block_starts<kP>(start);
  if (r == 0 && t == 0) *a.total = blocks * db.B;
#pragma unroll
  for (int v = 0; v < V; ++v) {
    const int e = max(ev[v], 0);
    const int fb = from_expert_lane<kP>(start, e), off = from_expert_lane<kP>(bef, e);
    if (ev[v] < 0) continue;
    const int o = off + rk[v];  // position inside the expert
    const int row = fb * db.B + o;
    a.sorted[row] = first + v;
    const bool lead = db.pow2() ? (o & (db.B - 1)) == 0 : o % db.B == 0;
    if (lead) a.eids[db.div(row)] = ev[v];  // every block of an expert starts with a slot
  }
#endif
}

struct ClusterPlan {
  int blocks = 0;  // blocks of the one cluster (0: not applicable)
  int threads = 0;
  int chunk = 0;   // rows of sorted_token_ids each block pads
  int jchunk = 0;  // entries of expert_ids each block sets to -1
  std::size_t smem = 0;
};

inline std::size_t cluster_smem(int num_experts, int blocks) {
  return sizeof(int) * (static_cast<std::size_t>(blocks) + 1) * static_cast<std::size_t>(num_experts);
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
  pl.jchunk = static_cast<int>(ceil_div<std::int64_t>(std::max<std::int64_t>(p.max_num_blocks, 1), blocks));
  pl.smem = cluster_smem(p.num_experts, pl.blocks);
  return pl;
}

template <class IdT>
inline const char* cluster_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.num_experts > kClusterMaxExperts) {
    static const std::string why = "needs E <= " + std::to_string(kClusterMaxExperts);
    return why.c_str();
  }
  if (p.numel > cluster_max_numel<IdT>())
    return "needs numel <= 16 blocks x 1024 threads x one 16-byte id load";
  if (caps.present() && caps.arch() < 90) return "needs thread block clusters (sm_90+)";
  return nullptr;
}

template <class IdT>
inline cudaError_t launch_cluster(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  const ClusterPlan pl = cluster_plan<IdT>(p, device_caps());
  if (pl.blocks == 0) return cudaErrorInvalidValue;  // not applicable
  prim::LaunchAttrs at = prim::pdl_attrs(pdl);
  at.cluster = pl.blocks;
  const Args a = make_args(p, bufs);
  return with_warp_scan_width(warp_scan_per_lane(p.num_experts), [&](auto width) {
    constexpr int kP = decltype(width)::value;
    if constexpr (kP == 0) {
      return cudaErrorInvalidValue;  // E > 128: not applicable
    } else {
      const auto go = [&](auto kernel) {
        return prim::launch_with_smem(kernel, dim3(pl.blocks), dim3(pl.threads), pl.smem, s, at, a, pl.chunk,
                                      pl.jchunk);
      };
      return is_pow2(p.block_size) ? go(cluster_kernel<IdT, kP, true>) : go(cluster_kernel<IdT, kP, false>);
    }
  });
}

}  // namespace moekit::align::detail
