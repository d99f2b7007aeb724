// Variant `warp-regs` (the register top-k): one warp per token, lane l holds
// the N = E/32 (rounded up to a power of two) consecutive experts
// [l*N, l*N + N) in registers, loaded with 8- or 16-byte vectors where the row
// allows. Each of the K picks is one warp arg-max of the lanes' local bests
// (5 butterfly steps); only the winning lane rescans its N values.
//
// Groups: where a group is whole lanes (E = 32N, E/G a multiple of N, E/(G N)
// a power of two) the group scores are butterfly merges of the lanes' local
// top two, with no shared memory; otherwise the row goes through shared memory
// (select_groups).
#pragma once

#include <type_traits>

#include "primitives/pdl.cuh"
#include "primitives/warp_reduce.cuh"
#include "route/common.cuh"

namespace moekit::route::detail {

constexpr int kRegsMaxPerLane = 16;      // E <= 512
constexpr int kRegsMaxTopk = 32;         // pick j is kept by lane j
constexpr int kRegsWarpsPerBlock = 4;

// Chunks of N values of T load as whole 8- or 16-byte vectors.
template <class T, int N>
inline constexpr bool kVectorChunk = (N * sizeof(T)) % 8 == 0;

// N values of T from p (aligned to the vector when kVec) as f32.
template <class T, int N, bool kVec>
__device__ __forceinline__ void load_row_chunk(const T* p, int valid, float (&x)[N]) {
  if constexpr (kVec) {
    constexpr int kBytes = N * sizeof(T);
    static_assert(kVectorChunk<T, N>, "chunk must split into 8- or 16-byte vectors");
    constexpr int kVecBytes = kBytes % 16 == 0 ? 16 : 8;
    using V = std::conditional_t<kVecBytes == 16, uint4, uint2>;
    constexpr int kPer = kVecBytes / sizeof(T);
    if (valid > 0) {
#pragma unroll
      for (int v = 0; v < N / kPer; ++v) {
        const V raw = __ldg(reinterpret_cast<const V*>(p) + v);
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int k = 0; k < kPer; ++k) x[v * kPer + k] = to_f32(e[k]);
      }
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) x[j] = kNegInf;
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) x[j] = j < valid ? to_f32(p[j]) : kNegInf;
  }
}

// Top two of (a1 >= a2) and (b1 >= b2).
__device__ __forceinline__ void merge_top2(float& a1, float& a2, float b1, float b2) {
  if (a1 >= b1) a2 = fmaxf(a2, b1);
  else a2 = fmaxf(a1, b2), a1 = b1;
}

template <class T, Scoring S, int N, bool kVec, bool kLaneGroups>
__global__ void __launch_bounds__(kRegsWarpsPerBlock * 32) warp_regs_kernel(Args a) {
  extern __shared__ float smem[];  // generic groups only: E + 2G words per warp
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t = blockIdx.x * kRegsWarpsPerBlock + warp;
  prim::pdl_wait();
  if (t >= a.tokens) {
    prim::pdl_launch_dependents();
    return;
  }
  const int E = a.experts, K = a.topk, base = lane * N;
  const int valid = min(N, max(0, E - base));
  float x[N];
  load_row_chunk<T, N, kVec>(static_cast<const T*>(a.logits) + static_cast<std::int64_t>(t) * E + base, valid, x);
  prim::pdl_launch_dependents();

  float m = kNegInf, sum = 0.f;
  if constexpr (S == Scoring::softmax) {
#pragma unroll
    for (int j = 0; j < N; ++j) m = fmaxf(m, x[j]);
    m = prim::warp_max(m);
#pragma unroll
    for (int j = 0; j < N; ++j) sum += j < valid ? expf(x[j] - m) : 0.f;
    sum = prim::warp_sum(sum);
  }
  float s[N], c[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    s[j] = j < valid ? score<S>(x[j], m, sum) : 0.f;
    c[j] = j < valid ? s[j] + (a.bias ? __ldg(a.bias + base + j) : 0.f) : kNegInf;
  }

  if (a.groups > 1) {
    bool keep;
    if constexpr (kLaneGroups) {
      // A group is L = E / (G N) consecutive lanes: merge their top two.
      const int L = E / a.groups / N;
      float t1 = kNegInf, t2 = kNegInf;
#pragma unroll
      for (int j = 0; j < N; ++j) merge_top2(t1, t2, c[j], kNegInf);
      for (int off = L / 2; off > 0; off >>= 1)
        merge_top2(t1, t2, __shfl_xor_sync(prim::kFullWarpMask, t1, off), __shfl_xor_sync(prim::kFullWarpMask, t2, off));
      float gscore = a.bias != nullptr && E / a.groups >= 2 ? t1 + t2 : t1;
      const int g = lane / L;
      keep = false;
      for (int r = 0; r < a.topk_groups; ++r) {
        const prim::ArgMax best = prim::warp_argmax(prim::ArgMax{gscore, g});
        if (best.i == g) keep = true, gscore = kNegInf;
      }
    } else {
      float* row = smem + warp * (E + 2 * a.groups);
      float* gsc = row + E;
      int* kept = reinterpret_cast<int*>(gsc + a.groups);
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (j < valid) row[base + j] = c[j];
      __syncwarp();
      select_groups(row, gsc, kept, a, a.bias != nullptr);
      keep = true;  // per element below
      const int gs = E / a.groups;
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (j < valid && !kept[(base + j) / gs]) c[j] = kNegInf;
    }
    if (!keep) {
#pragma unroll
      for (int j = 0; j < N; ++j) c[j] = kNegInf;
    }
  }

  // Local best (value, index, score).
  auto local_best = [&](prim::ArgMax& b, float& bs) {
    b = prim::argmax_empty();
    bs = 0.f;
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (c[j] > b.v) b = {c[j], base + j}, bs = s[j];  // ascending j: ties keep the lower index
  };
  prim::ArgMax lb;
  float lbs;
  local_best(lb, lbs);
  int my_id = 0;
  float my_s = 0.f, total = 0.f;
  for (int r = 0; r < K; ++r) {
    const prim::ArgMax best = prim::warp_argmax(lb);
    const int owner = best.i / N;
    const float ps = __shfl_sync(prim::kFullWarpMask, lbs, owner);
    total += ps;
    if (lane == r) my_id = best.i, my_s = ps;
    if (lane == owner) {
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (base + j == best.i) c[j] = kNegInf;
      local_best(lb, lbs);
    }
  }
  if (lane < K) {
    const float scale = a.renormalize ? a.scaling / total : a.scaling;
    a.ids[static_cast<std::int64_t>(t) * K + lane] = my_id;
    a.weights[static_cast<std::int64_t>(t) * K + lane] = my_s * scale;
  }
}

}  // namespace moekit::route::detail
