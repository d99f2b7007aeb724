// Device-side building blocks shared by the align variants: the kernel
// argument pack, id -> local expert conversion, 16-byte id loads, 16-byte
// padding fills, warp/block scans and the expert_ids writer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "align/align.hpp"
#include "common/cuda_check.cuh"

namespace moekit::align::detail {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// Everything a kernel needs, by value. Sizes fit int32 (make_problem checks the
// block-rounded range), so in-kernel positions are int32; loop counters that
// step past the end use int64 so they never wrap.
struct Args {
  const void* ids;
  const std::int32_t* map;  // nullptr: no map
  std::int32_t* sorted;
  std::int32_t* eids;
  std::int32_t* total;
  std::int32_t numel;
  std::int32_t num_experts;
  std::int32_t block_size;
  std::int32_t map_size;
  std::int32_t max_padded;
  std::int32_t max_blocks;
};

inline Args make_args(const Problem& p, const Buffers& b) {
  Args a;
  a.ids = b.topk_ids;
  a.map = p.map_size > 0 ? b.expert_map : nullptr;
  a.sorted = b.sorted_token_ids;
  a.eids = b.expert_ids;
  a.total = b.num_tokens_post_pad;
  a.numel = static_cast<std::int32_t>(p.numel);
  a.num_experts = p.num_experts;
  a.block_size = p.block_size;
  a.map_size = p.map_size;
  a.max_padded = static_cast<std::int32_t>(p.max_num_tokens_padded);
  a.max_blocks = static_cast<std::int32_t>(p.max_num_blocks);
  return a;
}

// Local expert of a raw id, or -1 when the slot is dropped. The unsigned
// compare rejects negative ids and ids past the bound in one test.
template <class IdT>
__device__ __forceinline__ int expert_of(IdT raw, const Args& a) {
  using U = std::make_unsigned_t<IdT>;
  if (a.map != nullptr) {
    if (static_cast<U>(raw) >= static_cast<U>(a.map_size)) return -1;
    const int m = __ldg(a.map + static_cast<std::int64_t>(raw));
    return static_cast<unsigned>(m) < static_cast<unsigned>(a.num_experts) ? m : -1;
  }
  return static_cast<U>(raw) < static_cast<U>(a.num_experts) ? static_cast<int>(raw) : -1;
}

template <class IdT>
__device__ __forceinline__ int expert_at(const Args& a, std::int64_t i) {
  return expert_of(__ldg(static_cast<const IdT*>(a.ids) + i), a);
}

// Ids per 16-byte load.
template <class IdT>
constexpr int kVec = 16 / static_cast<int>(sizeof(IdT));

__device__ __forceinline__ bool ids_aligned16(const Args& a) {
  return (reinterpret_cast<std::uintptr_t>(a.ids) & 15) == 0;
}

// Local experts of slots first .. first+kVec-1 (first is a multiple of kVec);
// -1 past numel. One 16-byte load when the pointer is aligned and the whole
// vector is in range.
template <class IdT>
__device__ __forceinline__ void load_experts(const Args& a, std::int64_t first, bool aligned,
                                             int (&e)[kVec<IdT>]) {
  const IdT* ids = static_cast<const IdT*>(a.ids);
  if (aligned && first + kVec<IdT> <= a.numel) {
    if constexpr (sizeof(IdT) == 4) {
      const int4 v = __ldg(reinterpret_cast<const int4*>(ids + first));
      e[0] = expert_of<IdT>(v.x, a);
      e[1] = expert_of<IdT>(v.y, a);
      e[2] = expert_of<IdT>(v.z, a);
      e[3] = expert_of<IdT>(v.w, a);
    } else {
      const longlong2 v = __ldg(reinterpret_cast<const longlong2*>(ids + first));
      e[0] = expert_of<IdT>(static_cast<IdT>(v.x), a);
      e[1] = expert_of<IdT>(static_cast<IdT>(v.y), a);
    }
  } else {
#pragma unroll
    for (int k = 0; k < kVec<IdT>; ++k)
      e[k] = first + k < a.numel ? expert_at<IdT>(a, first + k) : -1;
  }
}

// dst[lo, hi) = v by threads t of nt, 16-byte stores in the aligned middle.
// Every row index fits int32 (make_problem), so the math is 32-bit, and the
// unaligned head and tail share one rolled loop: this is inlined at many call
// sites of short kernels, where code size costs instruction fetches.
__device__ __forceinline__ void fill_range(std::int32_t* dst, std::int64_t lo64, std::int64_t hi64,
                                           std::int32_t v, std::int64_t t64, std::int64_t nt64) {
  const int lo = static_cast<int>(lo64), hi = static_cast<int>(hi64);
  const int t = static_cast<int>(t64), nt = static_cast<int>(nt64);
  if (lo >= hi) return;
  const int mis = static_cast<int>((reinterpret_cast<std::uintptr_t>(dst + lo) & 15) / 4);
  const int head = min(hi - lo, (4 - mis) & 3);
  const int mid = lo + head;
  const int nvec = (hi - mid) >> 2;
  const int tail = mid + 4 * nvec;
  const int nscalar = head + (hi - tail);
#pragma unroll 1
  for (int k = t; k < nscalar; k += nt) dst[k < head ? lo + k : tail + (k - head)] = v;
  int4* q = reinterpret_cast<int4*>(dst + mid);
  const int4 vv = make_int4(v, v, v, v);
#pragma unroll 1
  for (int i = t; i < nvec; i += nt) q[i] = vv;
}

// Plain element-by-element fill, for the variants that predate vector padding.
__device__ __forceinline__ void fill_range_scalar(std::int32_t* dst, std::int64_t lo,
                                                  std::int64_t hi, std::int32_t v, std::int64_t t,
                                                  std::int64_t nt) {
  for (std::int64_t i = lo + t; i < hi; i += nt) dst[i] = v;
}

__device__ __forceinline__ int padded(int count, int block_size) {
  return (count + block_size - 1) / block_size * block_size;
}

__device__ __forceinline__ int warp_inclusive_scan(int v) {
  const int lane = threadIdx.x & (kWarp - 1);
#pragma unroll
  for (int d = 1; d < kWarp; d <<= 1) {
    const int n = __shfl_up_sync(kFullMask, v, d);
    if (lane >= d) v += n;
  }
  return v;
}

__device__ __forceinline__ unsigned lanemask_lt() {
  return (1u << (threadIdx.x & (kWarp - 1))) - 1u;
}

// Bits that tell experts 0..E-1 apart.
__device__ __forceinline__ int expert_bits(int num_experts) {
  return num_experts > 1 ? 32 - __clz(num_experts - 1) : 0;
}

// Lanes of the warp holding the same expert as this lane, by one ballot per
// expert bit (plus one for validity). __match_any_sync gives the same mask but
// its cost grows with the number of distinct values in the warp; this costs
// log2(E)+1 votes whatever the data. Every lane of the warp must call it.
__device__ __forceinline__ unsigned warp_peers(int e, int nbits) {
  const unsigned valid = __ballot_sync(kFullMask, e >= 0);
  unsigned peers = e >= 0 ? valid : ~valid;
  for (int bit = 0; bit < nbits; ++bit) {
    const bool set = (e >> bit) & 1;
    const unsigned m = __ballot_sync(kFullMask, set);
    peers &= set ? m : ~m;
  }
  return peers;
}

// In-place exclusive scan of data[0, n) by the whole block; data[n] = total,
// which is also returned. Each thread owns a contiguous chunk, so n may exceed
// blockDim (E up to 16384); the chunk sums go through a two-level warp scan
// (3 barriers whatever n is). blockDim must be a multiple of 32.
// warp_sums: 33 ints of shared memory.
__device__ __forceinline__ int block_exclusive_scan(int* data, int n, int* warp_sums) {
  const int t = threadIdx.x;
  const int nt = blockDim.x;
  const int lane = t & (kWarp - 1);
  const int w = t / kWarp;
  const int nw = nt / kWarp;
  const int per = (n + nt - 1) / nt;
  const int lo = min(t * per, n);
  const int hi = min(lo + per, n);
  int s = 0;
  for (int i = lo; i < hi; ++i) s += data[i];
  const int incl = warp_inclusive_scan(s);
  if (lane == kWarp - 1) warp_sums[w] = incl;
  __syncthreads();
  if (w == 0) {
    const int v = lane < nw ? warp_sums[lane] : 0;
    const int inc = warp_inclusive_scan(v);
    warp_sums[lane] = inc - v;
    if (lane == kWarp - 1) warp_sums[kWarp] = inc;
  }
  __syncthreads();
  int run = warp_sums[w] + incl - s;
  for (int i = lo; i < hi; ++i) {
    const int x = data[i];
    data[i] = run;
    run += x;
  }
  const int total = warp_sums[kWarp];
  if (t == 0) data[n] = total;
  __syncthreads();
  return total;
}

// Owner of row `pos` < total: the last expert e with cs[e] <= pos (empty
// experts share their start with the next one, so "last" skips them).
__device__ __forceinline__ int owner_of(const int* cs, int num_experts, int pos) {
  int lo = 0, hi = num_experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (cs[mid] <= pos)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// expert_ids[j] for j in [j0, j1): the owner by binary search over the scan, -1
// past num_tokens_post_pad / B. cs has E+1 entries (cs[E] = total).
__device__ __forceinline__ void write_expert_ids(const Args& a, const int* cs, std::int64_t j0,
                                                 std::int64_t j1, std::int64_t t,
                                                 std::int64_t nt) {
  const int used = cs[a.num_experts] / a.block_size;
  if (j1 > a.max_blocks) j1 = a.max_blocks;
  for (std::int64_t j = j0 + t; j < j1; j += nt)
    a.eids[j] = j < used ? owner_of(cs, a.num_experts, static_cast<int>(j) * a.block_size) : -1;
}

// The part of the non-slot output that block b of G writes once every block
// knows the scan cs (E + 1 entries): the padding rows of experts
// [E*b/G, E*(b+1)/G) (one warp per expert, at most B-1 rows each), a 1/G slice
// of the tail [total, max_padded), and a 1/G slice of expert_ids. These rows
// never hold a slot, so no ordering with the slot writes is needed.
// count(e): slots of expert e.
template <class CountFn>
__device__ __forceinline__ void write_share(const Args& a, const int* cs, int b, int G,
                                            CountFn count) {
  const int t = threadIdx.x, nt = blockDim.x;
  const int lane = t & (kWarp - 1), w = t / kWarp, nw = nt / kWarp;
  const int E = a.num_experts;
  const int e0 = static_cast<int>(static_cast<std::int64_t>(E) * b / G);
  const int e1 = static_cast<int>(static_cast<std::int64_t>(E) * (b + 1) / G);
  for (int e = e0 + w; e < e1; e += nw) {
    const std::int64_t lo = static_cast<std::int64_t>(cs[e]) + count(e);
    const std::int64_t hi = min(cs[e + 1], a.max_padded);
    fill_range(a.sorted, lo, hi, a.numel, lane, kWarp);
  }
  const std::int64_t total = cs[E];
  const std::int64_t tail = a.max_padded > total ? a.max_padded - total : 0;
  const std::int64_t tchunk = (tail + G - 1) / G;
  const std::int64_t tlo = total + tchunk * b;
  fill_range(a.sorted, tlo, min(tlo + tchunk, static_cast<std::int64_t>(a.max_padded)), a.numel,
             t, nt);
  const std::int64_t jchunk = (static_cast<std::int64_t>(a.max_blocks) + G - 1) / G;
  write_expert_ids(a, cs, jchunk * b, jchunk * (b + 1), t, nt);
}

}  // namespace moekit::align::detail
