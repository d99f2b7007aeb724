// Variant `slices`: one block of kSliceThreads per (column slice, group of
// kTok consecutive tokens), so a decode batch still spreads over many blocks.
// Each thread reads the group's indices and weights itself (uniform loads: no
// shared memory, no barrier), loads the 16-byte vectors of kRows rows of each
// token before it uses any (all in flight at once), accumulates them with the
// same j-ascending f32 fused multiply-adds as `gather` (bit for bit too) and
// stores one 16-byte vector. kRows is fitted to K (2, 4 or 8): the registers
// of unused rows cost blocks per SM (8 rows at K = 2 held 7 blocks per SM
// and lost 15 % at Mixtral's T 4096: docs/bench/combine-notes.md, "combine:
// launch-shape probe").
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "combine/gather.cuh"
#include "primitives/vec_io.cuh"

namespace moekit::combine::detail {

constexpr int kSliceThreads = 128;

// kVec elements per thread: 16 / sizeof(T) (16-byte loads and stores) or 1.
template <class T, int kVec>
struct SliceVec {
  static constexpr bool kWide = kVec * sizeof(T) == 16;
  using Raw = std::conditional_t<kWide, uint4, T>;
  __device__ static Raw load(const T* p) {
    if constexpr (kWide) return __ldg(reinterpret_cast<const uint4*>(p));
    else return __ldg(p);
  }
  __device__ static float elem(const Raw& r, int v) { return load_f32(reinterpret_cast<const T*>(&r) + v); }
  // acc * s rounded once per element (as store() rounds), written as one
  // 16-byte vector where wide.
  __device__ static void store_scaled(T* p, const float (&acc)[kVec], float s) {
    if constexpr (kWide) {
      uint4 o;
      if constexpr (sizeof(T) == 4) {
        o = make_uint4(__float_as_uint(__fmul_rn(acc[0], s)), __float_as_uint(__fmul_rn(acc[1], s)),
                       __float_as_uint(__fmul_rn(acc[2], s)), __float_as_uint(__fmul_rn(acc[3], s)));
      } else {
        o = make_uint4(pack2(__fmul_rn(acc[0], s), __fmul_rn(acc[1], s)), pack2(__fmul_rn(acc[2], s), __fmul_rn(acc[3], s)),
                       pack2(__fmul_rn(acc[4], s), __fmul_rn(acc[5], s)), pack2(__fmul_rn(acc[6], s), __fmul_rn(acc[7], s)));
      }
      prim::store16_bits(p, o);
    } else {
#pragma unroll
      for (int v = 0; v < kVec; ++v) store(p + v, __fmul_rn(acc[v], s));
    }
  }
  // Two values rounded to nearest even, low half first (store()'s rounding).
  __device__ static std::uint32_t pack2(float lo, float hi) {
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
      return *reinterpret_cast<const std::uint32_t*>(&h);
    } else {
      const __half2 h = __floats2half2_rn(lo, hi);
      return *reinterpret_cast<const std::uint32_t*>(&h);
    }
  }
};

// grid (slices, token groups), gridDim.y-strided beyond 65535 groups.
// @tparam kRows rows of one token loaded before any is used (K in chunks of kRows)
// @tparam kTok  consecutive tokens per block
template <class T, int kVec, int kRows, int kTok>
__global__ void __launch_bounds__(kSliceThreads)
    slices_combine_kernel(const T* __restrict__ x, const std::int32_t* __restrict__ inverse,
                          const float* __restrict__ w, T* __restrict__ out, std::int64_t tokens, int topk,
                          std::int64_t hidden, float scaling) {
  using SV = SliceVec<T, kVec>;
  const std::int64_t c = (std::int64_t(blockIdx.x) * kSliceThreads + threadIdx.x) * kVec;
  prim::pdl_wait();  // expert_out, inverse and weights; out the previous kernel may still read
  for (std::int64_t t0 = std::int64_t(blockIdx.y) * kTok; t0 < tokens; t0 += std::int64_t(gridDim.y) * kTok) {
    float acc[kTok][kVec];
#pragma unroll
    for (int i = 0; i < kTok; ++i)
#pragma unroll
      for (int v = 0; v < kVec; ++v) acc[i][v] = 0.f;
#pragma unroll 1
    for (int j0 = 0; j0 < topk; j0 += kRows) {
      std::int32_t r[kTok][kRows];
      float wt[kTok][kRows];
#pragma unroll
      for (int i = 0; i < kTok; ++i)
#pragma unroll
        for (int u = 0; u < kRows; ++u) {
          const bool ok = j0 + u < topk && t0 + i < tokens;
          const std::int64_t slot = (t0 + i) * topk + j0 + u;
          r[i][u] = ok ? __ldg(inverse + slot) : -1;
          wt[i][u] = ok ? __ldg(w + slot) : 0.f;
        }
      typename SV::Raw raw[kTok][kRows];
#pragma unroll
      for (int i = 0; i < kTok; ++i)
#pragma unroll
        for (int u = 0; u < kRows; ++u)
          if (r[i][u] >= 0 && c < hidden) raw[i][u] = SV::load(x + std::int64_t(r[i][u]) * hidden + c);
#pragma unroll
      for (int i = 0; i < kTok; ++i)
#pragma unroll
        for (int u = 0; u < kRows; ++u)
          if (r[i][u] >= 0) {
#pragma unroll
            for (int v = 0; v < kVec; ++v) acc[i][v] = __fmaf_rn(wt[i][u], SV::elem(raw[i][u], v), acc[i][v]);
          }
    }
#pragma unroll
    for (int i = 0; i < kTok; ++i)
      if (c < hidden && t0 + i < tokens) SV::store_scaled(out + (t0 + i) * hidden + c, acc[i], scaling);
  }
  // At exit: the grid is many waves past a few hundred tokens (primitives/pdl.cuh).
  prim::pdl_launch_dependents();
}

}  // namespace moekit::combine::detail
