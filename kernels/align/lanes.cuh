// Variant `lanes` (few experts, up to a few thousand tokens: E <= 32,
// numel <= 16384): every block lays out ALL slots, then writes only its own
// stripe of rows, like `stripe`; one launch, no workspace, no atomics, no
// hand-over between blocks; stable.
//
// With E <= 32 a warp can count its slots without shared memory: from one
// ballot per expert bit, lane e builds the mask of the lanes holding expert e
// (the comparison warp_peers makes for a lane's own key, made for the key
// e), so lane e keeps expert e's running count in a register, and a slot's
// rank among its warp's earlier slots of its expert is that count, read from
// lane `expert` by one shuffle, plus its peers below it. Few shared counters
// under many atomics is what slows `solo`, `tiny` and `onepass` down at this
// shape (8192 slots of E = 8: 1,024 atomics per counter in solo).
//   1. load kR ids per thread (warp w owns slots [w·32kR, (w+1)·32kR), one
//      coalesced 4- or 8-byte load per round); fill the stripe [r0, r1) of
//      sorted_token_ids with the padding value and its expert_ids entries
//      with -1 while they are in flight;
//   2. per round, kBits + 1 ballots give every slot its rank inside the warp
//      and every lane its expert's count; each warp writes its E counts into
//      a row of a table; one barrier;
//   3. warp k turns column k of the table into prefixes over the warps (a
//      warp scan) and writes the expert's total; one barrier;
//   4. every warp scans the E totals' block counts (one expert per lane);
//      a slot's row is its expert's start + the column prefix of its warp +
//      its rank in the warp: slot order (stable). A block writes the slots
//      whose rows fall in its stripe and, for a slot at a block's first row,
//      that block's expert_ids entry.
#pragma once

#include <algorithm>
#include <string>

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "primitives/lane_mask.cuh"

namespace moekit::align::detail {

constexpr int kLanesMaxExperts = kWarp;  // one expert per lane
constexpr int kLanesMinThreads = 256;
constexpr int kLanesMaxThreads = 1024;
constexpr int kLanesMaxRounds = 16;  // ids per thread (registers: two per round)
constexpr int kLanesMaxNumel = kLanesMaxThreads * kLanesMaxRounds;

// kThreads per block, kR ids per thread, kBits expert bits compared (E <=
// 2^kBits; the bits above E's are 0 in every valid id).
template <class IdT, int kThreads, int kR, int kBits>
__global__ void __launch_bounds__(kThreads) lanes_kernel(Args a, int stripe_rows) {
  constexpr int kWarps = kThreads / kWarp;
  __shared__ int tab[kWarps][kWarp];  // [warp][expert]: counts, then prefixes over the warps
  __shared__ int tot[kWarp];          // expert totals
  const int t = static_cast<int>(threadIdx.x), w = t / kWarp, lane = t % kWarp;
  const int E = a.num_experts, n = a.numel;
  prim::pdl_wait();  // the ids; the fill overwrites rows the previous kernel may read
  prim::pdl_launch_dependents();

  const int base = w * kR * kWarp + lane;
  int ev[kR];
  load_experts_strided<IdT>(a, base, kWarp, ev);
  const DivB<false> db = make_divb<false>(a.block_size);
  const int r0 = static_cast<int>(blockIdx.x) * stripe_rows;
  const int r1 = min(r0 + stripe_rows, a.max_padded);
  fill_range(a.sorted, r0, r1, n, t, kThreads);
  // expert_ids entry j belongs to the stripe holding row j * B.
  const int j1 = blockIdx.x + 1 == gridDim.x ? a.max_blocks : db.div_up(r1);
#pragma unroll 1
  for (int j = db.div_up(r0) + t; j < j1; j += kThreads) a.eids[j] = -1;

  // Per round: `peers` keeps the lanes that agree with my slot's expert on
  // every bit, `mine` those that agree with expert `lane` (warp_peers_fixed,
  // made twice from the same ballots).
  unsigned count = 0;  // expert `lane`'s slots in this warp so far
  int pre[kR];         // a slot's rank among the warp's slots of its expert
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int e = ev[r];
    const unsigned valid = __ballot_sync(kFullMask, e >= 0);
    unsigned peers = valid, mine = valid;
#pragma unroll
    for (int k = kBits - 1; k >= 0; --k) {
      const unsigned m = __ballot_sync(kFullMask, (e >> k) & 1);
      peers &= ((e >> k) & 1) ? m : ~m;
      mine &= ((lane >> k) & 1) ? m : ~m;
    }
    pre[r] = static_cast<int>(__shfl_sync(kFullMask, count, e & (kWarp - 1)) + __popc(peers & prim::lanemask_lt()));
    count += __popc(mine);
  }
  tab[w][lane] = static_cast<int>(count);
  __syncthreads();  // every warp's counts; also orders every thread's fill before the stores below

#pragma unroll 1
  for (int k = w; k < E; k += kWarps) {
    const int c = lane < kWarps ? tab[lane][k] : 0;
    const int incl = warp_inclusive_scan(c);
    if (lane < kWarps) tab[lane][k] = incl - c;
    if (lane == kWarp - 1) tot[k] = incl;
  }
  __syncthreads();

  const int nb = lane < E ? db.div_up(tot[lane]) : 0;
  const int incl = warp_inclusive_scan(nb);
  const int first_block = incl - nb;  // of expert `lane`
  const int blocks = __shfl_sync(kFullMask, incl, kWarp - 1);
  if (blockIdx.x == 0 && t == 0) *a.total = blocks * db.B;
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const int e = ev[r];
    const int fb = __shfl_sync(kFullMask, first_block, e & (kWarp - 1));
    if (e < 0) continue;
    const int rank = tab[w][e] + pre[r];
    const int row = fb * db.B + rank;
    if (row < r0 || row >= r1) continue;
    a.sorted[row] = base + r * kWarp;
    const bool first = db.pow2() ? (rank & (db.B - 1)) == 0 : rank % db.B == 0;
    if (first) a.eids[db.div(row)] = e;
  }
}

struct LanesPlan {
  int threads = 0;  // 0: not applicable
  int rounds = 0;
  int bits = 0;     // expert bits compared: 3 or 5
  int grid = 0;
  int stripe_rows = 0;
};

// Threads: halved from lanes_max_threads while half still holds every slot
// in one round (down to 256); rounds: a power of two, enough for all slots.
// Stripes of about `rows` rows (a multiple of 16: 64-byte aligned), at most
// one per SM.
inline LanesPlan lanes_plan_shape(const Problem& p, const DeviceCaps& caps, int rows, int max_threads) {
  LanesPlan pl;
  if (p.numel > kLanesMaxNumel || p.num_experts > kLanesMaxExperts) return pl;
  int threads = std::clamp(max_threads, kLanesMinThreads, kLanesMaxThreads);
  while (threads > kLanesMinThreads && threads / 2 >= p.numel) threads /= 2;
  int rounds = 1;
  while (static_cast<std::int64_t>(threads) * rounds < p.numel) rounds *= 2;
  if (rounds > kLanesMaxRounds) return pl;
  pl.threads = threads;
  pl.rounds = rounds;
  pl.bits = p.num_experts <= 8 ? 3 : 5;
  const std::int64_t all = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const std::int64_t sms = std::max(caps.sm_count, 1);
  const std::int64_t grid = std::min(ceil_div<std::int64_t>(all, std::max(rows, 16)), sms);
  const std::int64_t per = ceil_div<std::int64_t>(ceil_div<std::int64_t>(all, grid), 16) * 16;
  pl.stripe_rows = static_cast<int>(per);
  pl.grid = static_cast<int>(ceil_div<std::int64_t>(all, per));
  return pl;
}

inline LanesPlan lanes_plan(const Problem& p, const DeviceCaps& caps) {
  const Policy& pol = policy_for(caps);
  return lanes_plan_shape(p, caps, pol.lanes_rows_per_block, pol.lanes_max_threads);
}

inline const char* lanes_not_applicable(const Problem& p, const DeviceCaps&) {
  if (p.num_experts > kLanesMaxExperts) {
    static const std::string why = "needs E <= " + std::to_string(kLanesMaxExperts) + " (one expert per lane)";
    return why.c_str();
  }
  if (p.numel > kLanesMaxNumel) {
    static const std::string why = "needs numel <= " + std::to_string(kLanesMaxNumel) + " (" +
                                   std::to_string(kLanesMaxRounds) + " ids per thread of one block)";
    return why.c_str();
  }
  return nullptr;
}

// Launches (lanes.cu: its instantiations compile apart from the registry's).
template <class IdT>
cudaError_t launch_lanes(const Problem& p, const Buffers& bufs, cudaStream_t s, const LanesPlan& pl);

template <class IdT>
inline cudaError_t launch_lanes(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  return launch_lanes<IdT>(p, bufs, s, lanes_plan(p, device_caps()));
}

}  // namespace moekit::align::detail
