// Kernels and launcher of the combine launch-shape probe (bench/tune/combine_probe.cpp
// drives them; this file holds only device code and its launch).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "combine_probe.hpp"
#include "common/device.hpp"
#include "primitives/launch.cuh"
#include "primitives/pdl.cuh"

using namespace moekit;

namespace moekit::probe {


using bf16 = __nv_bfloat16;

__device__ __forceinline__ void unpack8(const uint4& r, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __bfloat1622float2(h[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// Round 2: kRows rows of kTok consecutive tokens loaded before any is used;
// kPre: the first group's indices and weights read before pdl_wait (legal
// only when the previous launch did not write them); kEnd: trigger at exit.
template <int kThreads, int kRows, int kTok, bool kPre, bool kEnd>
__global__ void __launch_bounds__(kThreads)
    group_kernel(const bf16* __restrict__ x, const std::int32_t* __restrict__ inv, const float* __restrict__ w,
                 bf16* __restrict__ out, int tokens, int topk, int hidden, float s) {
  const int c = (blockIdx.x * kThreads + threadIdx.x) * 8;
  int t0 = blockIdx.y * kTok;
  std::int32_t r[kTok][kRows];
  float wt[kTok][kRows];
  auto load_idx = [&](int tg, int j0) {
#pragma unroll
    for (int i = 0; i < kTok; ++i)
#pragma unroll
      for (int u = 0; u < kRows; ++u) {
        const int j = j0 + u, t = tg + i;
        const bool ok = j < topk && t < tokens;
        r[i][u] = ok ? __ldg(inv + t * topk + j) : -1;
        wt[i][u] = ok ? __ldg(w + t * topk + j) : 0.f;
      }
  };
  bool have = false;
  if constexpr (kPre) {
    load_idx(t0, 0);
    have = true;
  }
  prim::pdl_wait();
  if constexpr (!kEnd) prim::pdl_launch_dependents();
  for (; t0 < tokens; t0 += gridDim.y * kTok) {
    float acc[kTok][8];
#pragma unroll
    for (int i = 0; i < kTok; ++i)
#pragma unroll
      for (int v = 0; v < 8; ++v) acc[i][v] = 0.f;
#pragma unroll 1
    for (int j0 = 0; j0 < topk; j0 += kRows) {
      if (!have) load_idx(t0, j0);
      have = false;
      uint4 raw[kTok][kRows];
#pragma unroll
      for (int i = 0; i < kTok; ++i)
#pragma unroll
        for (int u = 0; u < kRows; ++u)
          if (r[i][u] >= 0 && c < hidden)
            raw[i][u] = __ldg(reinterpret_cast<const uint4*>(x + std::int64_t(r[i][u]) * hidden + c));
#pragma unroll
      for (int i = 0; i < kTok; ++i)
#pragma unroll
        for (int u = 0; u < kRows; ++u)
          if (r[i][u] >= 0) {
            float f[8];
            unpack8(raw[i][u], f);
#pragma unroll
            for (int v = 0; v < 8; ++v) acc[i][v] = __fmaf_rn(wt[i][u], f[v], acc[i][v]);
          }
    }
#pragma unroll
    for (int i = 0; i < kTok; ++i)
      if (c < hidden && t0 + i < tokens) {
        uint4 o;
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
        for (int q = 0; q < 4; ++q)
          h[q] = __floats2bfloat162_rn(__fmul_rn(acc[i][2 * q], s), __fmul_rn(acc[i][2 * q + 1], s));
        *reinterpret_cast<uint4*>(out + std::int64_t(t0 + i) * hidden + c) = o;
      }
  }
  if constexpr (kEnd) prim::pdl_launch_dependents();
}

template <int kThreads, int kRows, int kTok, bool kPre, bool kEnd>
cudaError_t launch_group(const combine::Problem& p, const combine::Buffers& b, cudaStream_t s, bool pdl, int cap) {
  const int hidden = int(p.hidden);
  const int slices = (hidden + kThreads * 8 - 1) / (kThreads * 8);
  const std::int64_t groups = (p.tokens + kTok - 1) / kTok;
  int gy = int(std::min<std::int64_t>(groups, 65535));
  if (cap > 0) gy = std::max(1, std::min(gy, cap * device_caps().sm_count / slices));
  return prim::launch_ex(group_kernel<kThreads, kRows, kTok, kPre, kEnd>, dim3(slices, gy), dim3(kThreads), 0, s,
                         prim::pdl_attrs(pdl), static_cast<const bf16*>(b.expert_out), b.inverse, b.weights,
                         static_cast<bf16*>(b.out), int(p.tokens), p.topk, hidden, p.scaling);
}

// rows: 0 = fitted to K (2 for K <= 2, else 8)
template <int kThreads, int kRowsFixed, int kTok, bool kPre, bool kEnd, int kCap>
cudaError_t cand(const combine::Problem& p, const combine::Buffers& b, cudaStream_t s, bool pdl) {
  if constexpr (kRowsFixed == 0) {
    if (p.topk <= 2) return launch_group<kThreads, 2, kTok, kPre, kEnd>(p, b, s, pdl, kCap);
    return launch_group<kThreads, 8, kTok, kPre, kEnd>(p, b, s, pdl, kCap);
  } else {
    return launch_group<kThreads, kRowsFixed, kTok, kPre, kEnd>(p, b, s, pdl, kCap);
  }
}

const Cand kRound2[] = {
    {"b128", cand<128, 8, 1, false, true, 0>},
    {"b128-pre", cand<128, 8, 1, true, true, 0>},
    {"f128", cand<128, 0, 1, false, true, 0>},
    {"f128-pre", cand<128, 0, 1, true, true, 0>},
    {"f128-pre-start", cand<128, 0, 1, true, false, 0>},
    {"f128-t2", cand<128, 0, 2, false, true, 0>},
    {"f128-t2-pre", cand<128, 0, 2, true, true, 0>},
    {"f128-t4", cand<128, 0, 4, false, true, 0>},
    {"f128-t4-pre", cand<128, 0, 4, true, true, 0>},
    {"f256-t2-pre", cand<256, 0, 2, true, true, 0>},
    {"f128-cap16", cand<128, 0, 1, false, false, 16>},
    {"f128-t2-cap8", cand<128, 0, 2, false, false, 8>},
};

std::span<const Cand> candidates() { return kRound2; }

}  // namespace moekit::probe
