// Tuning candidates (see dedup_tuning.hpp). Not variants: the registry uses
// the shapes these tables justify. The other sorts plug into FastKernel's
// SORT slot (kernels/dedup/fast.cuh), so range reduction and compaction stay
// the registered kernels' own.
#include <cub/block/block_merge_sort.cuh>
#include <cub/block/block_radix_sort.cuh>

#include "dedup/fast.cuh"
#include "dedup/launch.cuh"
#include "dedup_tuning.hpp"

namespace moekit::dedup::tune {

namespace {

using detail::FastKernel;
using detail::MatchRadixSort;

// cub::BlockRadixSort over the range's bits (RADIX_BITS-wide digit ranking).
template <int THREADS, int IPT, int RADIX_BITS>
struct CubRadixSort {
  using Sort = cub::BlockRadixSort<std::uint32_t, THREADS, IPT, cub::NullType, RADIX_BITS>;
  using TempStorage = typename Sort::TempStorage;
  static __device__ __forceinline__ void sort(TempStorage& tmp, std::uint32_t (&keys)[IPT], int nbits,
                                              std::uint32_t* buf) {
    Sort(tmp).SortBlockedToStriped(keys, 0, nbits);
#pragma unroll
    for (int j = 0; j < IPT; ++j) buf[j * THREADS + threadIdx.x] = keys[j];
    __syncthreads();
  }
};

struct LessU32 {
  __device__ __forceinline__ bool operator()(std::uint32_t a, std::uint32_t b) const { return a < b; }
};

// cub::BlockMergeSort: cost independent of the bit width.
template <int THREADS, int IPT, int>
struct MergeSort {
  using Sort = cub::BlockMergeSort<std::uint32_t, THREADS, IPT>;
  using TempStorage = typename Sort::TempStorage;
  static __device__ __forceinline__ void sort(TempStorage& tmp, std::uint32_t (&keys)[IPT], int,
                                              std::uint32_t* buf) {
    Sort(tmp).Sort(keys, LessU32());
#pragma unroll
    for (int j = 0; j < IPT; ++j) buf[threadIdx.x * IPT + j] = keys[j];
    __syncthreads();
  }
};

template <int THREADS, int IPT, int RB, bool BITMAP, bool BUCKETS = false,
          template <int, int, int> class SORT = MatchRadixSort>
LaunchStatus launch_cfg(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  using K = FastKernel<THREADS, IPT, RB, BITMAP, BUCKETS, SORT>;
  return detail::launch_rows<detail::dedup_fast_kernel<THREADS, IPT, RB, BITMAP, BUCKETS, SORT>, typename K::Storage,
                             THREADS>(p, b, s, pdl);
}

// The floor of a one-CTA-per-row kernel: vector load of the row, one block
// reduction, -1 stored over the row. No dedup work at all.
template <int THREADS, int IPT>
__global__ void __launch_bounds__(THREADS) io_floor_kernel(const std::int32_t* __restrict__ in,
                                                           std::int32_t* __restrict__ out, int n) {
  __shared__ __align__(16) std::uint32_t stage[4];
  __shared__ std::uint32_t warp_acc[THREADS / 32];
  const std::int32_t* row = in + static_cast<std::int64_t>(blockIdx.x) * n;
  std::int32_t* out_row = out + static_cast<std::int64_t>(blockIdx.x) * n;
  std::uint32_t keys[IPT];
  detail::load_vectorized<THREADS, IPT>(row, n, keys);
  std::uint32_t acc = 0;
#pragma unroll
  for (int j = 0; j < IPT; ++j) acc = max(acc, keys[j]);
  acc = __reduce_max_sync(0xffffffffu, acc);
  if ((threadIdx.x & 31) == 0) warp_acc[threadIdx.x >> 5] = acc;
  __syncthreads();
  for (int w = 0; w < THREADS / 32; ++w) acc = max(acc, warp_acc[w]);
  // acc can never be 0x7ffffff0 + 1 here in practice; the test only keeps the load alive.
  detail::store_staged<THREADS>(stage, acc == 0x7ffffff1u ? 1 : 0, out_row, n);
}

template <int THREADS, int IPT>
LaunchStatus launch_floor(const Problem& p, const Buffers& b, Stream s, bool) {
  if (p.batch <= 0) return cudaSuccess;
  io_floor_kernel<THREADS, IPT>
      <<<static_cast<unsigned>(p.batch), THREADS, 0, s>>>(b.indices, b.out, static_cast<int>(p.row_len()));
  return cudaGetLastError();
}

constexpr bool kNoCheck = false;

const Config kConfigs[] = {
    // tile 2048: M=1
    {"I/O floor (load, reduce, store -1), 512x4", 2048, launch_floor<512, 4>, kNoCheck},
    {"range-sort 256x8 (registry)", 2048, launch_cfg<256, 8, 8, false>},
    {"range-sort 128x16", 2048, launch_cfg<128, 16, 8, false>},
    {"fast 256x8", 2048, launch_cfg<256, 8, 8, true, true>},
    {"fast 512x4 (registry)", 2048, launch_cfg<512, 4, 8, true, true>},
    // tile 4096: M=2
    {"I/O floor (load, reduce, store -1), 512x8", 4096, launch_floor<512, 8>, kNoCheck},
    {"range-sort, match.any 8-bit digits, 256x16 (registry)", 4096, launch_cfg<256, 16, 8, false>},
    {"range-sort, match.any 8-bit digits, 512x8", 4096, launch_cfg<512, 8, 8, false>},
    {"range-sort, match.any 6-bit digits, 512x8", 4096, launch_cfg<512, 8, 6, false>},
    {"range-sort, cub::BlockRadixSort 4-bit digits, 512x8", 4096,
     launch_cfg<512, 8, 4, false, false, CubRadixSort>},
    {"range-sort, cub::BlockMergeSort, 512x8", 4096, launch_cfg<512, 8, 8, false, false, MergeSort>},
    {"fast without buckets (bitmap or radix), 512x8", 4096, launch_cfg<512, 8, 8, true>},
    {"fast without bitmap (buckets or radix), 512x8", 4096,
     launch_cfg<512, 8, 8, false, true>},
    {"fast 256x16", 4096, launch_cfg<256, 16, 8, true, true>},
    {"fast 512x8 (registry)", 4096, launch_cfg<512, 8, 8, true, true>},
    {"fast 1024x4", 4096, launch_cfg<1024, 4, 8, true, true>},
    // tile 8192: M=4
    {"I/O floor (load, reduce, store -1), 1024x8", 8192, launch_floor<1024, 8>, kNoCheck},
    {"range-sort 512x16 (registry)", 8192, launch_cfg<512, 16, 8, false>},
    {"range-sort 1024x8", 8192, launch_cfg<1024, 8, 8, false>},
    {"fast 512x16", 8192, launch_cfg<512, 16, 8, true, true>},
    {"fast 1024x8 (registry)", 8192, launch_cfg<1024, 8, 8, true, true>},
};

}  // namespace

std::span<const Config> configs() { return kConfigs; }

}  // namespace moekit::dedup::tune
