// Variant `fused`: ONE launch for align and the data. align's `tiny` kernel
// ranks every slot inside its expert and places the slots of the experts
// whose rows start in its chunk; PermutePlace (its placement hook) then has
// the same block copy exactly those slots' token rows, zero the padding rows
// of its chunk, write inverse and, in the compact layout, the expert offsets.
// Blocks agree without talking: each slot is placed (and copied) by the one
// block that owns its expert's first row, with that block's ranks.
//
// Built for decode: few slots, many blocks of few rows each, so the copies
// spread over the GPU; a hot expert's rows all go to one block, which is why
// `auto` keeps it to small inputs (policy.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "align/args.cuh"
#include "align/tiny_kernel.cuh"
#include "primitives/fast_div.hpp"

namespace moekit::permute::detail {

constexpr int kFusedUnroll = 8;  // vectors in flight per thread in the copy

// align's tiny_kernel placement hook (align/tiny_kernel.cuh, "Placement
// hooks"). Shared memory after tiny's: two counters (placed slots, padding ranges),
// then (token, row) per placed slot and (first, end) per padding range.
template <class V>
struct PermutePlace {
  struct Params {
    const V* hidden;
    V* permuted;
    std::int32_t* inverse;
    std::int64_t* offsets;  // compact layout; nullptr for padded
    int topk;
    std::uint32_t row_vecs;
    prim::FastDivU32 div_row_vecs;
  };

  static constexpr std::size_t extra_smem(std::int64_t numel, int experts) {
    return 16 + 8 * (static_cast<std::size_t>(numel) + static_cast<std::size_t>(experts));
  }

  __device__ static void begin(const Params&, char* extra) {
    if (threadIdx.x < 2) reinterpret_cast<int*>(extra)[threadIdx.x] = 0;
  }

  __device__ static void padding(const Params&, char* extra, int numel, int lo, int hi) {
    int2* ranges = reinterpret_cast<int2*>(extra + 16) + numel;
    ranges[atomicAdd(reinterpret_cast<int*>(extra) + 1, 1)] = make_int2(lo, hi);
  }

  template <int kThreads>
  __device__ static void finish(const align::Args& a, const Params& pp, char* extra, const int* slot,
                                const int* cs, int r0, int r1, int total) {
    using align::kTinyExpertBits;
    using align::kTinyExpertMask;
    int* counters = reinterpret_cast<int*>(extra);
    int2* list = reinterpret_cast<int2*>(extra + 16);
    const int2* ranges = list + a.numel;
    const int t = threadIdx.x;
#pragma unroll 1
    for (int i = t; i < a.numel; i += kThreads) {
      const int v = slot[i];
      if (v < 0) {
        if (blockIdx.x == 0) pp.inverse[i] = -1;
        continue;
      }
      const int st = cs[v & kTinyExpertMask];
      if (st < r0 || st >= r1) continue;
      const int row = st + (v >> kTinyExpertBits);
      pp.inverse[i] = row;
      list[atomicAdd(counters, 1)] = make_int2(i / pp.topk, row);
    }
    if (pp.offsets != nullptr && blockIdx.x == 0) {
#pragma unroll 1
      for (int e = t; e <= a.num_experts; e += kThreads) pp.offsets[e] = e < a.num_experts ? cs[e] : total;
    }
    __syncthreads();
    const std::uint32_t nv = pp.row_vecs;
    const std::uint32_t items = static_cast<std::uint32_t>(counters[0]) * nv;
    // Flattened (placed slot, vector) pairs: a decode block with 4 rows of
    // 900 vectors still gives every thread work and kFusedUnroll loads in flight.
#pragma unroll 1
    for (std::uint32_t base = t; base < items; base += kThreads * kFusedUnroll) {
      V v[kFusedUnroll];
      std::int64_t dst[kFusedUnroll];
#pragma unroll
      for (int u = 0; u < kFusedUnroll; ++u) {
        const std::uint32_t k = base + u * kThreads;
        if (k < items) {
          const std::uint32_t p = pp.div_row_vecs.div(k);
          const std::uint32_t c = k - p * nv;
          const int2 e = list[p];
          v[u] = __ldg(pp.hidden + std::int64_t(e.x) * nv + c);
          dst[u] = std::int64_t(e.y) * nv + c;
        }
      }
#pragma unroll
      for (int u = 0; u < kFusedUnroll; ++u)
        if (base + u * kThreads < items) pp.permuted[dst[u]] = v[u];
    }
    const int nranges = counters[1];
#pragma unroll 1
    for (int k = 0; k < nranges; ++k) {
      const int2 rg = ranges[k];  // contiguous rows: one contiguous span of vectors
      V* out = pp.permuted + std::int64_t(rg.x) * nv;
      const std::int64_t n = std::int64_t(rg.y - rg.x) * nv;
#pragma unroll 1
      for (std::int64_t i = t; i < n; i += kThreads) out[i] = V{};
    }
  }
};

}  // namespace moekit::permute::detail
