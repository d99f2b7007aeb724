// `bitmask`: vectorized with the head flags replaced by one 32-bit mask per thread.
// The previous key comes from a warp shuffle (and, at warp edges, from a small
// shared array); __popc gives the count and each key's offset with no flag array
// and no per-key loop-carried counter.
#pragma once

#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "dedup/common.cuh"

namespace moekit::dedup::detail {

template <int THREADS, int IPT>
struct BitmaskKernel {
  static_assert(IPT <= 32, "one 32-bit mask per thread");
  static constexpr int kTile = THREADS * IPT;
  static constexpr int kWarps = THREADS / 32;
  using Sort = cub::BlockRadixSort<std::uint32_t, THREADS, IPT>;
  using Scan = cub::BlockScan<int, THREADS>;

  struct Storage {
    union {
      typename Sort::TempStorage sort;
      typename Scan::TempStorage scan;
      std::uint32_t stage[kTile];
    } u;
    std::uint32_t warp_last[kWarps];  // last key of each warp, for the next warp's lane 0
  };

  static __device__ void run(const std::int32_t* __restrict__ in, std::int32_t* __restrict__ out, int n) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Storage& s = *reinterpret_cast<Storage*>(smem_raw);
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    const std::int32_t* row = in + static_cast<std::int64_t>(blockIdx.x) * n;
    std::int32_t* out_row = out + static_cast<std::int64_t>(blockIdx.x) * n;

    std::uint32_t keys[IPT];
    load_vectorized<THREADS, IPT>(row, n, keys);
    Sort(s.u.sort).Sort(keys);  // blocked: thread t holds ranks t*IPT ...

    std::uint32_t prev = __shfl_up_sync(0xffffffffu, keys[IPT - 1], 1);
    if (lane == 31) s.warp_last[warp] = keys[IPT - 1];
    __syncthreads();  // also ends every read of the sort's storage
    if (lane == 0) prev = warp > 0 ? s.warp_last[warp - 1] : ~keys[0];

    std::uint32_t mask = 0;
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const std::uint32_t before = j == 0 ? prev : keys[j - 1];
      if (keys[j] != before && is_valid(keys[j])) mask |= 1u << j;
    }
    int offset = 0, total = 0;
    Scan(s.u.scan).ExclusiveSum(__popc(mask), offset, total);
    __syncthreads();  // the stage overlays the scan's storage

#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      if (mask & (1u << j)) s.u.stage[offset + __popc(mask & ((1u << j) - 1u))] = keys[j];
    }
    __syncthreads();
    store_staged<THREADS>(s.u.stage, total, out_row, n);
  }
};

template <int THREADS, int IPT>
__global__ void __launch_bounds__(THREADS) dedup_bitmask_kernel(const std::int32_t* __restrict__ in,
                                                                std::int32_t* __restrict__ out, int n) {
  prim::pdl_wait();  // the indices; out the previous kernel may still read
  BitmaskKernel<THREADS, IPT>::run(in, out, n);
  prim::pdl_launch_dependents();  // one block per batch row: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

}  // namespace moekit::dedup::detail
