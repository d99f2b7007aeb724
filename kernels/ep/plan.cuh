// ep's sender plan: where each token's row goes (its place in each
// destination's send run, with the slot base there) and where each slot's
// returned row lands (slot_pos), for a2a.cuh's layouts. A token's slots to
// each rank are counted in one byte of a 64-bit word (K <= kMaxTopk); a
// rank's running count is one 64-bit sum, rows << 32 | slots.
//
// A decode batch (T <= one block) is planned by one block (plan_kernel);
// a larger one by two passes of one block per kThreads tokens
// (plan_count_kernel: each block's sums; plan_place_kernel: the blocks
// before it summed, then its tokens placed). One block over a prefill batch
// issued every instruction from one SM (docs/bench/ep-notes.md).
#pragma once

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

#include "ep/ep.hpp"
#include "primitives/pdl.cuh"

namespace moekit::ep::detail {

// a[d] for a d in [0, kMaxRanks) known only at run time, as an unrolled
// select: an indexed register array, or kernel parameter array, would be
// copied to local memory.
template <class V>
__device__ __forceinline__ V pick(V const (&a)[kMaxRanks], int d) {
  V v = a[0];
#pragma unroll
  for (int i = 1; i < kMaxRanks; ++i) v = i == d ? a[i] : v;
  return v;
}

// Ids a thread loads before it looks any owner up (one dependent load a
// slot made the plan latency-bound).
inline constexpr int kPlanLoads = 8;

// own[u]: the rank owning slot j0 + u of token t, -1 for a dropped slot (an
// id outside [0, E)) or one past K. Every id load is issued before any
// owner is looked up.
__device__ __forceinline__ void load_owners(int (&own)[kPlanLoads], const std::int32_t* __restrict__ ids,
                                            const std::int32_t* __restrict__ placement, std::int64_t t, int K,
                                            int experts, int j0) {
#pragma unroll
  for (int u = 0; u < kPlanLoads; ++u) own[u] = j0 + u < K ? ids[t * K + j0 + u] : -1;
#pragma unroll
  for (int u = 0; u < kPlanLoads; ++u) own[u] = own[u] >= 0 && own[u] < experts ? placement[own[u]] : -1;
}

// Byte d: token t's slots owned by rank d (a dropped slot counts nowhere).
__device__ __forceinline__ unsigned long long token_counts(const std::int32_t* __restrict__ ids,
                                                           const std::int32_t* __restrict__ placement,
                                                           std::int64_t t, int K, int experts) {
  unsigned long long cnt = 0;
  for (int j0 = 0; j0 < K; j0 += kPlanLoads) {
    int own[kPlanLoads];
    load_owners(own, ids, placement, t, K, experts, j0);
#pragma unroll
    for (int u = 0; u < kPlanLoads; ++u)
      if (own[u] >= 0) cnt += 1ull << (8 * own[u]);
  }
  return cnt;
}

// rows << 32 | slots of one token at rank d.
__device__ __forceinline__ unsigned long long at_rank(unsigned long long cnt, int d) {
  const unsigned c = static_cast<unsigned>(cnt >> (8 * d)) & 0xffu;
  return (c != 0 ? 1ull << 32 : 0ull) + c;
}

// What the plan writes, and what it reads.
struct PlanArgs {
  const std::int32_t* __restrict__ ids;
  const std::int32_t* __restrict__ placement;
  std::int64_t T;
  int K, experts, R, rank;
  std::int32_t* __restrict__ send_tok;
  std::int32_t* __restrict__ send_aux;
  std::int32_t* __restrict__ slot_pos;
  std::int32_t* __restrict__ counts;
  std::int32_t* __restrict__ partial_inverse;  // p2p-reduce only (else null), with ones
  float* __restrict__ ones;
  unsigned long long* __restrict__ totals;  // two passes: kMaxRanks sums a block
};

template <int kThreads>
union PlanStorage {
  typename cub::BlockScan<unsigned long long, kThreads, cub::BLOCK_SCAN_WARP_SCANS>::TempStorage scan;
  typename cub::BlockReduce<unsigned long long, kThreads>::TempStorage reduce;
};

// The block's tokens [t0, t0 + kThreads), a token a thread, placed after
// prefix[d] earlier rows and slots at each rank d: send runs and aux,
// p2p-reduce's partial places, slot_pos. total[d]: the block's own sums.
template <int kThreads>
__device__ __forceinline__ void place_tokens(const PlanArgs& a, std::int64_t t0,
                                             const unsigned long long (&prefix)[kMaxRanks],
                                             unsigned long long (&total)[kMaxRanks], PlanStorage<kThreads>& st) {
  using Scan = cub::BlockScan<unsigned long long, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
  const std::int64_t t = t0 + threadIdx.x;
  const unsigned long long cnt = t < a.T ? token_counts(a.ids, a.placement, t, a.K, a.experts) : 0;
  int base[kMaxRanks] = {};  // the token's first slot place at each rank, within its run
#pragma unroll
  for (int d = 0; d < kMaxRanks; ++d) {  // unrolled: base, prefix and total stay in registers
    if (d >= a.R) continue;                // R is the block's: every thread skips together
    unsigned long long before;
    Scan(st.scan).ExclusiveSum(at_rank(cnt, d), before, total[d]);
    __syncthreads();  // the storage is reused by the next rank's scan
    before += prefix[d];
    base[d] = static_cast<int>(before);
    if (t >= a.T) continue;
    const bool sent = at_rank(cnt, d) != 0;
    if (sent) {
      const std::int64_t q = d * a.T + static_cast<std::int64_t>(before >> 32);
      a.send_tok[q] = static_cast<std::int32_t>(t);
      a.send_aux[2 * q] = base[d];
      a.send_aux[2 * q + 1] = a.rank;
    }
    // p2p-reduce's combine on this rank: the partial of destination d comes
    // back at d * T + t (R slots a token, weight 1, d ascending).
    if (a.partial_inverse != nullptr) {
      a.partial_inverse[t * a.R + d] = sent ? static_cast<std::int32_t>(d * a.T + t) : -1;
      a.ones[t * a.R + d] = 1.0f;
    }
  }
  if (t >= a.T) return;
  const std::int64_t TK = a.T * a.K;
  int seen[kMaxRanks] = {};  // the token's slots to each rank so far
  for (int j0 = 0; j0 < a.K; j0 += kPlanLoads) {
    int own[kPlanLoads];
    load_owners(own, a.ids, a.placement, t, a.K, a.experts, j0);
#pragma unroll
    for (int u = 0; u < kPlanLoads; ++u) {
      if (j0 + u >= a.K) continue;
      const int d = own[u];
      a.slot_pos[t * a.K + j0 + u] = d < 0 ? -1 : static_cast<std::int32_t>(d * TK + pick(base, d) + pick(seen, d));
#pragma unroll
      for (int r = 0; r < kMaxRanks; ++r) seen[r] += r == d;
    }
  }
}

// The counts of every rank d < R: rows [2 d], slots [2 d + 1].
__device__ __forceinline__ void write_counts(const PlanArgs& a, const unsigned long long (&prefix)[kMaxRanks],
                                             const unsigned long long (&total)[kMaxRanks]) {
#pragma unroll
  for (int d = 0; d < kMaxRanks; ++d)
    if (d < a.R) {
      const unsigned long long all = prefix[d] + total[d];
      a.counts[2 * d] = static_cast<std::int32_t>(all >> 32);
      a.counts[2 * d + 1] = static_cast<std::int32_t>(all);
    }
}

/// The plan of T <= kThreads tokens: one block, a token a thread.
/// @tparam kThreads threads of the one block
template <int kThreads>
__global__ void __launch_bounds__(kThreads) plan_kernel(PlanArgs a) {
  __shared__ PlanStorage<kThreads> st;
  prim::pdl_wait();
  const unsigned long long none[kMaxRanks] = {};
  unsigned long long total[kMaxRanks] = {};
  place_tokens<kThreads>(a, 0, none, total, st);
  if (threadIdx.x == 0) write_counts(a, none, total);
  prim::pdl_launch_dependents();
}

/// The first of two passes: block b's sums at every rank over tokens
/// [b * kThreads, (b + 1) * kThreads) into totals[b * kMaxRanks + d].
/// @tparam kThreads threads a block, a token each
template <int kThreads>
__global__ void __launch_bounds__(kThreads) plan_count_kernel(PlanArgs a) {
  __shared__ PlanStorage<kThreads> st;
  prim::pdl_wait();
  const std::int64_t t = std::int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const unsigned long long cnt = t < a.T ? token_counts(a.ids, a.placement, t, a.K, a.experts) : 0;
#pragma unroll
  for (int d = 0; d < kMaxRanks; ++d) {
    if (d >= a.R) continue;
    const unsigned long long sum = cub::BlockReduce<unsigned long long, kThreads>(st.reduce).Sum(at_rank(cnt, d));
    __syncthreads();
    if (threadIdx.x == 0) a.totals[blockIdx.x * kMaxRanks + d] = sum;
  }
  prim::pdl_launch_dependents();
}

/// The second pass: the sums of the blocks before b, then block b's tokens
/// placed after them; the last block writes the counts. Block b reads b * R
/// sums: B^2 R / 2 in all, ~0.5 GB at a million tokens a rank (4096 blocks,
/// R 8) against the ~14 GB of rows such a dispatch moves at H 7168; past
/// that a scan pass over the sums would pay.
/// @tparam kThreads threads a block, a token each (as plan_count_kernel)
template <int kThreads>
__global__ void __launch_bounds__(kThreads) plan_place_kernel(PlanArgs a) {
  __shared__ PlanStorage<kThreads> st;
  __shared__ unsigned long long before_s[kMaxRanks];
  prim::pdl_wait();
#pragma unroll
  for (int d = 0; d < kMaxRanks; ++d) {
    if (d >= a.R) continue;
    unsigned long long s = 0;
    for (unsigned b = threadIdx.x; b < blockIdx.x; b += kThreads) s += a.totals[b * kMaxRanks + d];
    s = cub::BlockReduce<unsigned long long, kThreads>(st.reduce).Sum(s);
    if (threadIdx.x == 0) before_s[d] = s;
    __syncthreads();
  }
  unsigned long long prefix[kMaxRanks] = {}, total[kMaxRanks] = {};
#pragma unroll
  for (int d = 0; d < kMaxRanks; ++d)
    if (d < a.R) prefix[d] = before_s[d];
  place_tokens<kThreads>(a, std::int64_t(blockIdx.x) * kThreads, prefix, total, st);
  if (blockIdx.x == gridDim.x - 1 && threadIdx.x == 0) write_counts(a, prefix, total);
  prim::pdl_launch_dependents();
}

}  // namespace moekit::ep::detail
