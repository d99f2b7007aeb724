// Variant `persistent` (large inputs): ONE cooperative launch of as many
// blocks as the input needs (at most what fits on the GPU at once), all of
// them counting. Blocks agree on offsets through two grid-wide barriers and a
// deterministic blocks x experts table instead of atomics, so the output is
// stable (identical to the CPU reference) and no workspace needs clearing:
//
//   1. each warp histograms its contiguous sub-tile into its own shared row
//      (shared atomics, 16-byte id loads); rows are prefix-summed across warps and the block's
//      totals go to H[block][e].                             -- grid barrier
//   2. one warp per expert scans its column of H over the blocks (in place,
//      exclusive) and writes the expert's total.             -- grid barrier
//   3. every block scans the E padded totals itself (cheap: E ints from L2),
//      turns its rows into absolute cursors, writes its share of padding rows,
//      tail and expert_ids, and re-reads its sub-tiles to place the slots in
//      slot order (ranks recomputed, never stored).
//
// `stable` takes it where twopass does not apply, and from E >=
// policy.huge_experts on once oneshot does not (stable_choice in registry.cu):
// there twopass's G x E table cap leaves it a few blocks (docs/align.md).
#pragma once

#include <cooperative_groups.h>

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/warp_rows.cuh"

namespace moekit::align::detail {

constexpr int kPersistentMaxGrid = 256;  // phase 2 keeps 8 column values per lane
constexpr int kPersistentColumnRegs = kPersistentMaxGrid / kWarp;
constexpr std::size_t kPersistentRowBudget = 96 * 1024;  // bytes of per-warp rows

// Dynamic shared memory: rows x E (per-warp counters, then cursors) + E + 1.
template <class IdT>
__global__ void __launch_bounds__(1024)
    persistent_kernel(Args a, int* __restrict__ H, int* __restrict__ tot, int rows,
                      std::int64_t tile, std::int64_t subtile) {
  extern __shared__ int sm[];
  const int E = a.num_experts;
  int* rowmem = sm;
  int* cs = sm + rows * E;
  __shared__ int warp_sums[kWarp + 1];
  const int t = threadIdx.x, nt = blockDim.x;
  const int lane = t & (kWarp - 1), w = t / kWarp, nw = nt / kWarp;
  const int b = blockIdx.x, G = gridDim.x;
  constexpr int V = kVec<IdT>;
  const bool aligned = ids_aligned16(a);
  const std::int64_t n = a.numel;
  const std::int64_t blo = std::min<std::int64_t>(b * tile, n);
  const std::int64_t bhi = std::min<std::int64_t>(blo + tile, n);
  const std::int64_t wlo = std::min<std::int64_t>(blo + w * subtile, bhi);
  const std::int64_t whi = std::min<std::int64_t>(wlo + subtile, bhi);
  int* row = rowmem + w * E;  // only for w < rows

  // ---- 1. per-warp histograms ------------------------------------------------
  for (int i = t; i < rows * E; i += nt) rowmem[i] = 0;
  prim::pdl_wait();  // the ids, and H / tot the previous launch may still read
  prim::pdl_launch_dependents();
  __syncthreads();
  if (w < rows) {
    for (std::int64_t base = wlo; base < whi; base += kWarp * V) {
      int ev[V];
      load_experts<IdT>(a, base + lane * V, aligned, ev);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int e = base + lane * V + k < whi ? ev[k] : -1;
        if (e >= 0) atomicAdd(row + e, 1);
      }
    }
  }
  __syncthreads();
  for (int e = t; e < E; e += nt) {
    int run = 0;
    for (int r = 0; r < rows; ++r) {
      const int v = rowmem[r * E + e];
      rowmem[r * E + e] = run;
      run += v;
    }
    H[static_cast<std::int64_t>(b) * E + e] = run;
  }
  // Data written by other blocks is read with __ldcg (L2, never a stale L1 line).
  cooperative_groups::this_grid().sync();

  // ---- 2. column scans over the blocks ----------------------------------------
  for (int e = b * nw + w; e < E; e += G * nw) {
    int v[kPersistentColumnRegs];
#pragma unroll
    for (int j = 0; j < kPersistentColumnRegs; ++j) {  // all loads in flight at once
      const int k = j * kWarp + lane;
      v[j] = k < G ? __ldcg(H + static_cast<std::int64_t>(k) * E + e) : 0;
    }
    int carry = 0;
#pragma unroll
    for (int j = 0; j < kPersistentColumnRegs; ++j) {
      if (j * kWarp >= G) break;
      const int inc = warp_inclusive_scan(v[j]);
      const int k = j * kWarp + lane;
      if (k < G) H[static_cast<std::int64_t>(k) * E + e] = carry + inc - v[j];
      carry += __shfl_sync(kFullMask, inc, kWarp - 1);
    }
    if (lane == 0) tot[e] = carry;
  }
  cooperative_groups::this_grid().sync();

  // ---- 3. layout, non-slot rows, slots ----------------------------------------
  for (int e = t; e < E; e += nt) cs[e] = padded(__ldcg(tot + e), a.block_size);
  __syncthreads();
  const int total = block_exclusive_scan(cs, E, warp_sums);
  if (b == 0 && t == 0) *a.total = total;
  for (int e = t; e < E; e += nt) {
    const int start = cs[e] + __ldcg(H + static_cast<std::int64_t>(b) * E + e);
    for (int r = 0; r < rows; ++r) rowmem[r * E + e] += start;
  }
  write_share(a, cs, b, G, [&](int e) { return __ldcg(tot + e); });
  __syncthreads();
  if (w >= rows) return;
  for (std::int64_t base = wlo; base < whi; base += kWarp * V) {
    int ev[V];
    load_experts<IdT>(a, base + lane * V, aligned, ev);
#pragma unroll
    for (int r = 0; r < V; ++r) {
      // Transpose so that lane order is slot order: slot base + 32r + lane sits
      // in lane (32r + lane) / V, component (32r + lane) % V.
      const int src = (kWarp * r + lane) / V, comp = (kWarp * r + lane) % V;
      int e = -1;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int x = __shfl_sync(kFullMask, ev[k], src);
        if (k == comp) e = x;
      }
      const std::int64_t slot = base + kWarp * r + lane;
      if (slot >= whi) e = -1;
      const unsigned peers = warp_peers(e, expert_bits(E));
      const int pos = e >= 0 ? row[e] + __popc(peers & lanemask_lt(threadIdx.x & (kWarp - 1))) : 0;
      __syncwarp();
      if (e >= 0 && lane == __ffs(peers) - 1) row[e] += __popc(peers);
      __syncwarp();
      if (e >= 0 && pos < a.max_padded) a.sorted[pos] = static_cast<int>(slot);
    }
  }
}

struct PersistentPlan {
  int rows = 0;       // warps with a private counter row (0: not applicable)
  int threads = 0;
  int grid = 0;
  std::int64_t tile = 0, subtile = 0;
  std::size_t smem = 0;
  cudaError_t status = cudaSuccess;  // of the occupancy query
};

inline int persistent_rows(int num_experts) {
  const std::size_t r = kPersistentRowBudget / (sizeof(int) * static_cast<std::size_t>(num_experts));
  return static_cast<int>(std::min<std::size_t>(r, 32));
}

inline std::size_t persistent_smem(int rows, int num_experts) {
  return sizeof(int) * (static_cast<std::size_t>(rows + 1) * num_experts + 1);
}

// Grid: ~4 slots per thread and ~16 padding rows per thread, capped by what is
// co-resident (cooperative launch) and by phase 2's column registers.
template <class IdT>
inline PersistentPlan persistent_plan(const Problem& p, const DeviceCaps& caps) {
  PersistentPlan pl;
  pl.rows = persistent_rows(p.num_experts);
  if (pl.rows < 1) return pl;
  pl.threads = std::max(256, pl.rows * kWarp);
  pl.smem = persistent_smem(pl.rows, p.num_experts);
  if (!fits_smem(caps, pl.smem)) {
    pl.rows = 0;
    return pl;
  }
  // Without a device only the workspace size is asked for: one block per SM
  // of an unknown count is as good a guess as any.
  int per_sm = 1;
  if (caps.present()) pl.status = blocks_per_sm(persistent_kernel<IdT>, pl.threads, pl.smem, &per_sm);
  const std::int64_t resident = per_sm * static_cast<std::int64_t>(std::max(caps.sm_count, 1));
  const std::int64_t want = std::max<std::int64_t>(
      {1, ceil_div<std::int64_t>(p.numel, pl.threads * 4LL),
       ceil_div<std::int64_t>(p.max_num_tokens_padded, pl.threads * 16LL)});
  pl.grid = static_cast<int>(std::min<std::int64_t>({want, resident, kPersistentMaxGrid}));
  const RowTiles rt = row_tiles<IdT>(p.numel, pl.grid, pl.rows);
  pl.tile = rt.tile;
  pl.subtile = rt.subtile;
  return pl;
}

template <class IdT>
inline std::size_t persistent_workspace(const Problem& p, const DeviceCaps& caps) {
  const PersistentPlan pl = persistent_plan<IdT>(p, caps);
  if (pl.rows < 1) return 0;
  return sizeof(int) * (static_cast<std::size_t>(pl.grid) + 1) * p.num_experts;
}

inline const char* persistent_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (!can_cooperate(caps)) return "needs cooperative launch support";
  const int rows = persistent_rows(p.num_experts);
  if (rows < 1 || !fits_smem(caps, persistent_smem(rows, p.num_experts)))
    return "needs E <= 24576 (a shared counter row per warp)";
  return nullptr;
}

template <class IdT>
inline cudaError_t launch_persistent(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  Args a = make_args(p, bufs);
  const PersistentPlan pl = persistent_plan<IdT>(p, device_caps());
  if (pl.status != cudaSuccess) return pl.status;
  int* H = static_cast<int*>(bufs.workspace);
  int* tot = H + static_cast<std::size_t>(pl.grid) * p.num_experts;
  return prim::launch_cooperative(persistent_kernel<IdT>, pl.grid, pl.threads, pl.smem, s, pdl, a, H, tot,
                                  pl.rows, pl.tile, pl.subtile);
}

}  // namespace moekit::align::detail
