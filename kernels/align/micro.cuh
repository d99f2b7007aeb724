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
//      padding value and the expert_ids of the chunk's blocks with -1 while
//      the ids are in flight (nothing in that fill depends on them);
//   2. warp 0 lays out the slots in registers: lane i holds slot i's row, the
//      first lane of each expert its first row and padded count;
//   3. after one barrier (it orders the fill before the overwrites), warp 0
//      writes the slot rows in the chunk and, on each expert's first lane, the
//      expert_ids of its blocks whose first row is in the chunk.
// Nothing goes through shared memory, and the only work after the barrier is
// warp 0's stores (ncu, H100: the barrier wait was half of the stall cycles of
// the version that published the layout in shared memory and searched it).
#pragma once

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

constexpr int kMicroMaxNumel = kWarp;  // one slot per lane of one warp
constexpr int kMicroThreads = 256;

template <class IdT, int kThreads = kMicroThreads>
__global__ void __launch_bounds__(kThreads) micro_kernel(Args a, int chunk) {
  const int t = threadIdx.x;
  const int n = a.numel;
  prim::pdl_wait();  // the ids; the fill below overwrites rows the previous kernel may read
  prim::pdl_launch_dependents();
  IdT raw = IdT(-1);
  if (t < n) raw = __ldg(static_cast<const IdT*>(a.ids) + t);

  const DivB db = make_divb(a.block_size);
  const int r0 = static_cast<int>(blockIdx.x) * chunk;
  const int r1 = r0 + min(chunk, max(a.max_padded - r0, 0));  // r0 <= max_padded by the grid
  // Blocks whose first row lies in [r0, r1): this block's share of expert_ids.
  const int j0 = db.div_up(r0);
  const int j1 = min(db.div_up(r1), a.max_blocks);
  fill_range(a.sorted, r0, r1, a.numel, t, kThreads);
  for (int j = j0 + t; j < j1; j += kThreads) a.eids[j] = -1;

  // Warp 0's layout, in registers (other warps keep e = -1 and write nothing).
  int e = -1, first = 0, mine = 0, row = 0, total = 0;
  bool leader = false;
  if (t < kWarp) {
    const int lane = t;
    e = t < n ? expert_of<IdT>(raw, a) : -1;
    unsigned below;  // lanes holding a smaller expert
    const unsigned peers = warp_peers_below(e, expert_bits(a.num_experts), below);
    leader = e >= 0 && lane == __ffs(peers) - 1;
    mine = leader ? db.pad(__popc(peers)) : 0;
    // First row of my expert = padded counts of the smaller distinct experts.
    if (n <= db.B) {
      // No expert holds more than B slots: each pads to exactly B rows, so
      // the sums are B times a count of first lanes (the usual decode case).
      const unsigned leaders = __ballot_sync(kFullMask, leader);
      first = db.B * __popc(below & leaders);
      total = db.B * __popc(leaders);
    } else {
      // Eight lanes per step: the 16 shuffles of a step issue back to back
      // (one at a time, each waited for, 32 slots cost ~0.8 µs more than 8).
#pragma unroll 1
      for (int k0 = 0; k0 < n; k0 += 8) {
        int ek[8], pk[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          ek[k] = __shfl_sync(kFullMask, e, k0 + k);  // lanes past n hold mine = 0
          pk[k] = __shfl_sync(kFullMask, mine, k0 + k);
        }
#pragma unroll
        for (int k = 0; k < 8; ++k) first += ek[k] < e ? pk[k] : 0;
      }
      total = __reduce_add_sync(kFullMask, mine);
    }
    row = first + __popc(peers & lanemask_lt(lane));
  }
  __syncthreads();  // the fill above lands before the overwrites below
  if (t < kWarp) {
    if (blockIdx.x == 0 && t == 0) *a.total = total;
    if (e >= 0 && row >= r0 && row < r1) a.sorted[row] = t;
    if (leader) {  // first and mine are multiples of B
      const int jb1 = min(db.div(first + mine), j1);
      for (int j = max(db.div(first), j0); j < jb1; ++j) a.eids[j] = e;
    }
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
