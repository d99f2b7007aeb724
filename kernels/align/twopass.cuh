// Variant `twopass` (ours, large inputs): two kernels chained by programmatic
// dependent launch (PDL), no atomics in global memory, no workspace clearing,
// stable rows (identical to the CPU reference).
//
//   count  (G blocks): each warp histograms its contiguous sub-tile into its
//          own shared row (shared atomics; 16-byte id loads, 4 in flight per
//          lane); the block's totals go to H[block][e]. It lets the next
//          kernel launch at once.
//   place  (G blocks, launched early through PDL): recomputes the same rows
//          for its tile WHILE `count` still runs (keeping the loaded experts
//          in registers), then waits for it
//          (griddepcontrol.wait), reads the whole G x E table (G is capped so
//          that this stays small) into per-expert totals and "before me" sums,
//          scans the E padded totals, writes its share of padding rows, tail
//          and expert_ids, and places its slots in slot order.
//
// Blocks agree on offsets through that table: block b's rows of expert e start
// at cumsum[e] + sum over blocks k < b of H[k][e], plus the warp prefix.
// `stable` and `auto` use it above 32768 slots when E < 512.
#pragma once

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"

namespace moekit::align::detail {

constexpr int kTwoPassUnroll = 4;
constexpr std::size_t kTwoPassRowBudget = 96 * 1024;  // bytes of per-warp rows
constexpr std::int64_t kTwoPassTableInts = 32768;     // cap on G x E read by each block

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait_primary() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class IdT>
using Group = int[kTwoPassUnroll][kVec<IdT>];

// Experts of slots base .. base + U*32*V - 1 of this warp: U independent
// 16-byte loads per lane, all in flight together.
template <class IdT>
__device__ __forceinline__ void load_group(const Args& a, std::int64_t base, bool aligned,
                                           Group<IdT>& ev) {
  const int lane = threadIdx.x & (kWarp - 1);
#pragma unroll
  for (int u = 0; u < kTwoPassUnroll; ++u)
    load_experts<IdT>(a, base + (u * kWarp + lane) * kVec<IdT>, aligned, ev[u]);
}

// Adds the group's slots below whi to this warp's row (order does not matter
// for counting: plain shared atomics on a row only this warp touches).
template <class IdT>
__device__ __forceinline__ void count_group(const Group<IdT>& ev, std::int64_t base,
                                            std::int64_t whi, int* row) {
  constexpr int V = kVec<IdT>;
  const int lane = threadIdx.x & (kWarp - 1);
#pragma unroll
  for (int u = 0; u < kTwoPassUnroll; ++u) {
    if (base + u * kWarp * V >= whi) break;  // warp-uniform: past the sub-tile
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int e = ev[u][k];
      if (e >= 0 && base + (u * kWarp + lane) * V + k < whi) atomicAdd(row + e, 1);
    }
  }
}

// Places the group's slots below whi in slot order: row[e] is the warp's next
// row of expert e. Lane order must equal slot order, so each 16-byte load is
// transposed with shuffles: slot base + u*32V + 32r + lane sits in lane
// (32r + lane) / V, component (32r + lane) % V of load u.
template <class IdT>
__device__ __forceinline__ void place_group(const Args& a, const Group<IdT>& ev,
                                            std::int64_t base, std::int64_t whi, int* row,
                                            int nbits) {
  constexpr int V = kVec<IdT>;
  const int lane = threadIdx.x & (kWarp - 1);
#pragma unroll
  for (int u = 0; u < kTwoPassUnroll; ++u) {
    if (base + u * kWarp * V >= whi) break;  // warp-uniform
#pragma unroll
    for (int r = 0; r < V; ++r) {
      const int src = (kWarp * r + lane) / V, comp = (kWarp * r + lane) % V;
      int e = -1;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int x = __shfl_sync(kFullMask, ev[u][k], src);
        if (k == comp) e = x;
      }
      const std::int64_t slot = base + (u * V + r) * kWarp + lane;
      if (slot >= whi) e = -1;
      const unsigned peers = warp_peers(e, nbits);
      const int pos = e >= 0 ? row[e] + __popc(peers & lanemask_lt()) : 0;
      __syncwarp();
      if (e >= 0 && lane == __ffs(peers) - 1) row[e] += __popc(peers);
      __syncwarp();
      if (e >= 0 && pos < a.max_padded) a.sorted[pos] = static_cast<int>(slot);
    }
  }
}

// Dynamic shared memory: rows x E (+ for `place`: 2E + 1).
template <class IdT, bool kPlace>
__global__ void __launch_bounds__(1024)
    twopass_kernel(Args a, int* __restrict__ H, int rows, std::int64_t tile,
                   std::int64_t subtile) {
  if constexpr (!kPlace) pdl_launch_dependents();  // `place` may start its own counting now
  extern __shared__ int sm[];
  const int E = a.num_experts;
  int* rowmem = sm;
  __shared__ int warp_sums[kWarp + 1];
  const int t = threadIdx.x, nt = blockDim.x;
  const int w = t / kWarp;
  const int b = blockIdx.x, G = gridDim.x;
  constexpr int V = kVec<IdT>, U = kTwoPassUnroll;
  const std::int64_t n = a.numel;
  const std::int64_t blo = std::min<std::int64_t>(b * tile, n);
  const std::int64_t bhi = std::min<std::int64_t>(blo + tile, n);
  const std::int64_t wlo = std::min<std::int64_t>(blo + w * subtile, bhi);
  const std::int64_t whi = std::min<std::int64_t>(wlo + subtile, bhi);
  const bool aligned = ids_aligned16(a);
  // The common case: the whole sub-tile is one group, kept in registers from
  // counting to placing (no second read of the ids).
  const bool one_group = whi - wlo <= U * kWarp * V;
  int* row = rowmem + w * E;       // only for w < rows
  int* tot = rowmem + rows * E;    // place only: slots per expert, all blocks
  int* scan = tot + E;             //             E + 1: "before me", then starts

  for (int i = t; i < rows * E; i += nt) rowmem[i] = 0;
  if constexpr (kPlace)
    for (int e = t; e < E; e += nt) tot[e] = scan[e] = 0;
  __syncthreads();
  Group<IdT> ev;
  if (w < rows) {
    if (one_group) {
      load_group<IdT>(a, wlo, aligned, ev);
      count_group<IdT>(ev, wlo, whi, row);
    } else {
      for (std::int64_t base = wlo; base < whi; base += U * kWarp * V) {
        load_group<IdT>(a, base, aligned, ev);
        count_group<IdT>(ev, base, whi, row);
      }
    }
  }
  __syncthreads();
  if constexpr (!kPlace) {
    for (int e = t; e < E; e += nt) {
      int s = 0;
      for (int r = 0; r < rows; ++r) s += rowmem[r * E + e];
      H[static_cast<std::int64_t>(b) * E + e] = s;
    }
    return;
  } else {
    for (int e = t; e < E; e += nt) {  // warp prefix, in place
      int run = 0;
      for (int r = 0; r < rows; ++r) {
        const int v = rowmem[r * E + e];
        rowmem[r * E + e] = run;
        run += v;
      }
    }
    pdl_wait_primary();  // `count` has finished and its H is visible
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
    for (int e = t; e < E; e += nt) {  // fold "before me" into the rows, free `scan`
      const int before = scan[e];
      for (int r = 0; r < rows; ++r) rowmem[r * E + e] += before;
      scan[e] = padded(tot[e], a.block_size);
    }
    __syncthreads();
    const int total = block_exclusive_scan(scan, E, warp_sums);
    if (b == 0 && t == 0) *a.total = total;
    for (int e = t; e < E; e += nt) {
      const int start = scan[e];
      for (int r = 0; r < rows; ++r) rowmem[r * E + e] += start;
    }
    write_share(a, scan, b, G, [&](int e) { return tot[e]; });
    __syncthreads();
    if (w >= rows) return;
    const int nbits = expert_bits(E);
    if (one_group) {
      place_group<IdT>(a, ev, wlo, whi, row, nbits);
    } else {
      for (std::int64_t base = wlo; base < whi; base += U * kWarp * V) {
        load_group<IdT>(a, base, aligned, ev);
        place_group<IdT>(a, ev, base, whi, row, nbits);
      }
    }
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

// Grid: ~4 slots per thread and ~16 padding rows per thread, capped so that the
// G x E table every `place` block reads stays <= 128 KiB.
template <class IdT>
inline TwoPassPlan twopass_plan(const Problem& p) {
  TwoPassPlan pl;
  pl.rows = twopass_rows(p.num_experts);
  if (pl.rows < 1) return pl;
  pl.threads = std::max(256, pl.rows * kWarp);
  pl.smem_count = sizeof(int) * static_cast<std::size_t>(pl.rows) * p.num_experts;
  pl.smem_place =
      pl.smem_count + sizeof(int) * (2 * static_cast<std::size_t>(p.num_experts) + 1);
  const std::int64_t gmax =
      std::clamp<std::int64_t>(kTwoPassTableInts / p.num_experts, 1, 64);
  const std::int64_t want = std::max<std::int64_t>(
      {1, ceil_div<std::int64_t>(p.numel, pl.threads * 4LL),
       ceil_div<std::int64_t>(p.max_num_tokens_padded, pl.threads * 16LL)});
  pl.grid = static_cast<int>(std::min(want, gmax));
  const std::int64_t chunk = kWarp * kVec<IdT>;
  pl.tile = ceil_div<std::int64_t>(ceil_div<std::int64_t>(p.numel, pl.grid), chunk) * chunk;
  pl.subtile = ceil_div<std::int64_t>(ceil_div<std::int64_t>(pl.tile, pl.rows), chunk) * chunk;
  if (pl.tile == 0) pl.tile = pl.subtile = chunk;
  return pl;
}

template <class IdT>
inline std::size_t twopass_workspace(const Problem& p) {
  const TwoPassPlan pl = twopass_plan<IdT>(p);
  return sizeof(int) * static_cast<std::size_t>(pl.grid) * p.num_experts;
}

inline const char* twopass_not_applicable(const Problem& p) {
  const int rows = twopass_rows(p.num_experts);
  if (rows < 1 ||
      sizeof(int) * (static_cast<std::size_t>(rows + 2) * p.num_experts + 1) >
          device_caps().smem_optin)
    return "needs 12*E+4 bytes of shared memory per block (E <= 19370 on H100)";
  return nullptr;
}

template <class IdT>
inline void launch_twopass(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  const Args a = make_args(p, bufs);
  const TwoPassPlan pl = twopass_plan<IdT>(p);
  int* H = static_cast<int*>(bufs.workspace);
  allow_smem(twopass_kernel<IdT, false>, pl.smem_count);
  allow_smem(twopass_kernel<IdT, true>, pl.smem_place);
  twopass_kernel<IdT, false><<<pl.grid, pl.threads, pl.smem_count, s>>>(a, H, pl.rows, pl.tile,
                                                                       pl.subtile);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(pl.grid);
  cfg.blockDim = dim3(pl.threads);
  cfg.dynamicSmemBytes = pl.smem_place;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, twopass_kernel<IdT, true>, a, H, pl.rows, pl.tile, pl.subtile);
}

}  // namespace moekit::align::detail
