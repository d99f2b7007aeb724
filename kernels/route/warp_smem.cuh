// Variant `warp-smem` (the simple one): one warp per token; the row's selection
// values live in shared memory, each of the K picks is a warp arg-max over a
// strided scan of the row. Any E up to kMaxExperts, any K <= E, any groups.
//
// Per warp, shared memory holds c[E], the group scores and flags [G], and the
// picks' scores [K]: warp_smem_floats() 4-byte words.
#pragma once

#include "primitives/pdl.cuh"
#include "primitives/warp_reduce.cuh"
#include "route/common.cuh"

namespace moekit::route::detail {

inline int warp_smem_floats(const Problem& p) { return (p.experts + 2 * p.groups + p.topk + 3) / 4 * 4; }

template <class T, Scoring S>
__global__ void warp_smem_kernel(Args a, int warps_per_block, int words_per_warp) {
  extern __shared__ float smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t = blockIdx.x * warps_per_block + warp;
  prim::pdl_wait();
  if (t >= a.tokens) {
    prim::pdl_launch_dependents();
    return;
  }
  float* c = smem + warp * words_per_warp;
  float* gscore = c + a.experts;
  int* kept = reinterpret_cast<int*>(gscore + a.groups);
  float* picked = reinterpret_cast<float*>(kept + a.groups);
  const int E = a.experts, K = a.topk;
  const T* row = static_cast<const T*>(a.logits) + static_cast<std::int64_t>(t) * E;

  float m = kNegInf, sum = 0.f, inv = 0.f;
  if constexpr (S == Scoring::softmax) {
    for (int i = lane; i < E; i += 32) m = fmaxf(m, to_f32(row[i]));
    m = prim::warp_max(m);
    for (int i = lane; i < E; i += 32) sum += expf(to_f32(row[i]) - m);
    inv = row_inverse(prim::warp_sum(sum));
  }
  for (int i = lane; i < E; i += 32) c[i] = score<S>(to_f32(row[i]), m, inv) + (a.bias ? a.bias[i] : 0.f);
  prim::pdl_launch_dependents();
  __syncwarp();

  if (a.groups > 1) {
    select_groups(c, gscore, kept, a, a.bias != nullptr);
    const int gs = E / a.groups;
    for (int i = lane; i < E; i += 32)
      if (!kept[i / gs]) c[i] = kNegInf;
    __syncwarp();
  }

  float total = 0.f;
  for (int j = 0; j < K; ++j) {
    prim::ArgMax best = prim::argmax_empty();
    for (int i = lane; i < E; i += 32)
      if (prim::argmax_better(c[i], i, best.v, best.i)) best = {c[i], i};
    best = prim::warp_argmax(best);
    __syncwarp();  // every lane's scan of c is done before lane 0 writes it
    // The pick's score, recomputed from its logit: the same instructions as above.
    const float s = score<S>(to_f32(row[best.i]), m, inv);
    total += s;
    if (lane == 0) {
      c[best.i] = kNegInf;
      picked[j] = s;
      a.ids[static_cast<std::int64_t>(t) * K + j] = best.i;
    }
    __syncwarp();
  }
  const float scale = weight_scale(a, total);
  for (int j = lane; j < K; j += 32) a.weights[static_cast<std::int64_t>(t) * K + j] = picked[j] * scale;
}

}  // namespace moekit::route::detail
