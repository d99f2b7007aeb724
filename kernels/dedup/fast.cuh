// Our own variants, aimed past V3.
//
// `range-sort`: one block min/max reduction of the valid values first. Keys become
// value - min, so the radix sort only walks the bits the row's actual range needs
// (17 bits for indices < 131072, instead of 32), and ranking uses match.any with
// RADIX_BITS-wide digits (8: four passes for a full 31-bit range instead of CUB's
// eight 4-bit passes). The sorted tile stays in shared memory, so duplicates are
// found by reading the neighbour there, compacted with one warp ballot per strip
// (V3's bitmask idea at warp width), and written back with 16-byte stores.
//
// `fast`: the same, plus a sort-free path when the range is small enough for a
// bitmap of (max - min + 1) bits in shared memory: set one bit per value with
// atomicOr, then popcount and expand the words in order. No sort at all: cost
// is O(n + range/32) instead of O(n * passes).
#pragma once

#include <cub/block/block_radix_rank.cuh>
#include <cub/block/radix_rank_sort_operations.cuh>

#include "dedup/common.cuh"

namespace moekit::dedup::detail {

template <int THREADS, int IPT, int RADIX_BITS, bool BITMAP>
struct FastKernel {
  static_assert(THREADS % 32 == 0, "whole warps");
  static constexpr int kTile = THREADS * IPT;
  static constexpr int kWarps = THREADS / 32;
  static constexpr int kStrip = 32 * IPT;  // keys per warp in the warp-striped arrangement
  // Bitmap of up to 64 bits per tile slot (cap 64 KiB): values < 131072 fit a 4096 tile.
  static constexpr int kBitmapWords = BITMAP ? (2 * kTile < 16384 ? 2 * kTile : 16384) : 1;
  using Rank = cub::BlockRadixRankMatch<THREADS, RADIX_BITS, false>;

  struct Storage {
    std::uint32_t buf[kTile];  // sort exchange, then the sorted tile, then the output stage
    union {
      typename Rank::TempStorage rank;
      std::uint32_t bitmap[kBitmapWords];
    } u;
    std::uint32_t warp_lo[kWarps], warp_hi[kWarps], warp_count[kWarps];
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

    // Range of the valid values: one shuffle-free warp reduction each, one barrier.
    std::uint32_t lo = kPad, hi = 0;
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      if (is_valid(keys[j])) {
        lo = min(lo, keys[j]);
        hi = max(hi, keys[j]);
      }
    }
    lo = __reduce_min_sync(0xffffffffu, lo);
    hi = __reduce_max_sync(0xffffffffu, hi);
    if (lane == 0) {
      s.warp_lo[warp] = lo;
      s.warp_hi[warp] = hi;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      lo = min(lo, s.warp_lo[w]);
      hi = max(hi, s.warp_hi[w]);
    }
    if (lo > hi) {  // no valid value in the row
      store_staged<THREADS>(s.buf, 0, out_row, n);
      return;
    }
    const std::uint32_t range = hi - lo + 1u;  // <= 2^31

    if constexpr (BITMAP) {
      const int words = static_cast<int>((range + 31u) >> 5);
      if (words <= kBitmapWords) {
        bitmap_path(s, keys, lo, words, out_row, n);
        return;
      }
    }
    sort_path(s, keys, lo, range, out_row, n);
  }

  static __device__ __forceinline__ void bitmap_path(Storage& s, const std::uint32_t (&keys)[IPT],
                                                     std::uint32_t lo, int words, std::int32_t* out_row,
                                                     int n) {
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    for (int w = tid; w < words; w += THREADS) s.u.bitmap[w] = 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      if (is_valid(keys[j])) {
        const std::uint32_t d = keys[j] - lo;
        atomicOr(&s.u.bitmap[d >> 5], 1u << (d & 31u));
      }
    }
    __syncthreads();

    // Warp w owns a contiguous run of words (whole 32-word strips), read lane-
    // striped so shared loads are conflict-free; order across warps comes from
    // the per-warp counts, order inside a warp from a shuffle scan per strip.
    const int per_warp = ((words + kWarps - 1) / kWarps + 31) & ~31;
    const int begin = warp * per_warp;
    const int end = min(words, begin + per_warp);
    int count = 0;
    for (int w = begin + lane; w < end; w += 32) count += __popc(s.u.bitmap[w]);
    count = static_cast<int>(__reduce_add_sync(0xffffffffu, static_cast<std::uint32_t>(count)));
    if (lane == 0) s.warp_count[warp] = static_cast<std::uint32_t>(count);
    __syncthreads();
    int offset = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const int c = static_cast<int>(s.warp_count[w]);
      offset += w < warp ? c : 0;
      total += c;
    }
    for (int base = begin; base < end; base += 32) {
      const int w = base + lane;
      std::uint32_t bits = w < end ? s.u.bitmap[w] : 0u;
      const int c = __popc(bits);
      int incl = c;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const int t = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += t;
      }
      int pos = offset + incl - c;
      const std::uint32_t value0 = lo + 32u * static_cast<std::uint32_t>(w);
      while (bits) {
        s.buf[pos++] = value0 + static_cast<std::uint32_t>(__ffs(static_cast<int>(bits)) - 1);
        bits &= bits - 1u;
      }
      offset += __shfl_sync(0xffffffffu, incl, 31);
    }
    __syncthreads();
    store_staged<THREADS>(s.buf, total, out_row, n);
  }

  static __device__ __forceinline__ void sort_path(Storage& s, std::uint32_t (&keys)[IPT], std::uint32_t lo,
                                                   std::uint32_t range, std::int32_t* out_row, int n) {
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    // Only the bits of (range) are sorted; the invalid slots get the all-ones
    // key of that width, which is above every value - lo.
    const int nbits = 32 - __clz(static_cast<int>(range));
    const std::uint32_t sentinel = nbits >= 32 ? kPad : (1u << nbits) - 1u;
#pragma unroll
    for (int j = 0; j < IPT; ++j) keys[j] = is_valid(keys[j]) ? keys[j] - lo : sentinel;

    // LSD passes. Match-based ranking is stable for keys in warp-striped order
    // (warp, item, lane); the first pass may take any order, so the vector load
    // needs no exchange. After the last pass the sorted tile is in s.buf.
    int ranks[IPT];
    for (int bit = 0; bit < nbits; bit += RADIX_BITS) {
      const int nb = min(RADIX_BITS, nbits - bit);
      Rank(s.u.rank).RankKeys(keys, ranks,
                              cub::BFEDigitExtractor<std::uint32_t>(static_cast<std::uint32_t>(bit),
                                                                    static_cast<std::uint32_t>(nb)));
#pragma unroll
      for (int j = 0; j < IPT; ++j) s.buf[ranks[j]] = keys[j];
      __syncthreads();
      if (bit + RADIX_BITS < nbits) {
#pragma unroll
        for (int j = 0; j < IPT; ++j) keys[j] = s.buf[warp * kStrip + j * 32 + lane];
      }
    }

    // Heads of runs, one ballot per strip: warp-wide bitmasks and __popc offsets.
    std::uint32_t ballot[IPT];
    int count = 0;
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const int i = warp * kStrip + j * 32 + lane;
      keys[j] = s.buf[i];
      const bool head = keys[j] != sentinel && (i == 0 || s.buf[i - 1] != keys[j]);
      ballot[j] = __ballot_sync(0xffffffffu, head);
      count += __popc(ballot[j]);
    }
    if (lane == 0) s.warp_count[warp] = static_cast<std::uint32_t>(count);
    __syncthreads();  // also ends every read of the sorted tile before it is overwritten
    int offset = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const int c = static_cast<int>(s.warp_count[w]);
      offset += w < warp ? c : 0;
      total += c;
    }
    const std::uint32_t lt = lanemask_lt();
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      if (ballot[j] & (1u << lane)) s.buf[offset + __popc(ballot[j] & lt)] = keys[j] + lo;
      offset += __popc(ballot[j]);
    }
    __syncthreads();
    store_staged<THREADS>(s.buf, total, out_row, n);
  }
};

template <int THREADS, int IPT, int RADIX_BITS, bool BITMAP>
__global__ void __launch_bounds__(THREADS) dedup_fast_kernel(const std::int32_t* __restrict__ in,
                                                             std::int32_t* __restrict__ out, int n) {
  FastKernel<THREADS, IPT, RADIX_BITS, BITMAP>::run(in, out, n);
}

}  // namespace moekit::dedup::detail
