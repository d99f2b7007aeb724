// `vectorized`: cub-sort plus 16-byte loads, and the compacted row staged in shared
// memory (overlaying the sort's storage, so no extra footprint) and written back
// with 16-byte coalesced stores instead of per-thread scattered ones.
#pragma once

#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "dedup/common.cuh"
#include "dedup/cub_sort.cuh"

namespace moekit::dedup::detail {

template <int THREADS, int IPT>
struct VectorizedKernel {
  static constexpr int kTile = THREADS * IPT;
  using Sort = cub::BlockRadixSort<std::uint32_t, THREADS, IPT>;
  using Disc = cub::BlockDiscontinuity<std::uint32_t, THREADS>;
  using Scan = cub::BlockScan<int, THREADS>;

  struct Storage {
    union {
      typename Sort::TempStorage sort;
      typename Disc::TempStorage disc;
      typename Scan::TempStorage scan;
      std::uint32_t stage[kTile];
    } u;
  };

  static __device__ void run(const std::int32_t* __restrict__ in, std::int32_t* __restrict__ out, int n) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Storage& s = *reinterpret_cast<Storage*>(smem_raw);
    const std::int32_t* row = in + static_cast<std::int64_t>(blockIdx.x) * n;
    std::int32_t* out_row = out + static_cast<std::int64_t>(blockIdx.x) * n;

    std::uint32_t keys[IPT];
    load_vectorized<THREADS, IPT>(row, n, keys);
    Sort(s.u.sort).Sort(keys);
    __syncthreads();

    int flags[IPT];
    Disc(s.u.disc).FlagHeads(flags, keys, NotEqual());
    int count = 0;
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      flags[j] = flags[j] && is_valid(keys[j]);
      count += flags[j];
    }
    __syncthreads();
    int offset = 0, total = 0;
    Scan(s.u.scan).ExclusiveSum(count, offset, total);
    __syncthreads();  // the stage overlays the scan's storage

#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      if (flags[j]) s.u.stage[offset++] = keys[j];
    }
    __syncthreads();
    store_staged<THREADS>(s.u.stage, total, out_row, n);
  }
};

template <int THREADS, int IPT>
__global__ void __launch_bounds__(THREADS) dedup_vectorized_kernel(const std::int32_t* __restrict__ in,
                                                                   std::int32_t* __restrict__ out, int n) {
  prim::pdl_wait();  // the indices; out the previous kernel may still read
  VectorizedKernel<THREADS, IPT>::run(in, out, n);
  prim::pdl_launch_dependents();  // one block per batch row: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

}  // namespace moekit::dedup::detail
