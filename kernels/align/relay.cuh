// Variant `relay` (small and mid-sized inputs, numel <= 4096): ONE launch in
// which the padding fill and the layout run side by side on different SMs.
//
// `tiny` makes every block rank all slots, scan all E experts and then write
// the padding rows and expert_ids of its own chunk expert by expert: every
// block's critical path holds the whole layout AND a share of the writes. Here
// the work is split by kind instead:
//   - fill blocks (all but the last) write the padding value over their chunk
//     of sorted_token_ids and -1 over their share of expert_ids, then
//     arrive on a counter in the workspace (a release reduction);
//   - the last block alone loads the ids, ranks each slot inside its expert
//     with shared atomics, scans the experts' BLOCK counts (rows are B times
//     blocks: no division after the counts), waits until every fill block
//     has arrived, clears the counter, and writes the slots, the expert_ids
//     of the used blocks and num_tokens_post_pad.
// The wait orders every fill before the overwrites; by the time the layout is
// done the fills have long arrived, so it costs one acquire load. The grid is
// launched cooperatively (every block resident, or the launch fails: the last
// block never spins on a block that cannot run) and is scheduled in blockIdx
// order, so the waiting block is the last to start.
//
// The workspace (one counter) must be zero before the first launch and every
// launch leaves it zero: the next launch's fill blocks arrive only after their
// grid dependency wait, i.e. after this grid completed. With a dirty
// workspace the output may be wrong, but nothing is written outside the
// output arrays and the wait cannot hang (it waits for a count to be reached,
// and the count only grows). Unstable: the order inside an expert is the
// order of the shared atomics.
#pragma once

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

constexpr int kRelayLoads = 4;  // slots per thread of the last block
constexpr int kRelayMaxNumel = kRelayLoads * 1024;

// Dynamic shared memory: E + 1 ints (counts, then block starts).
template <class IdT, int kThreads>
__global__ void __launch_bounds__(kThreads) relay_kernel(Args a, unsigned* __restrict__ ws, int chunk) {
  const int t = static_cast<int>(threadIdx.x);
  const int fills = static_cast<int>(gridDim.x) - 1;
  prim::pdl_wait();  // the ids, the outputs the previous kernel may read, the counter
  prim::pdl_launch_dependents();

  if (static_cast<int>(blockIdx.x) < fills) {
    const int b = static_cast<int>(blockIdx.x);
    // Rows [r0, r1): unsigned, b * chunk may pass 2^31 when max_padded nears it.
    const unsigned mp = static_cast<unsigned>(a.max_padded);
    const unsigned r0 = min(static_cast<unsigned>(b) * static_cast<unsigned>(chunk), mp);
    fill_range(a.sorted, r0, min(r0 + static_cast<unsigned>(chunk), mp), a.numel, t, kThreads);
    const int jchunk = (a.max_blocks + fills - 1) / fills;
    const int j0 = min(b * jchunk, a.max_blocks), j1 = min(j0 + jchunk, a.max_blocks);
#pragma unroll 1
    for (int j = j0 + t; j < j1; j += kThreads) a.eids[j] = -1;
    __syncthreads();  // every store of the block before thread 0's release
    if (t == 0) prim::red_release_gpu(ws, 1u);
    return;
  }

  extern __shared__ int cs[];  // E + 1
  __shared__ int warp_sums[prim::kBlockScanScratch];
  const int E = a.num_experts;
  int ev[kRelayLoads];
  load_experts_strided<IdT>(a, t, kThreads, ev);
#pragma unroll 1
  for (int e = t; e < E; e += kThreads) cs[e] = 0;
  if (t < prim::kBlockScanScratch) warp_sums[t] = 0;  // block_exclusive_scan_small's precondition
  __syncthreads();
  int rk[kRelayLoads];
#pragma unroll
  for (int k = 0; k < kRelayLoads; ++k) rk[k] = ev[k] >= 0 ? atomicAdd(cs + ev[k], 1) : 0;
  __syncthreads();
  const DivB<> db = make_divb(a.block_size);
  // cs[e] := first block of expert e (scan of the block counts), cs[E] := all.
  const auto nblocks = [db](int c) { return db.div_up(c); };
  const int blocks = E <= kThreads ? prim::block_exclusive_scan_small(cs, E, warp_sums, nblocks)
                                   : block_exclusive_scan(cs, E, warp_sums, nblocks);

  if (t == 0) {
    while (prim::ld_acquire_gpu(ws) < static_cast<unsigned>(fills)) {
    }
    *ws = 0;  // every fill block has arrived; the next launch's arrive after this grid
    *a.total = blocks * db.B;
  }
  __syncthreads();  // thread 0's acquire orders the fills before every store below
#pragma unroll
  for (int k = 0; k < kRelayLoads; ++k) {
    if (ev[k] >= 0) a.sorted[cs[ev[k]] * db.B + rk[k]] = k * kThreads + t;
  }
#pragma unroll 1
  for (int e = t; e < E; e += kThreads) {
    const int j1 = cs[e + 1];
#pragma unroll 1
    for (int j = cs[e]; j < j1; ++j) a.eids[j] = e;
  }
}

inline std::size_t relay_workspace() { return sizeof(unsigned); }

struct RelayPlan {
  int grid = 0;  // fill blocks + 1 (0: not applicable)
  int threads = 0;
  int chunk = 0;  // rows per fill block, a multiple of 4
};

// Launch shape: the last block's threads by numel (kRelayLoads slots each,
// at least the policy's relay_min_threads; every block has that many), fill
// blocks of relay_rows_per_thread rows per thread, fewer and larger chunks
// when more blocks than SMs would be needed.
inline RelayPlan relay_plan(const Problem& p, const DeviceCaps& caps) {
  RelayPlan pl;
  if (p.numel > kRelayMaxNumel || caps.sm_count < 2) return pl;
  const Policy& pol = policy_for(caps);
  int threads = pol.relay_min_threads;
  while (threads < 1024 && std::int64_t{threads} * kRelayLoads < p.numel) threads *= 2;
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  std::int64_t fills = ceil_div<std::int64_t>(rows, std::int64_t{threads} * pol.relay_rows_per_thread);
  fills = std::min<std::int64_t>(fills, caps.sm_count - 1);
  pl.chunk = static_cast<int>(ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, fills), 4) * 4);
  pl.grid = static_cast<int>(ceil_div<std::int64_t>(rows, pl.chunk)) + 1;
  pl.threads = threads;
  return pl;
}

inline const char* relay_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.numel > kRelayMaxNumel) return "needs numel <= 4096 (4 slots per thread of one block)";
  if (!caps.present()) return nullptr;  // the rest depends on the device
  if (!caps.cooperative) return "needs cooperative launch support";
  if (caps.sm_count < 2) return "needs 2 SMs";
  if (!fits_smem(caps, expert_table_block_smem(p.num_experts)))
    return "needs 4(E+1)+256 bytes of shared memory per block";
  return nullptr;
}

template <class IdT>
inline cudaError_t launch_relay(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl, const RelayPlan& pl) {
  const Args a = make_args(p, bufs);
  unsigned* ws = static_cast<unsigned*>(bufs.workspace);
  const std::size_t smem = expert_table_smem(p.num_experts);
  const auto go = [&](auto kernel) {
    return prim::launch_cooperative(kernel, pl.grid, pl.threads, smem, s, pdl, a, ws, pl.chunk);
  };
  switch (pl.threads) {
    case 128: return go(relay_kernel<IdT, 128>);
    case 256: return go(relay_kernel<IdT, 256>);
    case 512: return go(relay_kernel<IdT, 512>);
    default: return go(relay_kernel<IdT, 1024>);
  }
}

template <class IdT>
inline cudaError_t launch_relay(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  return launch_relay<IdT>(p, bufs, s, pdl, relay_plan(p, device_caps()));
}

}  // namespace moekit::align::detail
