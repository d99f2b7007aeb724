// Variant `solo` (decode batches and small prefills: numel <= 8192): ONE
// block, ONE launch, no workspace, no global atomics, no hand-over between
// blocks.
//
// `relay` splits the padding fill (other blocks) from the layout (the last
// block) and pays a hand-over through L2 for it: its skeleton alone, fills
// plus the release/acquire wait and no layout, cost 2.0-2.2 us where SGLang's
// whole kernel took 1.9-2.1 (align-notes.md "relay ablation"). `tiny` has no
// hand-over but writes its padding rows expert by expert after its scan, on
// the critical path. Here one block does everything and the padding costs
// nothing on that path:
//   1. zero E shared counters (before the grid dependency wait: shared only);
//   2. load kL ids per thread, then fill ALL of sorted_token_ids with the
//      padding value and ALL of expert_ids with -1 while they are in flight
//      (nothing in the fill depends on them);
//   3. rank every slot inside its expert with a shared atomicAdd whose return
//      value is the rank (one atomic per distinct expert of a warp, found
//      with __match_any_sync, was 0.05-0.45 us slower at every E measured,
//      E = 8 included: align-notes.md "solo");
//   4. scan the experts' BLOCK counts: up to 128 experts every warp scans
//      them all itself (warp_scan_block_counts, no barrier); else one
//      expert per thread when E fits the block (2 barriers) or the chunked
//      scan (3). The counting barrier
//      already ordered every thread's fill before the overwrites below;
//   5. write each slot's row; the slot at the first row of a block writes the
//      block's expert_ids entry (every block of an expert starts with a slot).
// 2 barriers in all up to 128 experts, 4 or 5 beyond. Unstable: the
// order inside an expert is the order of the shared atomics.
// Comments here keep µs figures: 6 lines (why alternative designs lost; not thresholds).
#pragma once

#include <algorithm>
#include <string>

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/warp_count_scan.cuh"

namespace moekit::align::detail {

constexpr int kSoloMinThreads = 256;  // launch_solo's smallest block
constexpr int kSoloMaxThreads = 1024;
constexpr int kSoloMaxPerThread = 8;
constexpr int kSoloMaxNumel = kSoloMaxThreads * kSoloMaxPerThread;

// kL: slots per thread (slot k * kThreads + t); kP: 0 for the block scan,
// else experts per lane of the in-warp scan (E <= 32 kP); kPow2: B is a power
// of two (shifts only).
// kLate: the PDL trigger after the scan (pdl_late_trigger; a template
// argument: a runtime flag cost 0.04 us with PDL off).
template <class IdT, int kThreads, int kL, int kP, bool kPow2, bool kLate = false>
__global__ void __launch_bounds__(kThreads) solo_kernel(Args a) {
  extern __shared__ int cs[];  // E + 1
  __shared__ int warp_sums[prim::kBlockScanScratch];
  const int t = static_cast<int>(threadIdx.x);
  const int E = a.num_experts, n = a.numel;
#pragma unroll 1
  for (int e = t; e < E; e += kThreads) cs[e] = 0;
  if (t < prim::kBlockScanScratch) warp_sums[t] = 0;  // block_exclusive_scan_small's precondition
  prim::pdl_wait();  // the ids; the fill overwrites rows the previous kernel may read
  if constexpr (!kLate) prim::pdl_launch_dependents();  // else after the scan: pdl_late_trigger

  int ev[kL];
  load_experts_strided<IdT>(a, t, kThreads, ev);
  fill_range(a.sorted, 0, a.max_padded, n, t, kThreads);
#pragma unroll 1
  for (int j = t; j < a.max_blocks; j += kThreads) a.eids[j] = -1;
  __syncthreads();  // counters zeroed

  int rk[kL];
#pragma unroll
  for (int k = 0; k < kL; ++k) rk[k] = ev[k] >= 0 ? atomicAdd(cs + ev[k], 1) : 0;
  __syncthreads();  // every count, and every thread's fill before the stores below

  const DivB<kPow2> db = make_divb<kPow2>(a.block_size);
  int fb[kL], blocks;
  if constexpr (kP > 0) {
    blocks = warp_scan_block_counts<kP>(cs, E, db, ev, fb);
  } else {
    // cs[e] := first block of expert e, cs[E] := all blocks.
    const auto nblocks = [db](int c) { return db.div_up(c); };
    blocks = E <= kThreads ? prim::block_exclusive_scan_small(cs, E, warp_sums, nblocks)
                           : prim::block_exclusive_scan(cs, E, warp_sums, nblocks);
#pragma unroll
    for (int k = 0; k < kL; ++k) fb[k] = ev[k] >= 0 ? cs[ev[k]] : 0;
  }
  if constexpr (kLate) prim::pdl_launch_dependents();
  if (t == 0) *a.total = blocks * db.B;
#pragma unroll
  for (int k = 0; k < kL; ++k) {
    if (ev[k] < 0) continue;
    const int row = fb[k] * db.B + rk[k];
    a.sorted[row] = k * kThreads + t;
    const bool first = db.pow2() ? (rk[k] & (db.B - 1)) == 0 : rk[k] % db.B == 0;
    if (first) a.eids[db.div(row)] = ev[k];
  }
}

struct SoloPlan {
  int threads = 0;  // 0: not applicable
  int per_thread = 1;
  int per_lane = 0;  // experts per lane of the in-warp scan; 0: block scan
  bool late_trigger = false;  // pdl_late_trigger (instantiated for 256 threads, one slot each)
};

// For launches with `pdl`. Threads: one per slot (2, 4 or 8 per thread past 1024 slots) and, past 128
// experts, one per expert (the block scan), a power of two in
// [solo_min_threads, 1024]. More threads for more padding rows did not help
// (1024 threads for 8,256 rows took 2.26 us where 256 took 1.99), nor did a
// thread block cluster whose other blocks fill (0.35-0.45 us more launch
// cost; align-notes.md "solo").
inline SoloPlan solo_plan(const Problem& p, const DeviceCaps& caps, bool pdl) {
  SoloPlan pl;
  if (p.numel > kSoloMaxNumel) return pl;
  while (pl.per_thread < kSoloMaxPerThread && p.numel > std::int64_t{pl.per_thread} * kSoloMaxThreads) pl.per_thread *= 2;
  // 8 per lane (E <= 256) was 0.15-0.4 us slower than the block scan.
  pl.per_lane = warp_scan_per_lane(p.num_experts);
  const std::int64_t want = std::max(ceil_div<std::int64_t>(p.numel, pl.per_thread),
                                     pl.per_lane > 0 ? std::int64_t{0} : std::int64_t{p.num_experts});
  int threads = policy_for(caps).solo_min_threads;
  while (threads < kSoloMaxThreads && threads < want) threads *= 2;
  pl.threads = threads;
  pl.late_trigger = pl.per_thread == 1 && threads == kSoloMinThreads &&
                    pdl_late_trigger(p, pdl, policy_for(caps).solo_late_trigger_max_slots);
  return pl;
}

inline const char* solo_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.numel > kSoloMaxNumel) {
    static const std::string why = "needs numel <= " + std::to_string(kSoloMaxNumel) + " (" +
                                   std::to_string(kSoloMaxPerThread) + " slots per thread of one block)";
    return why.c_str();
  }
  if (!caps.present()) return nullptr;  // the rest depends on the device
  if (!fits_smem(caps, expert_table_block_smem(p.num_experts)))
    return "needs 4(E+1)+256 bytes of shared memory per block";
  return nullptr;
}

// Launches (solo.cu: its instantiations compile apart from the registry's).
template <class IdT>
cudaError_t launch_solo(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl, const SoloPlan& pl);

template <class IdT>
inline cudaError_t launch_solo(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  return launch_solo<IdT>(p, bufs, s, pdl, solo_plan(p, device_caps(), pdl));
}

}  // namespace moekit::align::detail
