// Variant `onepass` (mid-sized and large inputs): ONE launch of up to a
// full wave of blocks that all count, ONE grid barrier, unstable rows.
//
// `twopass` pays two launches and a G x E table read by every block; `tiny`
// makes every block rank every slot. Here each slot is loaded once, by one
// thread, and stays in registers with its rank:
//
//   1. every block issues its 16-byte id loads, fills its 1/G share of
//      sorted_token_ids with the padding value while they are in flight, and
//      ranks its slots with shared atomics on one counter row of E;
//   2. one global atomicAdd per (block, expert present in the block) on the
//      workspace counters both sums the counts and hands the block its offset
//      inside the expert (the order between blocks is the atomics' order,
//      hence unstable);
//   3. grid barrier (one counter in the workspace; the grid is sized and
//      launched cooperatively so that every block is resident);
//   4. every block reads the E totals, scans them, writes its slots at
//      start[e] + offset[e] + rank and its 1/G share of expert_ids. The
//      barrier orders every block's padding fill before any slot write.
//
// The workspace (counters + barrier) must be all zero before the first
// launch and every launch leaves it all zero again: the last block to leave
// (a second counter) clears it. So one memset at allocation serves any number
// of launches, graph replays included, and no launch needs a memset node.
// With a dirty workspace the output is wrong but no write leaves the output
// arrays and no barrier waits forever (the counter only grows).
// Comments here keep µs figures: 4 lines (why alternative designs lost; not thresholds).
#pragma once

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

// Workspace: [0] arrivals, [1] departures, then (from int 32, its own cache
// line) the E global counters.
constexpr int kOnePassHeader = 32;

// cs[0, E) := exclusive scan of the padded totals C[0, E) (read from L2),
// cs[E] := their sum, which is returned. Each warp owns a contiguous,
// 32-aligned range of experts and walks it lane by lane: no shared-memory bank
// conflicts for any E (a contiguous chunk per thread, as block_exclusive_scan
// does, is 16-way conflicted at E = 16384 with 1024 threads) and 4 L2 loads in
// flight per lane. 2 barriers, the last one at the end.
__device__ __forceinline__ int onepass_scan(const int* C, int* cs, int E, int B, int* warp_sums) {
  const int t = threadIdx.x, nt = blockDim.x;
  const int lane = t & (kWarp - 1), w = t / kWarp, nw = nt / kWarp;
  const int per = (E + nw * kWarp - 1) / (nw * kWarp) * kWarp;
  const int lo = min(w * per, E), hi = min(lo + per, E);
  int sum = 0;
#pragma unroll 1
  for (int base = lo; base < hi; base += 4 * kWarp) {
    int v[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int e = base + k * kWarp + lane;
      v[k] = e < hi ? __ldcg(C + e) : 0;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int e = base + k * kWarp + lane;
      v[k] = padded(v[k], B);
      if (e < hi) cs[e] = v[k];
      sum += v[k];
    }
  }
  sum = __reduce_add_sync(kFullMask, sum);
  if (lane == 0) warp_sums[w] = sum;
  __syncthreads();
  if (w == 0) {
    const int v = lane < nw ? warp_sums[lane] : 0;
    const int inc = warp_inclusive_scan(v);
    if (lane < nw) warp_sums[lane] = inc - v;
    if (lane == kWarp - 1) warp_sums[kWarp] = inc;
  }
  __syncthreads();
  int run = warp_sums[w];
#pragma unroll 1
  for (int base = lo; base < hi; base += kWarp) {
    const int e = base + lane;
    const int v = e < hi ? cs[e] : 0;
    const int inc = warp_inclusive_scan(v);
    if (e < hi) cs[e] = run + inc - v;
    run += __shfl_sync(kFullMask, inc, kWarp - 1);
  }
  const int total = warp_sums[kWarp];
  if (t == 0) cs[E] = total;
  __syncthreads();
  return total;
}

// Dynamic shared memory: 2E + 1 ints (offsets, then the scan).
template <class IdT, int K>
__global__ void __launch_bounds__(1024)
    onepass_kernel(Args a, unsigned* __restrict__ ws, int chunk) {
  extern __shared__ int sm[];
  __shared__ int warp_sums[kWarp + 1];
  __shared__ int s_last;
  constexpr int V = kVec<IdT>;
  const int E = a.num_experts;
  int* off = sm;       // per expert: count in this block, then its offset
  int* cs = sm + E;    // E + 1: padded totals, scanned
  const int t = threadIdx.x, nt = blockDim.x;
  const int b = blockIdx.x, G = gridDim.x;
  int* C = reinterpret_cast<int*>(ws + kOnePassHeader);
  // The ids, and the workspace the previous launch's last block clears.
  prim::pdl_wait();
  prim::pdl_launch_dependents();

  // 1. loads (coalesced per k), padding share, ranks.
  const bool aligned = ids_aligned16(a);
  const std::int64_t first = (static_cast<std::int64_t>(b) * K * nt + t) * V;
  int ev[K][V];
  load_experts<IdT>(a, first, static_cast<std::int64_t>(nt) * V, aligned, ev);
  for (int e = t; e < E; e += nt) off[e] = 0;
  // Unsigned: b * chunk may pass 2^31 by up to 4G rows when max_padded nears
  // it, never 2^32 (64-bit math here cost 0.05 µs at E = 8, 4096 tokens).
  const unsigned mp = static_cast<unsigned>(a.max_padded);
  const unsigned r0 = min(static_cast<unsigned>(b) * static_cast<unsigned>(chunk), mp);
  fill_range(a.sorted, r0, min(r0 + static_cast<unsigned>(chunk), mp), a.numel, t, nt);
  __syncthreads();
  int rk[K][V];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int v = 0; v < V; ++v) rk[k][v] = ev[k][v] >= 0 ? atomicAdd(off + ev[k][v], 1) : 0;
  __syncthreads();

  // 2. offsets inside each expert from the global counters.
  for (int e = t; e < E; e += nt) {
    const int c = off[e];
    if (c != 0) off[e] = atomicAdd(C + e, c);
  }
  __syncthreads();

  // 3. grid barrier: the bar.sync above orders the block's stores and atomics
  // before thread 0's fence; its acquire load and the bar.sync below order
  // everything after it.
  if (t == 0) {
    __threadfence();
    atomicAdd(ws, 1u);
    while (prim::ld_acquire_gpu(ws) < static_cast<unsigned>(G)) {
    }
  }
  __syncthreads();

  // 4. layout, slots, expert_ids, clean-up.
  // Up to one expert per thread the plain scan is cheaper (E = 256, 4096
  // tokens x 8: 6.0 vs 6.4 µs); beyond, onepass_scan (E = 16384: 22 vs 32 µs).
  int total;
  if (E <= nt) {
    if (t < E) cs[t] = padded(__ldcg(C + t), a.block_size);
    __syncthreads();
    total = block_exclusive_scan(cs, E, warp_sums);  // ends with a barrier
  } else {
    total = onepass_scan(C, cs, E, a.block_size, warp_sums);  // ends with a barrier
  }
  // Every thread of this block has read C (before the scan's barriers).
  if (t == 0) s_last = atomicAdd(ws + 1, 1u) == static_cast<unsigned>(G - 1);
  if (b == 0 && t == 0) *a.total = total;
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int e = ev[k][v];
      if (e < 0) continue;
      const int pos = cs[e] + off[e] + rk[k][v];
      if (static_cast<unsigned>(pos) < static_cast<unsigned>(a.max_padded))
        a.sorted[pos] = static_cast<int>(first + static_cast<std::int64_t>(k) * nt * V + v);
    }
  const std::int64_t jchunk = (static_cast<std::int64_t>(a.max_blocks) + G - 1) / G;
  write_expert_ids(a, cs, jchunk * b, jchunk * (b + 1), t, nt);
  __syncthreads();
  if (s_last) {  // every block has read C and passed the barrier
    for (int e = t; e < E; e += nt) C[e] = 0;
    if (t == 0) ws[0] = ws[1] = 0;
  }
}

struct OnePassPlan {
  int loads = 0;  // K: 16-byte id loads per thread (0: not applicable)
  int threads = 0;
  int grid = 0;
  int chunk = 0;  // rows of sorted_token_ids each block pads
  std::size_t smem = 0;
};

inline std::size_t onepass_smem(int num_experts) {
  return sizeof(int) * (2 * static_cast<std::size_t>(num_experts) + 1);
}

// The plan of `grid` blocks of `threads` with `loads` loads per thread (the
// caller checked that they hold every slot and fit one wave).
inline OnePassPlan onepass_plan_of(const Problem& p, int threads, int loads, std::int64_t grid) {
  OnePassPlan pl;
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  pl.smem = onepass_smem(p.num_experts);
  pl.loads = loads;
  pl.threads = threads;
  pl.grid = static_cast<int>(grid);
  pl.chunk = static_cast<int>(ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, grid), 4) * 4);
  return pl;
}

// Launch shape, fitted to the H100 sweep `probe_align onepass` (threads
// 128-1024 x loads 1/2/4 x grid, E 8..1024, 16..65536 tokens;
// docs/bench/align.md):
//  - one 16-byte load per thread: a second or fourth load per thread always
//    lost (each adds a serial round of shared atomics and registers), so the
//    block grows before the loads do;
//  - at most one block per SM, which also makes residency certain without an
//    occupancy query (one block of <= 1024 threads always fits);
//  - 256 threads, 512 where each block's E-wide passes weigh more (E >= 1024,
//    or E >= 256 past 65536 slots: E = 512, 16384 tokens x 8, 7.9 vs 8.6 us),
//    1024 for E >= 4096 (E = 16384, 4096 tokens x 8: 32.5 vs 50.8 us);
//  - at least one block per 8 padding rows per thread (large E, few slots).
template <class IdT>
inline OnePassPlan onepass_plan(const Problem& p, const DeviceCaps& caps) {
  OnePassPlan pl;
  const int E = p.num_experts;
  pl.smem = onepass_smem(E);
  if (pl.smem > caps.smem_optin) return pl;
  const std::int64_t n = std::max<std::int64_t>(p.numel, 1);
  const Policy& pol = policy_for(caps);
  const std::int64_t sms = std::int64_t{pol.onepass_blocks_per_sm} * caps.sm_count;
  const int t0 = E >= 4096 ? 1024 : E >= 1024 || (E >= 256 && p.numel > 65536) ? 512 : 256;
  constexpr int V = kVec<IdT>;
  for (int loads : {1, 2, 4}) {
    for (int threads : {128, 256, 512, 1024}) {
      if (threads < t0) continue;
      const std::int64_t need =
          ceil_div<std::int64_t>(n, static_cast<std::int64_t>(threads) * loads * V);
      if (need > sms) continue;
      const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
      const std::int64_t pad =
          std::min(ceil_div<std::int64_t>(rows, std::int64_t{threads} * pol.onepass_pad_rows_per_thread), sms);
      return onepass_plan_of(p, threads, loads, std::max(need, pad));
    }
  }
  return pl;
}

inline std::size_t onepass_workspace(const Problem& p) {
  return sizeof(int) * (kOnePassHeader + static_cast<std::size_t>(p.num_experts));
}

template <class IdT>
inline const char* onepass_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (!caps.present()) return nullptr;  // every limit depends on the device
  if (!caps.cooperative) return "needs cooperative launch support";
  if (onepass_smem(p.num_experts) > caps.smem_optin)
    return "needs 8*E+4 bytes of shared memory per block (`moekit variants align`: E limit here)";
  if (onepass_plan<IdT>(p, caps).loads == 0)
    return "needs numel <= 4 16-byte loads x 1024 threads x SMs (one wave of blocks)";
  return nullptr;
}

template <class IdT>
inline cudaError_t launch_onepass(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl,
                                  const OnePassPlan& pl) {
  const Args a = make_args(p, bufs);
  unsigned* ws = static_cast<unsigned*>(bufs.workspace);
  const auto go = [&](auto kernel) {
    return prim::launch_cooperative(kernel, pl.grid, pl.threads, pl.smem, s, pdl, a, ws, pl.chunk);
  };
  switch (pl.loads) {
    case 1: return go(onepass_kernel<IdT, 1>);
    case 2: return go(onepass_kernel<IdT, 2>);
    default: return go(onepass_kernel<IdT, 4>);
  }
}

template <class IdT>
inline cudaError_t launch_onepass(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  return launch_onepass<IdT>(p, bufs, s, pdl, onepass_plan<IdT>(p, device_caps()));
}

}  // namespace moekit::align::detail
