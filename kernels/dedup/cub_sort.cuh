// `cub-sort`: BlockRadixSort, BlockDiscontinuity head flags, BlockScan of the
// per-thread counts, then each thread scatters its flagged keys straight to
// global memory. Deterministic and branch-uniform, but holds an int flag per key.
#pragma once

#include <cub/block/block_discontinuity.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>

#include "dedup/common.cuh"

namespace moekit::dedup::detail {

struct NotEqual {
  __device__ __forceinline__ bool operator()(std::uint32_t a, std::uint32_t b) const { return a != b; }
};

template <int THREADS, int IPT>
struct CubSortKernel {
  using Sort = cub::BlockRadixSort<std::uint32_t, THREADS, IPT>;
  using Disc = cub::BlockDiscontinuity<std::uint32_t, THREADS>;
  using Scan = cub::BlockScan<int, THREADS>;

  struct Storage {
    union {
      typename Sort::TempStorage sort;
      typename Disc::TempStorage disc;
      typename Scan::TempStorage scan;
    } u;
  };

  static __device__ void run(const std::int32_t* __restrict__ in, std::int32_t* __restrict__ out, int n) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Storage& s = *reinterpret_cast<Storage*>(smem_raw);
    const int tid = static_cast<int>(threadIdx.x);
    const std::int32_t* row = in + static_cast<std::int64_t>(blockIdx.x) * n;
    std::int32_t* out_row = out + static_cast<std::int64_t>(blockIdx.x) * n;

    std::uint32_t keys[IPT];
    load_striped<THREADS, IPT>(row, n, keys);
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

#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      if (flags[j]) out_row[offset++] = static_cast<std::int32_t>(keys[j]);
    }
    for (int i = total + tid; i < n; i += THREADS) out_row[i] = -1;
  }
};

template <int THREADS, int IPT>
__global__ void __launch_bounds__(THREADS) dedup_cub_sort_kernel(const std::int32_t* __restrict__ in,
                                                                 std::int32_t* __restrict__ out, int n) {
  prim::pdl_wait();  // the indices; out the previous kernel may still read
  CubSortKernel<THREADS, IPT>::run(in, out, n);
  prim::pdl_launch_dependents();  // one block per batch row: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

}  // namespace moekit::dedup::detail
