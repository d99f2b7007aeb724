// `general`: any row length. CUB's device-level segmented radix sort orders every
// batch row (keys read as unsigned, so negatives go last) into the workspace;
// then one CTA per row streams over it in tiles, carrying the running count of
// distinct values from tile to tile. Slower than the block kernels, but with no
// size limit beyond int32 element counts.
#pragma once

#include <cub/block/block_scan.cuh>

#include "dedup/common.cuh"

namespace moekit::dedup::detail {

// offsets[i] = i * n for i in [0, batch]: segment i is [offsets[i], offsets[i+1]).
__global__ void dedup_segment_offsets_kernel(int* offsets, int batch, int n) {
  prim::pdl_wait();  // the previous launch's sort may still read the offsets
  prim::pdl_launch_dependents();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i <= batch; i += gridDim.x * blockDim.x) offsets[i] = i * n;
}

template <int THREADS, int IPT>
__global__ void __launch_bounds__(THREADS) dedup_unique_sorted_kernel(const std::uint32_t* __restrict__ sorted,
                                                                      std::int32_t* __restrict__ out, int batch,
                                                                      int n) {
  static_assert(IPT <= 32, "one 32-bit mask per thread");
  constexpr int kTile = THREADS * IPT;
  using Scan = cub::BlockScan<int, THREADS>;
  __shared__ typename Scan::TempStorage scan;
  const int tid = static_cast<int>(threadIdx.x);
  prim::pdl_wait();  // CUB's sort

  for (int b = blockIdx.x; b < batch; b += gridDim.x) {
    const std::uint32_t* seg = sorted + static_cast<std::int64_t>(b) * n;
    std::int32_t* out_row = out + static_cast<std::int64_t>(b) * n;
    int written = 0;
    // 64-bit positions: n may be within a tile of 2^31, where int tile + kTile
    // (or i + THREADS below) would overflow.
    for (std::int64_t tile = 0; tile < n; tile += kTile) {
      // Blocked: thread t holds seg[i0 .. i0+IPT); its left neighbour is read
      // straight from global memory, so no exchange is needed.
      const std::int64_t i0 = tile + tid * IPT;
      std::uint32_t keys[IPT];
#pragma unroll
      for (int j = 0; j < IPT; ++j) keys[j] = i0 + j < n ? seg[i0 + j] : kPad;
      const std::uint32_t prev = (i0 > 0 && i0 < n) ? seg[i0 - 1] : ~keys[0];
      std::uint32_t mask = 0;
#pragma unroll
      for (int j = 0; j < IPT; ++j) {
        const std::uint32_t before = j == 0 ? prev : keys[j - 1];
        if (keys[j] != before && is_valid(keys[j])) mask |= 1u << j;
      }
      int offset = 0, total = 0;
      Scan(scan).ExclusiveSum(__popc(mask), offset, total);
#pragma unroll
      for (int j = 0; j < IPT; ++j) {
        if (mask & (1u << j))
          out_row[written + offset + __popc(mask & ((1u << j) - 1u))] = static_cast<std::int32_t>(keys[j]);
      }
      written += total;
      __syncthreads();  // scan storage is reused by the next tile
    }
    for (std::int64_t i = written + tid; i < n; i += THREADS) out_row[i] = -1;
  }
  prim::pdl_launch_dependents();  // up to 65536 blocks: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

}  // namespace moekit::dedup::detail
