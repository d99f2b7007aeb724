// Device helpers shared by the dedup block kernels: tile shapes, row loads and
// the staged, vectorised row store. One CTA owns one batch row of n = M*k values.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "dedup/dedup.hpp"
#include "primitives/lane_mask.cuh"
#include "primitives/pdl.cuh"
#include "primitives/smem.cuh"
#include "primitives/vec_io.cuh"
#include "primitives/warp_scan.cuh"

namespace moekit::dedup::detail {

// Keys are the input bits read as unsigned: every negative input (the "no index"
// marks) lands at or above 2^31, so it sorts after every real index and one
// compare tells valid from invalid. Padding slots use all ones.
constexpr std::uint32_t kFirstInvalid = 0x80000000u;
constexpr std::uint32_t kPad = 0xFFFFFFFFu;

__device__ __forceinline__ bool is_valid(std::uint32_t key) { return key < kFirstInvalid; }

using prim::is_aligned16;
using prim::lanemask_lt;

// Striped scalar load of one row: item j of thread t is element j*THREADS + t.
// Striped (not blocked) so that every load instruction of a warp is coalesced.
template <int THREADS, int IPT>
__device__ __forceinline__ void load_striped(const std::int32_t* row, int n, std::uint32_t (&keys)[IPT]) {
#pragma unroll
  for (int j = 0; j < IPT; ++j) {
    const int i = j * THREADS + static_cast<int>(threadIdx.x);
    keys[j] = i < n ? static_cast<std::uint32_t>(__ldg(row + i)) : kPad;
  }
}

// 16-byte loads where legal (row start 16-byte aligned and n a multiple of 4:
// then every int4 is either fully inside the row or fully outside), otherwise
// the striped scalar load. The arrangement of keys across threads is not the
// sorted order anyway, so any permutation of the row is fine here.
template <int THREADS, int IPT>
__device__ __forceinline__ void load_vectorized(const std::int32_t* row, int n, std::uint32_t (&keys)[IPT]) {
  static_assert(IPT % 4 == 0, "vector loads need items per thread divisible by 4");
  if ((n & 3) == 0 && is_aligned16(row)) {
    const int n4 = n >> 2;
#pragma unroll
    for (int v = 0; v < IPT / 4; ++v) {
      const int i4 = v * THREADS + static_cast<int>(threadIdx.x);
      int4 x = make_int4(-1, -1, -1, -1);
      if (i4 < n4) x = prim::load16_ldg(row, i4);
      keys[4 * v + 0] = static_cast<std::uint32_t>(x.x);
      keys[4 * v + 1] = static_cast<std::uint32_t>(x.y);
      keys[4 * v + 2] = static_cast<std::uint32_t>(x.z);
      keys[4 * v + 3] = static_cast<std::uint32_t>(x.w);
    }
  } else {
    load_striped<THREADS, IPT>(row, n, keys);
  }
}

// Writes out_row[0, n): stage[p] for p < total, -1 after. `stage` is shared
// memory holding at least round_up(n, 4) words and 16-byte aligned. Uses 16-byte
// shared loads and 16-byte coalesced global stores when the output row allows.
template <int THREADS>
__device__ __forceinline__ void store_staged(const std::uint32_t* stage, int total, std::int32_t* out_row,
                                             int n) {
  const int tid = static_cast<int>(threadIdx.x);
  if ((n & 3) == 0 && is_aligned16(out_row)) {
    const uint4* s4 = reinterpret_cast<const uint4*>(stage);
    int4* o4 = reinterpret_cast<int4*>(out_row);
    for (int i4 = tid; i4 < (n >> 2); i4 += THREADS) {
      const int p = 4 * i4;
      int4 v = make_int4(-1, -1, -1, -1);
      if (p < total) {  // only read what was written: keeps initcheck quiet too
        const uint4 s = s4[i4];
        v.x = static_cast<std::int32_t>(s.x);
        v.y = p + 1 < total ? static_cast<std::int32_t>(s.y) : -1;
        v.z = p + 2 < total ? static_cast<std::int32_t>(s.z) : -1;
        v.w = p + 3 < total ? static_cast<std::int32_t>(s.w) : -1;
      }
      o4[i4] = v;
    }
  } else {
    for (int p = tid; p < n; p += THREADS) out_row[p] = p < total ? static_cast<std::int32_t>(stage[p]) : -1;
  }
}

// Tile shapes: THREADS x IPT keys per CTA. The smallest tile holding a row is
// used; rows above the largest tile go to the `general` variant.
template <int THREADS_, int IPT_>
struct Tile {
  static constexpr int kThreads = THREADS_;
  static constexpr int kItems = IPT_;
  static constexpr int kTile = THREADS_ * IPT_;
};

constexpr int kMaxTile = 16384;

// Calls f(Tile<...>{}) with the smallest of the standard tiles that holds n
// values (n <= max_tile assumed). 1024..8192 use 8 items per thread; 16384 needs
// 16 because a CTA has at most 1024 threads.
template <int kMinTile = 1024, int kMaxTileAllowed = kMaxTile, class F>
inline cudaError_t dispatch_tile(std::int64_t n, F&& f) {
  if constexpr (kMinTile <= 512) {
    if (n <= 512) return f(Tile<64, 8>{});
  }
  if (n <= 1024) return f(Tile<128, 8>{});
  if (n <= 2048) return f(Tile<256, 8>{});
  if (n <= 4096) return f(Tile<512, 8>{});
  if constexpr (kMaxTileAllowed >= 16384) {
    if (n <= 8192) return f(Tile<1024, 8>{});
    return f(Tile<1024, 16>{});
  } else {
    return f(Tile<1024, 8>{});  // n <= 8192
  }
}

}  // namespace moekit::dedup::detail
