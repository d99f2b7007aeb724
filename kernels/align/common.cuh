// Device-side building blocks shared by the align variants: id -> local
// expert conversion, 16-byte id loads and the expert_ids writer (the kernel
// argument pack: args.cuh); scans, fills and lane masks come from
// kernels/primitives.
// Comments here keep µs figures: 6 lines (why alternative designs lost; not thresholds).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "align/align.hpp"
#include "align/args.cuh"
#include "common/cuda_check.cuh"
#include "primitives/block_scan.cuh"
#include "primitives/fill.cuh"
#include "primitives/lane_mask.cuh"
#include "primitives/flag.cuh"
#include "primitives/pdl.cuh"
#include "primitives/vec_io.cuh"
#include "primitives/warp_peers.cuh"
#include "primitives/warp_scan.cuh"

namespace moekit::align::detail {

constexpr int kWarp = prim::kWarpThreads;
constexpr unsigned kFullMask = prim::kFullWarpMask;

using prim::block_exclusive_scan;
using prim::fill_range;
using prim::fill_range_scalar;
using prim::lanemask_lt;
using prim::warp_inclusive_scan;
using prim::warp_peers;
using prim::warp_peers_below;

// Bits that tell experts 0..E-1 apart (for warp_peers).
__device__ __forceinline__ int expert_bits(int num_experts) { return prim::key_bits(num_experts); }

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
constexpr int kVec = prim::kVec16<IdT>;

__device__ __forceinline__ bool ids_aligned16(const Args& a) { return prim::is_aligned16(a.ids); }

// Local experts of raw ids, -1 for a dropped slot: an id outside [0, E)
// (outside [0, map_size) with a map, or mapped outside [0, E)); callers mark
// slots past numel with IdT(-1). The map gathers are all issued before any
// result is checked.
template <class IdT, int kN>
__device__ __forceinline__ void experts_of(const Args& a, const IdT (&raw)[kN], int (&ev)[kN]) {
  using U = std::make_unsigned_t<IdT>;
  if (a.map == nullptr) {
#pragma unroll
    for (int k = 0; k < kN; ++k)
      ev[k] = static_cast<U>(raw[k]) < static_cast<U>(a.num_experts) ? static_cast<int>(raw[k]) : -1;
    return;
  }
#pragma unroll
  for (int k = 0; k < kN; ++k)
    ev[k] = static_cast<U>(raw[k]) < static_cast<U>(a.map_size) ? __ldg(a.map + static_cast<std::int64_t>(raw[k])) : -1;
#pragma unroll
  for (int k = 0; k < kN; ++k) ev[k] = static_cast<unsigned>(ev[k]) < static_cast<unsigned>(a.num_experts) ? ev[k] : -1;
}

// The loaders below issue every id load of a thread before any id is used.
// (Converting each id right where it was loaded, inside the bounds check's
// branch, made a warp wait for each load before issuing the next: one
// memory latency per load of the thread. Fixing it took solo at 4096 / 8192
// slots of E = 8 from 3.67 / 6.36 us to 3.26 / 5.25: align-notes.md "id
// loads".)

// Local experts of slots first + k * stride, k < kL (-1 past numel): scalar
// loads, coalesced across the threads.
template <class IdT, int kL>
__device__ __forceinline__ void load_experts_strided(const Args& a, int first, int stride, int (&ev)[kL]) {
  const IdT* ids = static_cast<const IdT*>(a.ids);
  IdT raw[kL];
#pragma unroll
  for (int k = 0; k < kL; ++k) {
    const std::int64_t i = first + static_cast<std::int64_t>(k) * stride;
    raw[k] = i < a.numel ? __ldg(ids + i) : IdT(-1);
  }
  experts_of<IdT>(a, raw, ev);
}

// Local experts of the kU vectors of slots first + u * step .. + kVec-1
// (first and step multiples of kVec); -1 past numel. One 16-byte load per
// vector when the pointer is aligned and the whole vector is in range.
template <class IdT, int kU>
__device__ __forceinline__ void load_experts(const Args& a, std::int64_t first, std::int64_t step, bool aligned,
                                             int (&e)[kU][kVec<IdT>]) {
  constexpr int V = kVec<IdT>;
  const IdT* ids = static_cast<const IdT*>(a.ids);
  IdT raw[kU * V];
#pragma unroll
  for (int u = 0; u < kU; ++u) {
    const std::int64_t f = first + u * step;
    if (aligned && f + V <= a.numel) {
      if constexpr (sizeof(IdT) == 4) {
        const int4 v = prim::load16_ldg(ids + f);
        raw[u * V] = v.x;
        raw[u * V + 1] = v.y;
        raw[u * V + 2] = v.z;
        raw[u * V + 3] = v.w;
      } else {
        const longlong2 v = prim::load16_ldg(ids + f);
        raw[u * V] = static_cast<IdT>(v.x);
        raw[u * V + 1] = static_cast<IdT>(v.y);
      }
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) raw[u * V + k] = f + k < a.numel ? __ldg(ids + f + k) : IdT(-1);
    }
  }
  int ev[kU * V];
  experts_of<IdT>(a, raw, ev);
#pragma unroll
  for (int u = 0; u < kU; ++u)
#pragma unroll
    for (int k = 0; k < V; ++k) e[u][k] = ev[u * V + k];
}

// One vector: slots first .. first+kVec-1.
template <class IdT>
__device__ __forceinline__ void load_experts(const Args& a, std::int64_t first, bool aligned, int (&e)[kVec<IdT>]) {
  int ev[1][kVec<IdT>];
  load_experts<IdT, 1>(a, first, 0, aligned, ev);
#pragma unroll
  for (int k = 0; k < kVec<IdT>; ++k) e[k] = ev[0][k];
}

// Where a one-block decode kernel (micro, solo) lets the next grid launch
// under PDL: right after its pdl_wait() (the rule of primitives/pdl.cuh), or
// after its layout, before its stores, as SGLang's one-CTA kernel does. Late
// was faster for the short launches (H100, PDL on, same call: one token
// 1.29 -> 1.12-1.13 us, 32 slots 1.27 -> 1.10, 128 slots of E = 256-4096
// 1.65-1.77 -> 1.57-1.68, solo at 128 slots of E = 8 1.28 -> 1.18) and
// slower for longer ones (micro at 256 slots 2.83 -> 2.95, solo at 384
// slots of E = 64 1.58 -> 1.65, at 2048 slots 2.06 -> 2.32; stripe at 512
// slots 1.84 -> 2.02): align-notes.md "PDL trigger". Only with PDL on (the
// trigger does nothing without it: `pdl`, the launch's). Host side.
inline bool pdl_late_trigger(const Problem& p, bool pdl, std::int64_t late_max_slots) {
  return pdl && p.numel <= late_max_slots;
}

__device__ __forceinline__ int padded(int count, int block_size) {
  return (count + block_size - 1) / block_size * block_size;
}

// Division by the block size B. kPow2: B is known to be a power of two, so
// only shifts are compiled (a launcher picks this instantiation when it is);
// otherwise a shift when B is a power of two (the usual case), else a real
// division (~20 dependent instructions, paid per use). In a launch this short
// the code of the unused path costs too: instruction fetches (`micro` is
// 12.7 KB of SASS with it, 10.4 without).
template <bool kPow2 = false>
struct DivB {
  int B, shift;  // shift < 0: B is not a power of two (only when !kPow2)
  __device__ __forceinline__ bool pow2() const { return kPow2 || shift >= 0; }
  __device__ __forceinline__ int div(int x) const { return pow2() ? x >> shift : x / B; }
  // ceil(x / B) for 0 <= x < 2^31, in unsigned arithmetic (x + B - 1 may pass 2^31).
  __device__ __forceinline__ int div_up(int x) const {
    const unsigned u = static_cast<unsigned>(x) + static_cast<unsigned>(B) - 1u;
    return static_cast<int>(pow2() ? u >> shift : u / static_cast<unsigned>(B));
  }
  __device__ __forceinline__ int pad(int c) const { return pow2() ? (c + B - 1) & -B : padded(c, B); }
};

template <bool kPow2 = false>
__device__ __forceinline__ DivB<kPow2> make_divb(int b) {
  return DivB<kPow2>{b, (b & (b - 1)) == 0 ? __ffs(b) - 1 : -1};
}

// Host side: whether the pow2 instantiation applies.
inline bool is_pow2(int b) { return b > 0 && (b & (b - 1)) == 0; }

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
