// Variant `micro` (decode-sized inputs: numel <= 256): ONE launch, no
// workspace, no atomics, no scan over the E experts. Stable rows.
//
// With at most 32 S slots (S = 1, 2, 4 or 8 per lane) the whole layout is a
// function of at most 32 S distinct experts, computed from ballots alone: a
// slot's rank is the number of earlier slots holding its expert; an expert's
// first block is the sum of the block counts of the distinct experts below
// it, summed bit by bit of the counts (one ballot per bit and column: one bit
// while numel <= B). What is left costs bandwidth, not latency: every row of
// sorted_token_ids that is not a slot holds the padding value. So every warp
// of every block fills its slice of the block's rows with the padding value,
// and the expert_ids of the blocks that start in the slice with -1, while the
// ids are in flight (nothing in that fill depends on them). Then:
//  - S = 1: every warp lays out all slots in its registers and, after a
//    __syncwarp (it orders the warp's fill before its overwrites), writes the
//    slot rows and expert_ids that fall in its slice. No shared memory, no
//    block barrier: warps never wait for each other.
//  - S = 0 (at most kMicroShuffleSlots slots, numel <= B: one token, say):
//    the S = 1 path, but each lane reads the few keys by shuffles and
//    compares them in registers instead of voting on every expert bit (one
//    token 1.39-1.45 -> 1.33 us PDL off, 1.10-1.17 -> 1.00 on, H100, whatever
//    E: align-notes.md "micro: keys by shuffles"); with numel <= B every
//    expert fills exactly one block.
//  - S >= 2: warp h owns column h (slots 32h .. 32h + 31) and publishes
//    its key ballots in shared memory; after a barrier each owner compares
//    its slots with every column (S mask updates per expert bit instead of
//    S * S), publishes its block-count ballots, and after a second barrier
//    (which also orders every warp's fill) writes its slots anywhere in the
//    block's rows. With every warp computing every column the layout was ~900
//    instructions per warp at 128 slots and the kernel instruction-bound
//    (ncu); split, 128 slots take 0.2-0.5 us less (docs/bench/align-notes.md).
// The previous design (warp 0 computed the layout, one barrier ordered every
// warp's fill before warp 0's stores) was 0.35-0.45 us slower than SGLang's
// one-CTA kernel at one token; its code was 12.7 KB of SASS (warp 0's
// divergent branch made every shuffle and ballot a collective with a fallback
// path, and a 16-shuffle loop served numel > B).
// Comments here keep µs figures: 10 lines (why alternative designs lost; not thresholds).
#pragma once

#include <algorithm>
#include <bit>
#include <type_traits>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

// 8 columns at most: every owner compares its slots with every column for
// every expert bit, so a block's layout work grows as S^2 log2(E); at 16
// columns (512 slots, 512 threads) that was 5.7-8.7 us (H200, align-notes.md
// "micro up to 256 slots").
constexpr int kMicroMaxPerLane = 8;
constexpr int kMicroMaxNumel = kMicroMaxPerLane * kWarp;
// S = 0: shuffles per lane (32 shuffles at 32 slots were slower than the
// votes: 1.47 against 1.34 us, align-notes.md "micro: keys by shuffles").
constexpr int kMicroShuffleSlots = 8;
// Threads per block. S = 1: 4 warps (every warp computes the whole layout,
// so more warps per SM only queue more copies of it: probe_align micro, H100,
// 128 threads x 8 rows per thread against 256 x 4, equal at one token, 0.1 us
// faster at 64 slots, 0.3-0.7 us at 128 slots). S = 2, 4 and 8: one warp
// per column, no warp that only fills (H200, 2026-11-26, align-notes.md "micro:
// unrolled bit loops": 64 threads at 64 slots 0.02-0.05 us faster than 128).
template <int kS>
constexpr int kMicroThreads = kS <= 1 ? 128 : kS * kWarp;

// The block's rows [cb, ce) (cb <= max_padded by the grid), warp w's slice
// [r0, r1) of them (a multiple of 4 rows: 16-byte aligned slices when the
// chunk is), and the expert_ids [j0, j1) of the blocks starting in it.
struct MicroSlice {
  int cb, ce, r0, r1, j0, j1;
};

template <int kWarps, bool kPow2>
__device__ __forceinline__ MicroSlice micro_slice(const Args& a, const DivB<kPow2>& db, int chunk, int w) {
  MicroSlice s;
  const int sub = (chunk + 4 * kWarps - 1) / (4 * kWarps) * 4;
  s.cb = static_cast<int>(blockIdx.x) * chunk;
  s.ce = s.cb + min(chunk, max(a.max_padded - s.cb, 0));
  s.r0 = s.cb + min(w * sub, s.ce - s.cb);
  s.r1 = s.r0 + min(sub, s.ce - s.r0);
  s.j0 = db.div_up(s.r0);
  s.j1 = min(db.div_up(s.r1), a.max_blocks);
  return s;
}

// The warp's slice: the padding value over its rows, -1 over its expert_ids.
__device__ __forceinline__ void micro_fill(const Args& a, const MicroSlice& s, int lane) {
  fill_range(a.sorted, s.r0, s.r1, a.numel, lane, kWarp);
#pragma unroll 1
  for (int j = s.j0 + lane; j < s.j1; j += kWarp) a.eids[j] = -1;
}

// kS: slots per lane (slot s * 32 + lane; 0: one, by shuffles); kPow2: B is a power of two
// (shifts only: less code to fetch). kThreads: probe_align micro tries others.
// kLate: the PDL trigger after the layout (pdl_late_trigger); a template
// argument, because a runtime flag cost 0.04 us with PDL off.
template <class IdT, int kS, bool kPow2, int kThreads = kMicroThreads<kS>, bool kLate = false>
__global__ void __launch_bounds__(kThreads) micro_kernel(Args a, int chunk) {
  constexpr int kWarps = kThreads / kWarp;
  const int lane = static_cast<int>(threadIdx.x) % kWarp, w = static_cast<int>(threadIdx.x) / kWarp;
  const int n = a.numel;
  prim::pdl_wait();  // the ids; the fill below overwrites rows the previous kernel may read
  if constexpr (!kLate) prim::pdl_launch_dependents();
  static_assert(kS <= 1 || kWarps >= kS, "with kS > 1, warp h owns column h");
  // kS <= 1: every warp loads the <= 32 slots; else warp w < kS column w
  // (every warp, at the default shape: no owner branch is compiled).
  const bool owner = kS <= 1 || kWarps == kS || w < kS;
  const int mine = kS <= 1 ? lane : w * kWarp + lane;
  IdT raw = IdT(-1);
  if (owner && mine < n) raw = __ldg(static_cast<const IdT*>(a.ids) + mine);

  const DivB<kPow2> db = make_divb<kPow2>(a.block_size);
  const MicroSlice sl = micro_slice<kWarps>(a, db, chunk, w);
  micro_fill(a, sl, lane);

  [[maybe_unused]] const int nbits = expert_bits(a.num_experts);
  [[maybe_unused]] const int most = db.div_up(n);  // no expert has more blocks
  if constexpr (kS <= 1) {
    // The layout, in every warp: lane i holds slot i's expert and row; the
    // first lane of each expert (its leader) the expert's block count nb.
    const int e = lane < n ? expert_of<IdT>(raw, a) : -1;
    int rank = 0, nb = 0, fb = 0, tb = 0;
    if constexpr (kS == 0) {
      // Lane j < n holds slot j (the launcher: n <= kMicroShuffleSlots and
      // n <= B, so every expert has one block). lt: the slots holding a
      // smaller expert; rank: earlier slots holding mine.
      unsigned lt = 0;
#pragma unroll
      for (int j = 0; j < kMicroShuffleSlots; ++j) {
        const int k = __shfl_sync(kFullMask, e, j);
        rank += j < lane && k == e ? 1 : 0;
        lt |= k >= 0 && k < e ? 1u << j : 0u;
      }
      const unsigned leaders = __ballot_sync(kFullMask, e >= 0 && rank == 0);
      nb = e >= 0 && rank == 0 ? 1 : 0;
      fb = __popc(leaders & lt);
      tb = __popc(leaders);
    } else {
      unsigned below;  // lanes holding a smaller expert
      const unsigned peers = warp_peers_below(e, nbits, below);
      rank = __popc(peers & lanemask_lt(lane));
      nb = e >= 0 && rank == 0 ? db.div_up(__popc(peers)) : 0;
      // First block of my expert (blocks of the smaller distinct experts) and
      // all blocks, one ballot per bit of the block counts (<= ceil(n / B)).
#pragma unroll 1
      for (int bit = 0; (1 << bit) <= most; ++bit) {
        const unsigned m = __ballot_sync(kFullMask, (nb >> bit) & 1);
        tb += __popc(m) << bit;
        fb += __popc(m & below) << bit;
      }
    }
    __syncwarp();  // this warp's fill above lands before its overwrites below
    if constexpr (kLate) prim::pdl_launch_dependents();
    if (blockIdx.x == 0 && threadIdx.x == 0) *a.total = tb * db.B;
    if (e < 0) return;
    const int row = fb * db.B + rank;
    if (row >= sl.r0 && row < sl.r1) a.sorted[row] = lane;
    const int jb1 = min(fb + nb, sl.j1);
#pragma unroll 1
    for (int j = max(fb, sl.j0); j < jb1; ++j) a.eids[j] = e;
  } else {
    // Warp h < kS owns column h (slots 32h .. 32h + 31) and publishes its
    // ballots; each then compares its slots with every column's ballots
    // (kS mask updates per expert bit, not kS * kS: at 128 slots the layout
    // was ~900 instructions per warp, every warp computing all of it).
    __shared__ unsigned s_key[kS][33];  // [h][0]: valid, [h][1 + b]: bit b of the expert set
    // Bits of a block count: up to numel <= 32 kS blocks (B = 1).
    constexpr int kNbBits = std::bit_width(static_cast<unsigned>(kS * kWarp));
    __shared__ unsigned s_nb[kS][kNbBits];  // [h][b]: bit b of the block count
    const int e = owner && mine < n ? expert_of<IdT>(raw, a) : -1;
    // The bit loops are unrolled by 4: their ballots and shared loads then
    // issue back to back instead of one latency per bit (0.1-0.4 us at E >=
    // 256: align-notes.md "micro: unrolled bit loops").
    if (owner) {
      const unsigned v = __ballot_sync(kFullMask, e >= 0);
      if (lane == 0) s_key[w][0] = v;
#pragma unroll 4
      for (int bit = 0; bit < nbits; ++bit) {
        const unsigned m = __ballot_sync(kFullMask, (e >> bit) & 1);
        if (lane == 0) s_key[w][1 + bit] = m;
      }
    }
    __syncthreads();  // every column's ballots, and every warp's fill
    unsigned below[kS];
    int rank = 0, nb = 0;
    if (owner) {
      unsigned peers[kS];
#pragma unroll
      for (int h = 0; h < kS; ++h) {
        peers[h] = e >= 0 ? s_key[h][0] : ~s_key[h][0];
        below[h] = 0;
      }
#pragma unroll 4
      for (int bit = nbits - 1; bit >= 0; --bit) {
        const bool set = (e >> bit) & 1;
#pragma unroll
        for (int h = 0; h < kS; ++h) prim::peers_below_step(set, s_key[h][1 + bit], peers[h], below[h]);
      }
      int c = 0;
#pragma unroll
      for (int h = 0; h < kS; ++h) {
        if (e < 0) below[h] = 0;
        c += __popc(peers[h]);
        if (h < w) rank += __popc(peers[h]);
        if (h == w) rank += __popc(peers[h] & lanemask_lt(lane));
      }
      nb = e >= 0 && rank == 0 ? db.div_up(c) : 0;
#pragma unroll 1
      for (int bit = 0; (1 << bit) <= most; ++bit) {
        const unsigned m = __ballot_sync(kFullMask, (nb >> bit) & 1);
        if (lane == 0) s_nb[w][bit] = m;
      }
    }
    __syncthreads();  // every column's block-count ballots
    if constexpr (kLate) prim::pdl_launch_dependents();
    if (!owner) return;
    int fb = 0, tb = 0;
#pragma unroll 1
    for (int bit = 0; (1 << bit) <= most; ++bit) {
#pragma unroll
      for (int h = 0; h < kS; ++h) {
        const unsigned m = s_nb[h][bit];
        tb += __popc(m) << bit;
        fb += __popc(m & below[h]) << bit;
      }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) *a.total = tb * db.B;
    if (e < 0) return;
    // Any row of the block's chunk: the barriers ordered every warp's fill.
    const int row = fb * db.B + rank;
    if (row >= sl.cb && row < sl.ce) a.sorted[row] = mine;
    const int jc0 = db.div_up(sl.cb), jc1 = min(db.div_up(sl.ce), a.max_blocks);
    const int jb1 = min(fb + nb, jc1);
#pragma unroll 1
    for (int j = max(fb, jc0); j < jb1; ++j) a.eids[j] = e;
  }
}

// Slots per lane for numel slots (0: one, by shuffles, where numel <=
// kMicroShuffleSlots and every expert fits one block of B rows).
inline int micro_per_lane(std::int64_t numel, std::int64_t block_size) {
  if (numel <= kMicroShuffleSlots && numel <= block_size) return 0;
  int s = 1;
  while (s < kMicroMaxPerLane && numel > std::int64_t{s} * kWarp) s *= 2;
  return s;
}

inline const char* micro_not_applicable(const Problem& p, const DeviceCaps&) {
  if (p.numel > kMicroMaxNumel) return "needs numel <= 256 (8 columns of 32 slots)";
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
inline cudaError_t launch_micro(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl, int chunk,
                                bool late_trigger) {
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const int grid = static_cast<int>(ceil_div<std::int64_t>(rows, chunk));
  const bool p2 = is_pow2(p.block_size);
  // The instantiation for S slots per lane, at its default block size.
  const auto go = [&](auto per_lane) {
    constexpr int S = decltype(per_lane)::value;
    constexpr int kT = kMicroThreads<S>;
    const auto kernel = late_trigger ? (p2 ? micro_kernel<IdT, S, true, kT, true> : micro_kernel<IdT, S, false, kT, true>)
                                     : (p2 ? micro_kernel<IdT, S, true> : micro_kernel<IdT, S, false>);
    return prim::launch_ex(kernel, grid, kT, 0, s, prim::pdl_attrs(pdl), make_args(p, bufs), chunk);
  };
  switch (micro_per_lane(p.numel, p.block_size)) {
    case 0: return go(std::integral_constant<int, 0>{});
    case 1: return go(std::integral_constant<int, 1>{});
    case 2: return go(std::integral_constant<int, 2>{});
    case 4: return go(std::integral_constant<int, 4>{});
    default: return go(std::integral_constant<int, 8>{});
  }
}

template <class IdT>
inline cudaError_t launch_micro(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  const DeviceCaps& caps = device_caps();
  return launch_micro<IdT>(p, bufs, s, pdl, micro_chunk(p, caps),
                           pdl_late_trigger(p, pdl, policy_for(caps).micro_late_trigger_max_slots));
}

}  // namespace moekit::align::detail
