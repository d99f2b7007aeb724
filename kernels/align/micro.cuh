// Variant `micro` (decode-sized inputs: numel <= 32): ONE launch, no
// workspace, no atomics, no scan over the E experts. Stable rows.
//
// With at most 32 slots the whole layout is a function of at most 32 distinct
// experts, so one warp computes it from ballots and shuffles alone: a slot's
// rank is the number of earlier lanes holding its expert, an expert's first row
// is the sum of the padded counts of the distinct experts below it. What is
// left costs bandwidth, not latency: every row of sorted_token_ids that is not
// a slot holds the padding value. So every block
//   1. issues warp 0's id loads, then fills its whole chunk [r0, r1) with the
//      padding value while the ids are in flight (nothing in that fill depends
//      on them);
//   2. warp 0 finds the distinct experts, their first rows (ascending) and the
//      row of each slot; one barrier publishes them;
//   3. overwrites the slot rows that fall in its chunk (the barrier orders
//      these stores after the block's own fill of the same rows; no other block
//      writes those rows) and writes the expert_ids of the blocks whose first
//      row is in the chunk, by binary search over the <= 32 first rows.
// Compared with `tiny` this drops the counter zeroing, the E-wide scan and
// every pass over experts that hold no slot: the body no longer grows with E,
// only the fill does.
#pragma once

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

constexpr int kMicroMaxNumel = kWarp;  // one slot per lane of one warp
constexpr int kMicroThreads = 256;

template <class IdT, int kThreads = kMicroThreads>
__global__ void __launch_bounds__(kThreads) micro_kernel(Args a, int chunk) {
  __shared__ int s_row[kWarp];    // row of slot i, -1 if dropped
  __shared__ int s_first[kWarp];  // k-th smallest distinct expert: its first row
  __shared__ int s_expert[kWarp];  // ... and its id
  __shared__ int s_total, s_distinct;
  const int t = threadIdx.x;
  const int n = a.numel;
  prim::pdl_wait();  // the ids; the fill below overwrites rows the previous kernel may read
  prim::pdl_launch_dependents();
  IdT raw = IdT(-1);
  if (t < n) raw = __ldg(static_cast<const IdT*>(a.ids) + t);

  const int r0 = static_cast<int>(blockIdx.x) * chunk;
  const int r1 = r0 + min(chunk, max(a.max_padded - r0, 0));  // r0 <= max_padded by the grid
  fill_range(a.sorted, r0, r1, a.numel, t, kThreads);

  if (t < kWarp) {
    const int lane = t;
    const int e = t < n ? expert_of<IdT>(raw, a) : -1;
    const unsigned peers = warp_peers(e, expert_bits(a.num_experts));
    const bool leader = e >= 0 && lane == __ffs(peers) - 1;
    const int mine = leader ? padded(__popc(peers), a.block_size) : 0;
    // First row of my expert = padded counts of the smaller distinct experts.
    // Eight lanes per step: the 16 shuffles of a step issue back to back
    // (one at a time, each waited for, 32 slots cost ~0.8 µs more than 8).
    int first = 0, below = 0;
#pragma unroll 1
    for (int j0 = 0; j0 < n; j0 += 8) {
      int ej[8], pj[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        ej[k] = __shfl_sync(kFullMask, e, j0 + k);  // lanes past n hold mine = 0
        pj[k] = __shfl_sync(kFullMask, mine, j0 + k);
      }
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (pj[k] > 0 && ej[k] < e) {
          first += pj[k];
          ++below;
        }
    }
    s_row[lane] = e >= 0 ? first + __popc(peers & lanemask_lt(threadIdx.x & (kWarp - 1))) : -1;
    if (leader) {
      s_first[below] = first;
      s_expert[below] = e;
    }
    const int total = __reduce_add_sync(kFullMask, mine);
    const int distinct = __popc(__ballot_sync(kFullMask, leader));
    if (lane == 0) {
      s_total = total;
      s_distinct = distinct;
    }
  }
  __syncthreads();

  const int total = s_total;
  if (blockIdx.x == 0 && t == 0) *a.total = total;
  if (t < n) {
    const int row = s_row[t];
    if (row >= r0 && row < r1) a.sorted[row] = t;
  }
  // expert_ids of the blocks whose first row lies in [r0, r1).
  const int B = a.block_size;
  const int used = total / B;
  // Unsigned 32-bit: r1 + B - 1 < 2^32, and a 64-bit division is a long subroutine.
  const int j0 = static_cast<int>((static_cast<unsigned>(r0) + B - 1) / B);
  const int j1 = min(static_cast<int>((static_cast<unsigned>(r1) + B - 1) / B), a.max_blocks);
  const int last = s_distinct - 1;
  for (int j = j0 + t; j < j1; j += kThreads) {
    int v = -1;
    if (j < used) {  // the last distinct expert whose first row is <= j*B
      const int pos = j * B;
      int lo = 0, hi = last;
      while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (s_first[mid] <= pos) lo = mid; else hi = mid - 1;
      }
      v = s_expert[lo];
    }
    a.eids[j] = v;
  }
}

inline const char* micro_not_applicable(const Problem& p, const DeviceCaps&) {
  if (p.numel > kMicroMaxNumel) return "needs numel <= 32 (one slot per lane of one warp)";
  return nullptr;
}

// Rows per block: the policy's micro_rows_per_block, or more when that would
// need more than micro_blocks_per_sm blocks per SM (E in the thousands:
// megabytes of padding).
inline int micro_chunk(const Problem& p, const DeviceCaps& caps) {
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const Policy& pol = policy_for(caps);
  const std::int64_t most = std::int64_t{pol.micro_blocks_per_sm} * std::max(caps.sm_count, 1);
  std::int64_t chunk = pol.micro_rows_per_block;
  if (ceil_div<std::int64_t>(rows, chunk) > most)
    chunk = ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, most), 4) * 4;
  return static_cast<int>(chunk);
}

template <class IdT>
inline cudaError_t launch_micro(const Problem& p, const Buffers& bufs, cudaStream_t s, int chunk) {
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const int grid = static_cast<int>(ceil_div<std::int64_t>(rows, chunk));
  return prim::launch_ex(micro_kernel<IdT>, grid, kMicroThreads, 0, s, launch_attrs(p), make_args(p, bufs), chunk);
}

template <class IdT>
inline cudaError_t launch_micro(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  return launch_micro<IdT>(p, bufs, s, micro_chunk(p, device_caps()));
}

}  // namespace moekit::align::detail
