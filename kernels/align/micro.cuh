// Variant `micro` (decode-sized inputs: numel <= 128): ONE launch, no
// workspace, no atomics, no shared memory, no block barrier and no scan over
// the E experts. Stable rows.
//
// With at most 32 S slots (S = 1, 2 or 4 per lane) the whole layout is a
// function of at most 32 S distinct experts, which one warp computes from
// ballots alone: a slot's rank is the number of earlier slots holding its
// expert; an expert's first block is the sum of the block counts of the
// distinct experts below it, summed bit by bit of the counts (one ballot per
// bit and column: one bit while numel <= B). What is left costs bandwidth,
// not latency: every row of sorted_token_ids that is not a slot holds the
// padding value. So EVERY warp of every block
//   1. issues the id loads (the same few lines for every warp);
//   2. fills its slice of the block's rows with the padding value, and the
//      expert_ids of the blocks that start in the slice with -1, while the ids
//      are in flight (nothing in that fill depends on them);
//   3. lays out the slots in its registers, and after a __syncwarp (it orders
//      the warp's fill before its overwrites) writes the slot rows and the
//      expert_ids that fall in its slice.
// Warps never wait for each other. The previous design (warp 0 computed the
// layout, one barrier ordered every warp's fill before warp 0's stores) was
// 0.35-0.45 us slower than SGLang's one-CTA kernel at one token; its code was
// 12.7 KB of SASS (warp 0's divergent branch made every shuffle and ballot a
// collective with a fallback path, and a 16-shuffle loop served numel > B).
// The layout costs S * S mask updates per expert bit and lane, which is why S
// stops at 4 (docs/bench/align-notes.md).
#pragma once

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

constexpr int kMicroMaxPerLane = 4;
constexpr int kMicroMaxNumel = kMicroMaxPerLane * kWarp;
// 4 warps: every warp computes the whole layout, so more warps per SM only
// queue more copies of it (probe_align micro, H100: 128 threads x 8 rows per
// thread against 256 x 4: equal at one token, 0.1 us faster at 64 slots,
// 0.3-0.7 us at 128 slots; 64 threads no faster).
constexpr int kMicroThreads = 128;

// kS: slots per lane (slot s * 32 + lane); kPow2: B is a power of two
// (shifts only: less code to fetch).
template <class IdT, int kS, bool kPow2, int kThreads = kMicroThreads>
__global__ void __launch_bounds__(kThreads) micro_kernel(Args a, int chunk) {
  constexpr int kWarps = kThreads / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, w = static_cast<int>(threadIdx.x) / kWarp;
  const int n = a.numel;
  prim::pdl_wait();  // the ids; the fill below overwrites rows the previous kernel may read
  prim::pdl_launch_dependents();
  IdT raw[kS];
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    const int i = s * kWarp + lane;
    raw[s] = i < n ? __ldg(static_cast<const IdT*>(a.ids) + i) : IdT(-1);
  }

  const DivB<kPow2> db = make_divb<kPow2>(a.block_size);
  // The block's rows [cb, ce) (cb <= max_padded by the grid), this warp's
  // slice [r0, r1) of them (a multiple of 4 rows: 16-byte aligned slices when
  // the chunk is), and the expert_ids [j0, j1) of the blocks starting in it.
  const int sub = (chunk + 4 * kWarps - 1) / (4 * kWarps) * 4;
  const int cb = static_cast<int>(blockIdx.x) * chunk;
  const int ce = cb + min(chunk, max(a.max_padded - cb, 0));
  const int r0 = cb + min(w * sub, ce - cb);
  const int r1 = r0 + min(sub, ce - r0);
  const int j0 = db.div_up(r0);
  const int j1 = min(db.div_up(r1), a.max_blocks);
  fill_range(a.sorted, r0, r1, n, lane, kWarp);
#pragma unroll 1
  for (int j = j0 + lane; j < j1; j += kWarp) a.eids[j] = -1;

  // The layout: for each of my slots its expert, rank and row; the first
  // slot of each expert (its leader) holds the expert's block count nb.
  int e[kS];
#pragma unroll
  for (int s = 0; s < kS; ++s) e[s] = s * kWarp + lane < n ? expert_of<IdT>(raw[s], a) : -1;
  unsigned peers[kS][kS], below[kS][kS];
  warp_peers_below<kS>(e, expert_bits(a.num_experts), peers, below);
  int rank[kS], nb[kS];
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    int r = __popc(peers[s][s] & lanemask_lt(lane)), c = 0;
#pragma unroll
    for (int h = 0; h < kS; ++h) {
      c += __popc(peers[s][h]);
      if (h < s) r += __popc(peers[s][h]);
    }
    rank[s] = r;
    nb[s] = e[s] >= 0 && r == 0 ? db.div_up(c) : 0;
  }
  // First block of each of my experts (blocks of the smaller distinct
  // experts) and all blocks, one ballot per bit of the block counts
  // (<= ceil(n / B)) and column.
  int fb[kS] = {}, tb = 0;
  const int most = db.div_up(n);
#pragma unroll 1
  for (int bit = 0; (1 << bit) <= most; ++bit) {
#pragma unroll
    for (int h = 0; h < kS; ++h) {
      const unsigned m = __ballot_sync(kFullMask, (nb[h] >> bit) & 1);
      tb += __popc(m) << bit;
#pragma unroll
      for (int s = 0; s < kS; ++s) fb[s] += __popc(m & below[s][h]) << bit;
    }
  }
  __syncwarp();  // this warp's fill above lands before its overwrites below
  if (blockIdx.x == 0 && threadIdx.x == 0) *a.total = tb * db.B;
#pragma unroll
  for (int s = 0; s < kS; ++s) {
    if (e[s] < 0) continue;
    const int row = fb[s] * db.B + rank[s];
    if (row >= r0 && row < r1) a.sorted[row] = s * kWarp + lane;
    if (nb[s] > 0) {
      const int jb1 = min(fb[s] + nb[s], j1);
#pragma unroll 1
      for (int j = max(fb[s], j0); j < jb1; ++j) a.eids[j] = e[s];
    }
  }
}

// Slots per lane for numel slots.
inline int micro_per_lane(std::int64_t numel) { return numel <= kWarp ? 1 : numel <= 2 * kWarp ? 2 : 4; }

inline const char* micro_not_applicable(const Problem& p, const DeviceCaps&) {
  if (p.numel > kMicroMaxNumel) return "needs numel <= 128 (4 slots per lane of one warp)";
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
  const bool p2 = is_pow2(p.block_size);
  const auto go = [&](auto kernel) {
    return prim::launch_ex(kernel, grid, kMicroThreads, 0, s, launch_attrs(p), make_args(p, bufs), chunk);
  };
  switch (micro_per_lane(p.numel)) {
    case 1: return p2 ? go(micro_kernel<IdT, 1, true>) : go(micro_kernel<IdT, 1, false>);
    case 2: return p2 ? go(micro_kernel<IdT, 2, true>) : go(micro_kernel<IdT, 2, false>);
    default: return p2 ? go(micro_kernel<IdT, 4, true>) : go(micro_kernel<IdT, 4, false>);
  }
}

template <class IdT>
inline cudaError_t launch_micro(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  return launch_micro<IdT>(p, bufs, s, micro_chunk(p, device_caps()));
}

}  // namespace moekit::align::detail
