// Variant `twopass` (large inputs): two kernels chained by programmatic
// dependent launch (PDL), no atomics in global memory, no workspace clearing,
// stable rows (identical to the CPU reference).
//
//   count  (G blocks): each warp histograms its contiguous sub-tile into its
//          own shared row (shared atomics; 16-byte id loads, 4 in flight per
//          lane); the block's totals go to H[block][e]. It lets the next
//          kernel launch at once (once its own grid dependency is met: with
//          the launch's pdl `count` itself overlaps the previous kernel, and
//          waits for it before touching the ids or H).
//   place  (G blocks, launched early through PDL whatever the launch's pdl
//          says): recomputes the same rows for its tile WHILE `count` still
//          runs (safe: `count` triggers only after its own wait, so whatever
//          wrote the ids has completed; primitives/pdl.cuh), then waits for it
//          (griddepcontrol.wait), reads the whole G x E table (G is capped so
//          that this stays small) into per-expert totals and "before me" sums,
//          scans the E padded totals, writes its share of padding rows, tail
//          and expert_ids, and places its slots in slot order.
//
// Blocks agree on offsets through that table: block b's rows of expert e start
// at cumsum[e] + sum over blocks k < b of H[k][e], plus the warp prefix.
// `stable` uses it above 8192 slots for E < 4096 (where onepass does not
// apply, so does `auto`).
// Comments here keep µs figures: 1 line (why alternative designs lost; not thresholds).
#pragma once

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/warp_rows.cuh"
#include "primitives/launch.cuh"
#include "primitives/pdl.cuh"

namespace moekit::align::detail {

constexpr std::size_t kTwoPassRowBudget = 96 * 1024;  // bytes of per-warp rows
constexpr std::int64_t kTwoPassTableInts = 32768;     // cap on G x E read by each block

using prim::pdl_launch_dependents;

// Dynamic shared memory: rows x E (+ for `place`: 2E + 1).
template <class IdT, bool kPlace>
__global__ void __launch_bounds__(1024)
    twopass_kernel(Args a, int* __restrict__ H, int rows, std::int64_t tile,
                   std::int64_t subtile) {
  if constexpr (!kPlace) {
    prim::pdl_wait();        // the ids, and H the previous launch's `place` may still read
    pdl_launch_dependents();  // `place` may start its own counting now
  }
  extern __shared__ int sm[];
  const int E = a.num_experts;
  int* rowmem = sm;
  __shared__ int warp_sums[kWarp + 1];
  const int t = threadIdx.x, nt = blockDim.x;
  const int w = t / kWarp;
  const int b = blockIdx.x, G = gridDim.x;
  const std::int64_t n = a.numel;
  const std::int64_t blo = std::min<std::int64_t>(b * tile, n);
  const std::int64_t bhi = std::min<std::int64_t>(blo + tile, n);
  const std::int64_t wlo = std::min<std::int64_t>(blo + w * subtile, bhi);
  const std::int64_t whi = std::min<std::int64_t>(wlo + subtile, bhi);
  const bool aligned = ids_aligned16(a);
  int* row = rowmem + w * E;       // only for w < rows
  int* tot = rowmem + rows * E;    // place only: slots per expert, all blocks
  int* scan = tot + E;             //             E + 1: "before me", then starts

  for (int i = t; i < rows * E; i += nt) rowmem[i] = 0;
  if constexpr (kPlace)
    for (int e = t; e < E; e += nt) tot[e] = scan[e] = 0;
  __syncthreads();
  if (w < rows) count_slots<IdT>(a, wlo, whi, aligned, row);
  __syncthreads();
  if constexpr (!kPlace) {
    for (int e = t; e < E; e += nt) {
      int v[8], sum = 0;  // 8 loads in flight, not one latency per row
#pragma unroll 1
      for (int r0 = 0; r0 < rows; r0 += 8) {
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = r0 + k < rows ? rowmem[(r0 + k) * E + e] : 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) sum += v[k];
      }
      H[static_cast<std::int64_t>(b) * E + e] = sum;
    }
    return;
  } else {
    prim::pdl_wait();  // `count` has finished and its H is visible
    pdl_launch_dependents();
    const int GE = G * E;
    for (int i = t; i < GE; i += nt) {
      const int k = i / E, e = i - k * E;
      const int v = __ldcg(H + i);
      if (v != 0) {
        atomicAdd(tot + e, v);
        if (k < b) atomicAdd(scan + e, v);
      }
    }
    __syncthreads();
    // Rows := slots of e in blocks before me + warp prefix (one pass, after
    // the wait: it needs `before`); scan := padded totals.
    for (int e = t; e < E; e += nt) {
      rows_exclusive_prefix(rowmem, rows, E, e, scan[e]);
      scan[e] = padded(tot[e], a.block_size);
    }
    __syncthreads();
    const int total = block_exclusive_scan(scan, E, warp_sums);
    if (b == 0 && t == 0) *a.total = total;
    write_share(a, scan, b, G, [&](int e) { return tot[e]; });  // no row is a slot row
    if (w < rows) place_slots<IdT>(a, wlo, whi, row, scan, expert_bits(E));
  }
}

struct TwoPassPlan {
  int rows = 0;  // warps with a private counter row (0: not applicable)
  int threads = 0;
  int grid = 0;
  std::int64_t tile = 0, subtile = 0;
  std::size_t smem_count = 0, smem_place = 0;
};

inline int twopass_rows(int num_experts) {
  const std::size_t r = kTwoPassRowBudget / (sizeof(int) * static_cast<std::size_t>(num_experts));
  return static_cast<int>(std::min<std::size_t>(r, 32));
}

inline int twopass_threads(int rows) { return std::max(256, rows * kWarp); }

// The plan of `grid` blocks with `rows` counting warps (1 <= rows <=
// twopass_rows(E)).
template <class IdT>
inline TwoPassPlan twopass_plan_of(const Problem& p, int rows, int grid) {
  TwoPassPlan pl;
  const int E = p.num_experts;
  pl.rows = rows;
  pl.threads = twopass_threads(rows);
  pl.smem_count = sizeof(int) * static_cast<std::size_t>(rows) * E;
  pl.smem_place = pl.smem_count + sizeof(int) * (2 * static_cast<std::size_t>(E) + 1);
  pl.grid = grid;
  const RowTiles rt = row_tiles<IdT>(p.numel, pl.grid, pl.rows);
  pl.tile = rt.tile;
  pl.subtile = rt.subtile;
  return pl;
}

// Launch shape, fitted to the H100 sweep `probe_align twopass` (grid 4-128 x
// counting warps 8/16/32 per shape, docs/bench/align.md):
//  - counting warps (rows): every warp of a block pays the kernels' per-thread
//    preamble and loops over E, so fewer are better until the slots per warp
//    grow: 8 for E <= 16, or E <= 64 up to 8192 slots; 16 for E <= 64 or up
//    to 8192 slots; 32 otherwise (256, 512 or 1024 threads);
//  - grid: ~4 slots per lane (2 for E >= 256 up to 32768 slots, where the
//    G x E table each `place` block reads is the larger cost) and at most 16
//    padding rows per thread (large E, few slots), at most 128
//    blocks for E <= 64 and 64 beyond, and G x E <= 32768 table entries.
// Before this fit (32 warps, grid from 4 slots per thread) every shape was
// 0-4.6 µs slower (E = 8, 16384 tokens: 9.41 -> 6.73 µs).
template <class IdT>
inline TwoPassPlan twopass_plan(const Problem& p, const DeviceCaps& caps) {
  const Policy& pol = policy_for(caps);
  const int E = p.num_experts;
  int rows = twopass_rows(E);
  if (rows < 1) return TwoPassPlan{};
  const bool small = p.numel <= 8192;
  rows = std::min(rows, E <= 16 || (E <= 64 && small) ? 8 : E <= 64 || small ? 16 : 32);
  const std::int64_t gmax =
      std::min<std::int64_t>(E <= 64 ? pol.twopass_max_grid_few_experts : pol.twopass_max_grid,
                             std::max<std::int64_t>(1, kTwoPassTableInts / E));
  const int per_lane = E >= 256 && p.numel <= 32768 ? 2 : 4;
  const std::int64_t want =
      std::max(ceil_div<std::int64_t>(p.numel, rows * kWarp * per_lane),
               ceil_div<std::int64_t>(p.max_num_tokens_padded, twopass_threads(rows) * 16LL));  // padding rows
  return twopass_plan_of<IdT>(p, rows, static_cast<int>(std::clamp<std::int64_t>(want, 1, gmax)));
}

template <class IdT>
inline std::size_t twopass_workspace(const Problem& p, const DeviceCaps& caps) {
  const TwoPassPlan pl = twopass_plan<IdT>(p, caps);
  return sizeof(int) * static_cast<std::size_t>(pl.grid) * p.num_experts;
}

inline const char* twopass_not_applicable(const Problem& p, const DeviceCaps& caps) {
  const int rows = twopass_rows(p.num_experts);
  if (rows < 1 ||
      !fits_smem(caps, sizeof(int) * (static_cast<std::size_t>(rows + 2) * p.num_experts + 1)))
    return "needs 12*E+4 bytes of shared memory per block (`moekit variants align`: E limit here)";
  return nullptr;
}

template <class IdT>
inline cudaError_t launch_twopass(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl,
                                  const TwoPassPlan& pl) {
  const Args a = make_args(p, bufs);
  int* H = static_cast<int*>(bufs.workspace);
  if (const cudaError_t e = prim::opt_in_smem(twopass_kernel<IdT, false>, pl.smem_count); e != cudaSuccess)
    return e;
  if (const cudaError_t e = prim::opt_in_smem(twopass_kernel<IdT, true>, pl.smem_place); e != cudaSuccess)
    return e;
  if (const cudaError_t e = prim::launch_ex(twopass_kernel<IdT, false>, dim3(pl.grid), dim3(pl.threads),
                                            pl.smem_count, s, prim::pdl_attrs(pdl), a, H, pl.rows, pl.tile, pl.subtile);
      e != cudaSuccess)
    return e;
  return prim::launch_ex(twopass_kernel<IdT, true>, dim3(pl.grid), dim3(pl.threads), pl.smem_place, s,
                         prim::LaunchAttrs{true, false}, a, H, pl.rows, pl.tile, pl.subtile);
}

template <class IdT>
inline cudaError_t launch_twopass(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  return launch_twopass<IdT>(p, bufs, s, pdl, twopass_plan<IdT>(p, device_caps()));
}

}  // namespace moekit::align::detail
