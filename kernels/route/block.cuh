// Variant `block` (large E or large K): one block of kBlockThreads per token;
// thread i holds the N consecutive experts [i*N, i*N + N) in registers. Row
// max and sum are block reductions; each of the K picks is one block arg-max
// (one barrier); groups go through shared memory (select_groups, one warp).
#pragma once

#include "primitives/argmax.cuh"
#include "primitives/pdl.cuh"
#include "primitives/warp_reduce.cuh"
#include "route/common.cuh"
#include "route/warp_regs.cuh"  // load_row_chunk

namespace moekit::route::detail {

constexpr int kBlockThreads = 256;
constexpr int kBlockMaxPerThread = 16;  // E <= 4096

// Dynamic shared memory: the row and group scores/flags (groups only), then
// the picks' ids and scores [K] each.
inline std::size_t block_smem_bytes(const Problem& p) {
  return 4 * (static_cast<std::size_t>(p.groups > 1 ? p.experts + 2 * p.groups : 0) + 2 * p.topk);
}

template <class T, Scoring S, int N, bool kVec>
__global__ void __launch_bounds__(kBlockThreads) block_kernel(Args a) {
  constexpr int kWarps = kBlockThreads / 32;
  extern __shared__ float smem[];
  __shared__ float red[2][kWarps];
  __shared__ prim::ArgMax slots[2][kWarps];
  const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int E = a.experts, K = a.topk, base = tid * N;
  const int valid = min(N, max(0, E - base));
  const T* row_in = static_cast<const T*>(a.logits) + static_cast<std::int64_t>(t) * E;
  prim::pdl_wait();
  float x[N];
  load_row_chunk<T, N, kVec>(row_in + base, valid, x);
  prim::pdl_launch_dependents();

  float m = kNegInf, sum = 0.f, inv = 0.f;
  if constexpr (S == Scoring::softmax) {
#pragma unroll
    for (int j = 0; j < N; ++j) m = fmaxf(m, x[j]);
    m = prim::warp_max(m);
    if (lane == 0) red[0][warp] = m;
    __syncthreads();
    m = red[0][0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) m = fmaxf(m, red[0][w]);
#pragma unroll
    for (int j = 0; j < N; ++j) sum += j < valid ? expf(x[j] - m) : 0.f;
    sum = prim::warp_sum(sum);
    if (lane == 0) red[1][warp] = sum;
    __syncthreads();
    sum = red[1][0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) sum += red[1][w];
    inv = row_inverse(sum);
  }
  float c[N];
#pragma unroll
  for (int j = 0; j < N; ++j)
    c[j] = j < valid ? score<S>(x[j], m, inv) + (a.bias ? __ldg(a.bias + base + j) : 0.f) : kNegInf;

  float* picked_s = smem;
  int* picked_id = reinterpret_cast<int*>(smem + K);
  if (a.groups > 1) {
    float* row = smem + 2 * K;
    float* gsc = row + E;
    int* kept = reinterpret_cast<int*>(gsc + a.groups);
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (j < valid) row[base + j] = c[j];
    __syncthreads();
    if (warp == 0) select_groups(row, gsc, kept, a, a.bias != nullptr);
    __syncthreads();
    const int gs = E / a.groups;
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (j < valid && !kept[(base + j) / gs]) c[j] = kNegInf;
  }

  auto local_best = [&]() {
    prim::ArgMax b = prim::argmax_empty();
#pragma unroll
    for (int j = 0; j < N; ++j)
      if (c[j] > b.v) b = {c[j], base + j};
    return b;
  };
  prim::ArgMax lb = local_best();
  float total = 0.f;
  for (int r = 0; r < K; ++r) {
    const prim::ArgMax best = prim::block_argmax<kBlockThreads>(lb, slots[r & 1]);
    // The pick's score, recomputed from its logit with the same instructions.
    const float ps = score<S>(to_f32(row_in[best.i]), m, inv);
    total += ps;
    if (tid == 0) picked_id[r] = best.i, picked_s[r] = ps;
    if (best.i / N == tid) {
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (base + j == best.i) c[j] = kNegInf;
      lb = local_best();
    }
  }
  __syncthreads();
  const float scale = weight_scale(a, total);
  for (int j = tid; j < K; j += kBlockThreads) {
    a.ids[static_cast<std::int64_t>(t) * K + j] = picked_id[j];
    a.weights[static_cast<std::int64_t>(t) * K + j] = picked_s[j] * scale;
  }
}

}  // namespace moekit::route::detail
