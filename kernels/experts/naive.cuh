// naive: the plain SIMT baseline, every architecture. One warp per output
// element: gemm1 computes a row's gate and up dot products over H (lanes
// strided over H, a warp reduction) and applies the activation; gemm2 one
// element of y over I. No tiling, no reuse of a weight row across rows.
#pragma once

#include <cstdint>

#include "experts/act.cuh"
#include "primitives/pdl.cuh"

namespace moekit::experts::naive {

constexpr int kWarps = 8;  // warps per block: output columns per block

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// grid (rows, ceil(I / kWarps)); a [rows, I] of the dtype. x: the layout's
// rows [rows, H], or (kGather: `gather`'s fallback, padded layout) hidden
// [T, H], row r reading token sorted_token_ids[r] / K.
template <class T, bool kGather = false>
__global__ void __launch_bounds__(kWarps * 32) gemm1_act_kernel(const T* __restrict__ x, const T* __restrict__ w1,
                                                                 T* __restrict__ a, RowMap m, int experts,
                                                                 std::int64_t H, std::int64_t I, Act act,
                                                                 W1Layout layout) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  const std::int64_t r = blockIdx.x;
  const std::int64_t i = std::int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int e = row_expert(m, experts, r);
  if (e < 0 || i >= I) return;
  const T* xr = kGather ? x + std::int64_t(m.sorted_token_ids[r] / m.topk) * H : x + r * H;  // a real row (e >= 0)
  const T* g = w1 + (std::int64_t(e) * 2 * I + gate_row(layout, i, I)) * H;
  const T* u = w1 + (std::int64_t(e) * 2 * I + up_row(layout, i, I)) * H;
  float sg = 0.0f, su = 0.0f;
  for (std::int64_t k = lane; k < H; k += 32) {
    const float xv = to_f32(xr[k]);
    sg += xv * to_f32(g[k]);
    su += xv * to_f32(u[k]);
  }
  sg = warp_sum(sg);
  su = warp_sum(su);
  if (lane == 0) {
    const float hg = to_f32(from_f32<T>(sg)), hu = to_f32(from_f32<T>(su));  // h rounded to the dtype
    a[r * I + i] = from_f32<T>(act_and_mul(act, hg, hu));
  }
}

// grid (rows, ceil(H / kWarps)); y [rows, H].
template <class T>
__global__ void __launch_bounds__(kWarps * 32) gemm2_kernel(const T* __restrict__ a, const T* __restrict__ w2,
                                                             T* __restrict__ y, RowMap m, int experts,
                                                             std::int64_t H, std::int64_t I) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  const std::int64_t r = blockIdx.x;
  const std::int64_t h = std::int64_t(blockIdx.y) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int e = row_expert(m, experts, r);
  if (e < 0 || h >= H) return;
  const T* ar = a + r * I;
  const T* w = w2 + (std::int64_t(e) * H + h) * I;
  float s = 0.0f;
  for (std::int64_t k = lane; k < I; k += 32) s += to_f32(ar[k]) * to_f32(w[k]);
  s = warp_sum(s);
  if (lane == 0) y[r * H + h] = from_f32<T>(s);
}

}  // namespace moekit::experts::naive
