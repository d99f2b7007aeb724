// `hash`: shared-memory open addressing (atomicCAS + linear probing) collects
// the distinct values, which are then sorted so the output is ascending.
// The slow baseline: probe chains diverge inside a warp and every insert is an
// atomic on a random bank. Kept to show why sorting wins on a GPU.
#pragma once

#include <cub/block/block_radix_sort.cuh>

#include "dedup/common.cuh"

namespace moekit::dedup::detail {

template <int THREADS, int IPT>
struct HashKernel {
  static constexpr int kTile = THREADS * IPT;
  static constexpr int kSlots = 2 * kTile;  // load factor <= 1/2 keeps probe chains finite and short
  using Sort = cub::BlockRadixSort<std::uint32_t, THREADS, IPT>;

  struct Storage {
    union {
      struct {
        std::int32_t table[kSlots];  // -1 = empty (valid values are >= 0)
        std::int32_t list[kTile];    // distinct values in insertion order
      } hash;
      typename Sort::TempStorage sort;
    } u;
    int count;
  };

  static __device__ void run(const std::int32_t* __restrict__ in, std::int32_t* __restrict__ out, int n) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Storage& s = *reinterpret_cast<Storage*>(smem_raw);
    const int tid = static_cast<int>(threadIdx.x);
    const std::int32_t* row = in + static_cast<std::int64_t>(blockIdx.x) * n;
    std::int32_t* out_row = out + static_cast<std::int64_t>(blockIdx.x) * n;

    for (int i = tid; i < kSlots; i += THREADS) s.u.hash.table[i] = -1;
    if (tid == 0) s.count = 0;
    __syncthreads();

    for (int i = tid; i < n; i += THREADS) {
      const std::int32_t v = row[i];
      if (v < 0) continue;
      int slot = v & (kSlots - 1);
      while (true) {
        const std::int32_t old = atomicCAS(&s.u.hash.table[slot], -1, v);
        if (old == -1) {
          s.u.hash.list[atomicAdd(&s.count, 1)] = v;
          break;
        }
        if (old == v) break;
        slot = (slot + 1) & (kSlots - 1);
      }
    }
    __syncthreads();

    const int count = s.count;
    std::uint32_t keys[IPT];
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const int i = tid * IPT + j;
      keys[j] = i < count ? static_cast<std::uint32_t>(s.u.hash.list[i]) : kPad;
    }
    __syncthreads();  // the sort's storage overlays the list
    Sort(s.u.sort).Sort(keys);

    // Blocked result: thread t holds ranks t*IPT .. t*IPT+IPT-1.
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const int i = tid * IPT + j;
      if (i < n) out_row[i] = i < count ? static_cast<std::int32_t>(keys[j]) : -1;
    }
  }
};

template <int THREADS, int IPT>
__global__ void __launch_bounds__(THREADS) dedup_hash_kernel(const std::int32_t* __restrict__ in,
                                                             std::int32_t* __restrict__ out, int n) {
  prim::pdl_wait();  // the indices; out the previous kernel may still read
  HashKernel<THREADS, IPT>::run(in, out, n);
  prim::pdl_launch_dependents();  // one block per batch row: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

}  // namespace moekit::dedup::detail
