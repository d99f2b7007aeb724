// Per-warp counter rows: the building block of the stable variants that
// split the slots over many blocks (`twopass`). Each warp owns a
// contiguous sub-tile of slots and one shared row of E counters; counting
// needs no order (plain shared atomics on the warp's own row), placing goes
// in slot order with ranks from ballots, so the rows come out stable.
//
// Code size is a first-order cost here. These kernels run once per launch for
// a few microseconds, so every instruction-cache line is fetched cold. The
// first version (4 x 4 placement rounds unrolled, the ids kept in registers
// and transposed by shuffles, two call sites each) made `twopass`'s place
// kernel ~200 KiB of SASS, and ncu showed its warps stalled on "no
// instructions" and on barriers waiting for those warps. Placing now
// re-reads the ids in slot order (just read: L1/L2 hits), one round ahead,
// from one rolled loop; with the batched row passes below this took ~1.5 µs
// off every `twopass` cell on the H100.
// Comments here keep µs figures: 2 lines (why alternative designs lost; not thresholds).
#pragma once

#include <type_traits>

#include "align/common.cuh"

namespace moekit::align::detail {

constexpr int kRowsUnroll = 2;  // 16-byte id loads in flight per lane while counting

// Host side: slots per block (tile) and per counting warp (subtile) for
// `grid` blocks of `rows` counting warps, both whole 16-byte warp loads.
struct RowTiles {
  std::int64_t tile, subtile;
};
template <class IdT>
inline RowTiles row_tiles(std::int64_t numel, int grid, int rows) {
  const std::int64_t chunk = kWarp * kVec<IdT>;
  const std::int64_t tile = ceil_div<std::int64_t>(ceil_div<std::int64_t>(numel, grid), chunk) * chunk;
  if (tile == 0) return {chunk, chunk};
  return {tile, ceil_div<std::int64_t>(ceil_div<std::int64_t>(tile, rows), chunk) * chunk};
}

// Adds the experts of slots [lo, hi) of this warp to its row: kRowsUnroll
// 16-byte loads per lane in flight, plain shared atomics (no order needed).
template <class IdT>
__device__ __forceinline__ void count_slots(const Args& a, std::int64_t lo, std::int64_t hi,
                                            bool aligned, int* row) {
  constexpr int V = kVec<IdT>, U = kRowsUnroll;
  using Raw = std::conditional_t<sizeof(IdT) == 4, int4, longlong2>;
  const int lane = threadIdx.x & (kWarp - 1);
  const IdT* ids = static_cast<const IdT*>(a.ids);
#pragma unroll 1
  for (std::int64_t g = lo; g < hi; g += U * kWarp * V) {
    // Raw ids first (16-byte loads when the whole group is in range and
    // aligned), converted afterwards: one copy of the expert_of code per id.
    IdT raw[U][V];
    const bool vec = aligned && g + U * kWarp * V <= hi;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t first = g + (u * kWarp + lane) * V;
      if (vec) {
        const Raw r = __ldg(reinterpret_cast<const Raw*>(ids + first));
        static_assert(sizeof(Raw) == sizeof(raw[u]));
        __builtin_memcpy(raw[u], &r, sizeof r);
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) raw[u][k] = first + k < hi ? __ldg(ids + first + k) : IdT(-1);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int e = g + (u * kWarp + lane) * V + k < hi ? expert_of<IdT>(raw[u][k], a) : -1;
        if (e >= 0) atomicAdd(row + e, 1);
      }
  }
}

// Column e of `rows` per-warp rows (row stride E): init + the exclusive
// prefix over the warps, in place; returns the column total (without init). Eight loads in flight at a
// time: as a plain dependent loop over 32 rows this pass cost ~0.5 µs per
// launch (one shared-memory latency per row), and the kernels ran it 1-3 times.
__device__ __forceinline__ int rows_exclusive_prefix(int* rowmem, int rows, int E, int e,
                                                     int init = 0) {
  constexpr int kBatch = 8;
  int run = init;
#pragma unroll 1
  for (int r0 = 0; r0 < rows; r0 += kBatch) {
    int v[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) v[k] = r0 + k < rows ? rowmem[(r0 + k) * E + e] : 0;
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      if (r0 + k < rows) rowmem[(r0 + k) * E + e] = run;
      run += v[k];
    }
  }
  return run - init;
}

// Places slots [lo, hi) of this warp in slot order, 32 per round (lane order
// = slot order). Expert e's next row is base[e] + row[e]: row is the warp's
// own counter row (warp-relative, advanced here), base what every warp of the
// block adds (so no pass over the rows is needed to make them absolute). The
// next round's id is loaded before this round's ballots, so its latency
// overlaps them.
template <class IdT>
__device__ __forceinline__ void place_slots(const Args& a, std::int64_t lo, std::int64_t hi,
                                            int* row, const int* base, int nbits) {
  const int lane = threadIdx.x & (kWarp - 1);
  const IdT* ids = static_cast<const IdT*>(a.ids);
  IdT raw = lo + lane < hi ? __ldg(ids + lo + lane) : IdT(-1);
#pragma unroll 1
  for (std::int64_t s0 = lo; s0 < hi; s0 += kWarp) {
    const std::int64_t slot = s0 + lane;
    const int e = slot < hi ? expert_of<IdT>(raw, a) : -1;
    if (slot + kWarp < hi) raw = __ldg(ids + slot + kWarp);
    const unsigned peers = warp_peers(e, nbits);
    const int pos = e >= 0 ? base[e] + row[e] + __popc(peers & lanemask_lt(threadIdx.x & (kWarp - 1))) : 0;
    __syncwarp();
    if (e >= 0 && lane == __ffs(peers) - 1) row[e] += __popc(peers);
    __syncwarp();
    if (e >= 0 && pos < a.max_padded) a.sorted[pos] = static_cast<int>(slot);
  }
}

}  // namespace moekit::align::detail
