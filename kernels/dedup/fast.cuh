// `range-sort` and `fast`: one CTA per batch row, like cub-sort to bitmask, but the
// work after the load depends on what the row holds.
//
// Both start with one block min/max reduction of the valid values; keys become
// value - min, so only the bits of the row's actual range matter.
//
// `range-sort`: LSD radix sort over just those bits (17 for indices < 131072
// instead of 32), ranking with match.any and 8-bit digits (4 passes for a full
// 31-bit range instead of CUB's eight 4-bit passes). The sorted tile stays in
// shared memory; run heads are found there and compacted with one warp ballot
// per strip (bitmask's idea at warp width); 16-byte stores write the row.
//
// `fast` picks one of three paths per row (uniform branch, the whole CTA agrees):
//  1. bitmap, when max - min + 1 <= 64 bits per tile slot: one atomicOr per
//     value into a shared bitmap, then every thread pops its own run of words
//     (held in registers) after one block scan of their counts. No sort at all.
//  2. buckets, for wide ranges: one unstable pass with shared atomics splits the
//     keys into tile/2 buckets by their top bits; if no bucket holds more than
//     64 keys (true for spread-out values), each key's place inside its bucket
//     is its count of smaller bucket mates. Two data passes instead of four.
//  3. otherwise (a few huge buckets: clustered values) the range-sort passes.
// The bench (docs/bench/dedup.md) shows where each path wins.
#pragma once

#include <cub/block/block_radix_rank.cuh>
#include <cub/block/radix_rank_sort_operations.cuh>

#include <type_traits>

#include "dedup/common.cuh"

namespace moekit::dedup::detail {

constexpr int ilog2(int x) { return x <= 1 ? 0 : 1 + ilog2(x / 2); }

// The radix passes of `range-sort` and `fast`: LSD radix over the bits of the
// row's range, match.any ranking with RADIX_BITS-wide digits. A FastKernel's
// SORT parameter: TempStorage, and sort() leaving the tile sorted ascending in
// buf[0, THREADS * IPT) followed by a barrier (bench/tune/ times other sorts
// through the same slot).
template <int THREADS, int IPT, int RADIX_BITS>
struct MatchRadixSort {
  using Rank = cub::BlockRadixRankMatch<THREADS, RADIX_BITS, false>;
  using TempStorage = typename Rank::TempStorage;
  static constexpr int kStrip = 32 * IPT;  // keys per warp in the warp-striped arrangement

  static __device__ __forceinline__ void sort(TempStorage& tmp, std::uint32_t (&keys)[IPT], int nbits,
                                              std::uint32_t* buf) {
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    // LSD passes. Match-based ranking is stable for keys in warp-striped order
    // (warp, item, lane); the first pass may take any order, so the vector
    // load needs no exchange. Each pass scatters through buf, so after the
    // last one the sorted tile is already there.
    int ranks[IPT];
    for (int bit = 0; bit < nbits; bit += RADIX_BITS) {
      const int nb = min(RADIX_BITS, nbits - bit);
      Rank(tmp).RankKeys(keys, ranks,
                         cub::BFEDigitExtractor<std::uint32_t>(static_cast<std::uint32_t>(bit),
                                                               static_cast<std::uint32_t>(nb)));
#pragma unroll
      for (int j = 0; j < IPT; ++j) buf[ranks[j]] = keys[j];
      __syncthreads();
      if (bit + RADIX_BITS < nbits) {
#pragma unroll
        for (int j = 0; j < IPT; ++j) keys[j] = buf[warp * kStrip + j * 32 + lane];
      }
    }
  }
};

template <int THREADS, int IPT, int RADIX_BITS, bool BITMAP, bool BUCKETS,
          template <int, int, int> class SORT = MatchRadixSort>
struct FastKernel {
  static_assert(THREADS % 32 == 0, "whole warps");
  static_assert((IPT & (IPT - 1)) == 0 && IPT >= 4, "items per thread: a power of two >= 4");
  static constexpr int kTile = THREADS * IPT;
  static constexpr int kWarps = THREADS / 32;
  static constexpr int kStrip = 32 * IPT;  // keys per warp in the warp-striped arrangement

  // Bitmap of up to 64 bits per tile slot (cap 64 KiB): values spanning < 131072
  // fit a 4096 tile. Each thread owns at most kMaxWordsPerThread words.
  static constexpr int kBitmapWords = BITMAP ? (2 * kTile < 16384 ? 2 * kTile : 16384) : 4 * THREADS;
  static constexpr int kMaxWordsPerThread = kBitmapWords / THREADS;
  static_assert((kMaxWordsPerThread & (kMaxWordsPerThread - 1)) == 0 && kMaxWordsPerThread >= 4);

  // ~2 keys per bucket when values are spread out (at most 4096 buckets); more
  // than kMaxBucket keys in one bucket sends the row to the radix passes.
  static constexpr int kBucketBits = ilog2(kTile) - 1 < 12 ? ilog2(kTile) - 1 : 12;
  static constexpr int kBuckets = 1 << kBucketBits;
  static constexpr int kBucketsPerThread = kBuckets >= THREADS ? kBuckets / THREADS : 1;
  static constexpr int kMaxBucket = 64;

  using Sort = SORT<THREADS, IPT, RADIX_BITS>;
  using SortStorage = typename Sort::TempStorage;
  struct BucketStorage {
    std::uint32_t src[kTile];         // keys grouped by bucket, unordered inside one
    std::uint32_t start[kBuckets];    // counts, then exclusive prefix: bucket b is [start[b], start[b+1])
  };
  struct Empty {};

  struct Storage {
    std::uint32_t buf[kTile];  // radix exchange / sorted tile, then the output stage
    union {
      SortStorage sort;
      std::conditional_t<BITMAP, std::uint32_t[kBitmapWords], Empty> bitmap;
      std::conditional_t<BUCKETS, BucketStorage, Empty> bucket;
    } u;
    std::uint32_t warp_a[kWarps], warp_b[kWarps];
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

    // Range of the valid values: one warp reduction each, one barrier.
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
      s.warp_a[warp] = lo;
      s.warp_b[warp] = hi;
    }
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      lo = min(lo, s.warp_a[w]);
      hi = max(hi, s.warp_b[w]);
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

    // Only the bits of `range` are sorted; invalid slots get the all-ones key
    // of that width, which is above every value - lo.
    const int nbits = 32 - __clz(static_cast<int>(range));
    const std::uint32_t sentinel = nbits >= 32 ? kPad : (1u << nbits) - 1u;
#pragma unroll
    for (int j = 0; j < IPT; ++j) keys[j] = is_valid(keys[j]) ? keys[j] - lo : sentinel;

    if constexpr (BUCKETS) {
      const int valid = bucket_sort(s, keys, nbits, sentinel);
      if (valid >= 0) {
        compact_sorted(s, valid, sentinel, lo, out_row, n);
        return;
      }
    }
    radix_sort(s, keys, nbits);
    compact_sorted(s, kTile, sentinel, lo, out_row, n);
  }

  // Exclusive block scan of one int per thread (warp shuffles, one barrier).
  // Uses warp_a; the caller separates consecutive uses with a barrier.
  static __device__ __forceinline__ int block_exclusive_sum(Storage& s, int x, int& total) {
    const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
    const int incl = prim::warp_inclusive_scan(x);
    if (lane == 31) s.warp_a[warp] = static_cast<std::uint32_t>(incl);
    __syncthreads();
    int before = 0;
    total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const int c = static_cast<int>(s.warp_a[w]);
      before += w < warp ? c : 0;
      total += c;
    }
    return before + incl - x;
  }

  // Path 1: bitmap of the range, expanded in order.
  static __device__ __forceinline__ void bitmap_path(Storage& s, const std::uint32_t (&keys)[IPT],
                                                     std::uint32_t lo, int words, std::int32_t* out_row,
                                                     int n) {
    const int tid = static_cast<int>(threadIdx.x);
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

    // Thread t owns words [t*wpt, t*wpt + wpt), wpt a power of two so the run
    // is read with 16-byte loads and kept in registers: one scan of the
    // per-thread counts orders everything, and no shuffle chain per word.
    int wpt = 1;
    while (wpt * THREADS < words) wpt <<= 1;  // <= kMaxWordsPerThread since words <= kBitmapWords
    const int begin = tid * wpt;
    std::uint32_t w[kMaxWordsPerThread];
    int count = 0;
#pragma unroll
    for (int i = 0; i < kMaxWordsPerThread; i += 4) {
      uint4 q = make_uint4(0, 0, 0, 0);
      if (wpt >= 4) {
        if (i < wpt) q = *reinterpret_cast<const uint4*>(&s.u.bitmap[begin + i]);
      } else if (i == 0) {
        q.x = s.u.bitmap[begin];
        if (wpt == 2) q.y = s.u.bitmap[begin + 1];
      }
      w[i] = q.x;
      w[i + 1] = q.y;
      w[i + 2] = q.z;
      w[i + 3] = q.w;
    }
#pragma unroll
    for (int i = 0; i < kMaxWordsPerThread; ++i) {
      if (i >= wpt || begin + i >= words) w[i] = 0;  // words past the range were never cleared
      count += __popc(w[i]);
    }
    int total = 0;
    int pos = block_exclusive_sum(s, count, total);
#pragma unroll
    for (int i = 0; i < kMaxWordsPerThread; ++i) {
      std::uint32_t bits = w[i];
      const std::uint32_t value0 = lo + 32u * static_cast<std::uint32_t>(begin + i);
      while (bits) {
        s.buf[pos++] = value0 + static_cast<std::uint32_t>(__ffs(static_cast<int>(bits)) - 1);
        bits &= bits - 1u;
      }
    }
    __syncthreads();
    store_staged<THREADS>(s.buf, total, out_row, n);
  }

  // Path 2: bucket by top bits, then rank inside the bucket by counting. Leaves
  // the valid keys sorted in s.buf[0, valid) and returns `valid`; returns -1
  // (keys untouched) when some bucket is too full for the counting step.
  static __device__ __forceinline__ int bucket_sort(Storage& s, const std::uint32_t (&keys)[IPT], int nbits,
                                                    std::uint32_t sentinel) {
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    BucketStorage& b = s.u.bucket;
    const int shift = nbits > kBucketBits ? nbits - kBucketBits : 0;
    for (int i = tid; i < kBuckets; i += THREADS) b.start[i] = 0;
    __syncthreads();
    // Unstable on purpose: the slot order inside a bucket does not matter,
    // because the counting step below orders the bucket completely.
    int slot[IPT];
#pragma unroll
    for (int j = 0; j < IPT; ++j)
      slot[j] = keys[j] != sentinel ? static_cast<int>(atomicAdd(&b.start[keys[j] >> shift], 1u)) : -1;
    __syncthreads();

    // Bucket counts -> starts, and the largest count, in one scan.
    std::uint32_t cnt[kBucketsPerThread];
    int sum = 0;
    std::uint32_t biggest = 0;
    const int b0 = tid * kBucketsPerThread;
#pragma unroll
    for (int i = 0; i < kBucketsPerThread; ++i) {
      cnt[i] = b0 + i < kBuckets ? b.start[b0 + i] : 0u;
      sum += static_cast<int>(cnt[i]);
      biggest = max(biggest, cnt[i]);
    }
    biggest = __reduce_max_sync(0xffffffffu, biggest);
    if (lane == 0) s.warp_b[warp] = biggest;
    int valid = 0;
    int start = block_exclusive_sum(s, sum, valid);  // its barrier also publishes warp_b
#pragma unroll
    for (int w = 0; w < kWarps; ++w) biggest = max(biggest, s.warp_b[w]);
    if (biggest > kMaxBucket) return -1;  // uniform: every thread saw the same warp_b
#pragma unroll
    for (int i = 0; i < kBucketsPerThread; ++i) {
      if (b0 + i < kBuckets) b.start[b0 + i] = static_cast<std::uint32_t>(start);
      start += static_cast<int>(cnt[i]);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < IPT; ++j)
      if (slot[j] >= 0) b.src[b.start[keys[j] >> shift] + static_cast<std::uint32_t>(slot[j])] = keys[j];
    __syncthreads();

    // Striped positions: the lanes of a warp read neighbouring keys, mostly of
    // the same bucket, so their inner loops have similar lengths and their
    // loads broadcast.
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const int p = j * THREADS + tid;
      if (p < valid) {
        const std::uint32_t x = b.src[p];
        const std::uint32_t bk = x >> shift;
        const int first = static_cast<int>(b.start[bk]);
        const int last = bk + 1 < static_cast<std::uint32_t>(kBuckets) ? static_cast<int>(b.start[bk + 1]) : valid;
        int r = 0;
#pragma unroll 4
        for (int q = first; q < last; ++q) {
          const std::uint32_t y = b.src[q];
          r += (y < x) || (y == x && q < p);
        }
        s.buf[first + r] = x;
      }
    }
    __syncthreads();
    return valid;
  }

  // Path 3: leaves the tile sorted ascending in s.buf (followed by a barrier).
  static __device__ __forceinline__ void radix_sort(Storage& s, std::uint32_t (&keys)[IPT], int nbits) {
    Sort::sort(s.u.sort, keys, nbits, s.buf);
  }

  // s.buf[0, limit) sorted (sentinels last): keep the head of every run of
  // valid keys, add lo back, write the row. Heads are found with one warp
  // ballot per strip: warp-wide bitmasks and __popc offsets.
  static __device__ __forceinline__ void compact_sorted(Storage& s, int limit, std::uint32_t sentinel,
                                                        std::uint32_t lo, std::int32_t* out_row, int n) {
    const int tid = static_cast<int>(threadIdx.x);
    const int lane = tid & 31, warp = tid >> 5;
    std::uint32_t ballot[IPT], keys[IPT];
    int count = 0;
#pragma unroll
    for (int j = 0; j < IPT; ++j) {
      const int i = warp * kStrip + j * 32 + lane;
      keys[j] = i < limit ? s.buf[i] : sentinel;
      const bool head = keys[j] != sentinel && (i == 0 || s.buf[i - 1] != keys[j]);
      ballot[j] = __ballot_sync(0xffffffffu, head);
      count += __popc(ballot[j]);
    }
    if (lane == 0) s.warp_a[warp] = static_cast<std::uint32_t>(count);
    __syncthreads();  // also ends every read of the sorted tile before it is overwritten
    int offset = 0, total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const int c = static_cast<int>(s.warp_a[w]);
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

template <int THREADS, int IPT, int RADIX_BITS, bool BITMAP, bool BUCKETS,
          template <int, int, int> class SORT = MatchRadixSort>
__global__ void __launch_bounds__(THREADS) dedup_fast_kernel(const std::int32_t* __restrict__ in,
                                                             std::int32_t* __restrict__ out, int n) {
  prim::pdl_wait();  // the indices; out the previous kernel may still read
  FastKernel<THREADS, IPT, RADIX_BITS, BITMAP, BUCKETS, SORT>::run(in, out, n);
  prim::pdl_launch_dependents();  // one block per batch row: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

}  // namespace moekit::dedup::detail
