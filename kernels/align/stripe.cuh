// Variant `stripe` (decode batches and small prefills with many padded rows:
// numel <= 1024): every block lays out ALL slots, then writes only its own
// stripe of rows. One launch, no workspace, no global atomics, no hand-over
// between blocks; stable (`stable` runs it from 128 to 1024 slots for
// E <= 512).
//
// `solo` is one block: one SM writes every padding row (its cost past ~8K
// rows). `relay` and SGLang's fused kernel spread that fill over other blocks
// and hand the rows over through L2 before the slots go in. `tiny` spreads it
// without a hand-over but writes its padding rows after the scan, expert by
// expert. Here the fill of a block's stripe comes first, while the ids load,
// and no other block ever writes a row of it. That needs the layout to be
// the same in every block, so a slot's rank comes from ballots, not from the
// order of shared atomics (which differs between blocks):
//   1. zero E counters and a table of one row of E counts per warp (shared
//      memory, before the grid dependency wait);
//   2. load one id per thread; fill the stripe [r0, r1) of sorted_token_ids
//      with the padding value and its expert_ids entries with -1 while it is
//      in flight; one barrier;
//   3. per warp, the lanes with the same expert from one ballot per expert
//      bit (prim::warp_peers): a slot's rank inside its warp is the number of
//      such lanes below it; the lowest one writes the warp's count into the
//      table and adds it to the expert's counter; one barrier;
//   4. scan the experts' BLOCK counts (warp_scan_block_counts up to 128 experts, no
//      barrier; else the block scan);
//   5. a slot's rank inside its expert is its warp rank plus its column of the
//      table over the earlier warps (at most 31 loads, all in flight at once;
//      a pass turning the columns into prefixes cost a barrier more and was
//      slower): slot order (stable). A block writes the slots whose rows fall
//      in its stripe and, for a slot at a block's first row, that block's
//      expert_ids entry.
// Comments here keep µs figures: 3 lines (why alternative designs lost; not thresholds).
#pragma once

#include <algorithm>
#include <string>

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/warp_count_scan.cuh"
#include "primitives/lane_mask.cuh"
#include "primitives/warp_peers.cuh"

namespace moekit::align::detail {

constexpr int kStripeMinThreads = 256;  // launch_stripe's smallest block
constexpr int kStripeMaxThreads = 1024;
constexpr int kStripeMaxNumel = kStripeMaxThreads;  // one slot per thread

// Ints of the count table: one row of E per 32 slots, rounded up to 4 for the
// 16-byte zeroing.
__host__ __device__ inline int stripe_table_ints(int numel, int num_experts) {
  return static_cast<int>(((static_cast<unsigned>(numel) + 31u) / 32u * static_cast<unsigned>(num_experts) + 3u) & ~3u);
}
// (The limits text and not_applicable share this wording.)
inline constexpr const char* kStripeSmemText = "4(ceil(numel/32)E+E+1)+256 bytes of shared memory";
// Dynamic shared memory: the table, then E + 1 counts / first blocks.
inline std::size_t stripe_smem(std::int64_t numel, int num_experts) {
  return sizeof(int) * (static_cast<std::size_t>(stripe_table_ints(static_cast<int>(numel), num_experts)) +
                        static_cast<std::size_t>(num_experts) + 1);
}

// kP: 0 for the block scan, else experts per lane of warp_scan_block_counts;
// kPow2: B is a power of two.
template <class IdT, int kThreads, int kP, bool kPow2>
__global__ void __launch_bounds__(kThreads) stripe_kernel(Args a, int stripe_rows) {
  extern __shared__ int4 sm4[];
  __shared__ int warp_sums[prim::kBlockScanScratch];
  const int t = static_cast<int>(threadIdx.x), w = t / kWarp;
  const int E = a.num_experts, n = a.numel;
  const int tab_ints = stripe_table_ints(n, E);
  int* const tab = reinterpret_cast<int*>(sm4);
  int* const cs = tab + tab_ints;
#pragma unroll 1
  for (int i = t; i < tab_ints / 4; i += kThreads) sm4[i] = make_int4(0, 0, 0, 0);
#pragma unroll 1
  for (int e = t; e < E; e += kThreads) cs[e] = 0;
  if constexpr (kP == 0) {
    if (t < prim::kBlockScanScratch) warp_sums[t] = 0;  // block_exclusive_scan_small's precondition
  }
  prim::pdl_wait();  // the ids; the fill overwrites rows the previous kernel may read
  prim::pdl_launch_dependents();  // early: a trigger after the scan was 0.2-0.3 us slower (64 x 8)

  int ev[1];
  ev[0] = t < n ? expert_at<IdT>(a, t) : -1;
  const DivB<kPow2> db = make_divb<kPow2>(a.block_size);
  const int r0 = static_cast<int>(blockIdx.x) * stripe_rows;
  const int r1 = min(r0 + stripe_rows, a.max_padded);
  fill_range(a.sorted, r0, r1, n, t, kThreads);
  // expert_ids entry j belongs to the stripe holding row j * B.
  const int j1 = blockIdx.x + 1 == gridDim.x ? a.max_blocks : db.div_up(r1);
#pragma unroll 1
  for (int j = db.div_up(r0) + t; j < j1; j += kThreads) a.eids[j] = -1;
  __syncthreads();  // table and counters zeroed

  const int e = ev[0];
  // In this kernel every instruction a warp issues is on the critical path
  // (~10 cycles each; the looped compare and column sum were 0.05-0.1 us
  // slower): the in-warp-scan instantiations compare a fixed 5 or 7 expert
  // bits (bits above E's are 0 in every valid id: they change nothing), and
  // the column sum below is unrolled over the warps.
  unsigned peers;
  if constexpr (kP > 0) {
    peers = prim::warp_peers_fixed<kP == 1 ? 5 : 7>(e);  // E <= 32 kP
  } else {
    peers = prim::warp_peers(e, expert_bits(E));
  }
  const unsigned below = peers & prim::lanemask_lt();
  if (e >= 0 && below == 0) {
    tab[w * E + e] = __popc(peers);
    atomicAdd(cs + e, __popc(peers));
  }
  __syncthreads();  // every count; also orders every thread's fill before the stores below

  int fb[1], blocks;
  if constexpr (kP > 0) {
    blocks = warp_scan_block_counts<kP>(cs, E, db, ev, fb);
  } else {
    const auto nblocks = [db](int c) { return db.div_up(c); };
    blocks = E <= kThreads ? prim::block_exclusive_scan_small(cs, E, warp_sums, nblocks)
                           : prim::block_exclusive_scan(cs, E, warp_sums, nblocks);
    fb[0] = e >= 0 ? cs[e] : 0;
  }
  if (blockIdx.x == 0 && t == 0) *a.total = blocks * db.B;
  if (e < 0) return;
  int rank = __popc(below);
#pragma unroll
  for (int r = 0; r < kThreads / kWarp - 1; ++r)
    if (r < w) rank += tab[r * E + e];
  const int row = fb[0] * db.B + rank;
  if (row < r0 || row >= r1) return;
  a.sorted[row] = t;
  const bool first = db.pow2() ? (rank & (db.B - 1)) == 0 : rank % db.B == 0;
  if (first) a.eids[db.div(row)] = e;
}

struct StripePlan {
  int threads = 0;  // 0: not applicable
  int per_lane = 0;  // experts per lane of the in-warp scan; 0: block scan
  int grid = 0;
  int stripe_rows = 0;
  std::size_t smem = 0;
};

// Threads: one per slot and, for the block scan, one per expert, a power of
// two from stripe_min_threads (fewer are faster: at 128 slots 256 threads
// took 1.82-2.05 us, 512 1.88-2.26, 1024 2.19-2.79); stripes of about `rows`
// rows (a multiple of 16: 64-byte aligned), at most one per SM.
inline StripePlan stripe_plan_rows(const Problem& p, const DeviceCaps& caps, int rows) {
  StripePlan pl;
  if (p.numel > kStripeMaxNumel) return pl;
  pl.per_lane = warp_scan_per_lane(p.num_experts);
  const std::int64_t want = std::max(p.numel,
                                     pl.per_lane > 0 ? std::int64_t{0} : std::int64_t{p.num_experts});
  int threads = policy_for(caps).stripe_min_threads;
  while (threads < kStripeMaxThreads && threads < want) threads *= 2;
  pl.threads = threads;
  const std::int64_t all = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const std::int64_t sms = std::max(caps.sm_count, 1);
  const std::int64_t grid = std::min(ceil_div<std::int64_t>(all, std::max(rows, 16)), sms);
  const std::int64_t per = ceil_div<std::int64_t>(ceil_div<std::int64_t>(all, grid), 16) * 16;
  pl.stripe_rows = static_cast<int>(per);
  pl.grid = static_cast<int>(ceil_div<std::int64_t>(all, per));
  pl.smem = stripe_smem(p.numel, p.num_experts);
  return pl;
}

inline StripePlan stripe_plan(const Problem& p, const DeviceCaps& caps) {
  return stripe_plan_rows(p, caps, policy_for(caps).stripe_rows_per_block);
}

inline const char* stripe_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.numel > kStripeMaxNumel) {
    static const std::string why = "needs numel <= " + std::to_string(kStripeMaxNumel) + " (one slot per thread of one block)";
    return why.c_str();
  }
  if (!caps.present()) return nullptr;  // the rest depends on the device
  if (!fits_smem(caps, stripe_smem(p.numel, p.num_experts) + kBlockScanReserve)) {
    static const std::string why = std::string("needs ") + kStripeSmemText + " per block";
    return why.c_str();
  }
  return nullptr;
}

// Launches (stripe.cu: its instantiations compile apart from the registry's).
template <class IdT>
cudaError_t launch_stripe(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl, const StripePlan& pl);

template <class IdT>
inline cudaError_t launch_stripe(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  return launch_stripe<IdT>(p, bufs, s, pdl, stripe_plan(p, device_caps()));
}

}  // namespace moekit::align::detail
