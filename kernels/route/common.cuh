// What every route kernel shares: loading logits as f32, scoring, group
// selection over a row of selection values in shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "primitives/argmax.cuh"
#include "route/route.hpp"

namespace moekit::route::detail {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

constexpr float kNegInf = -__builtin_huge_valf();

// What the kernels need of the Problem, by value.
struct Args {
  const void* logits;
  const float* bias;  // nullptr: no correction bias
  std::int32_t* ids;
  float* weights;
  int tokens, experts, topk, groups, topk_groups;
  float scaling;
  bool renormalize;
  // Fused align (block-rank-align only).
  std::int32_t* sorted;
  std::int32_t* expert_ids;
  std::int32_t* ntpp;
  unsigned* done;  // zeroed workspace: blocks finished
  int align_block, align_rows, align_blocks;
};

inline Args make_args(const Problem& p, const Buffers& b) {
  return Args{b.logits, p.bias ? b.bias : nullptr, b.topk_ids, b.topk_weights,
              static_cast<int>(p.tokens), p.experts, p.topk, p.groups, p.topk_groups, p.scaling, p.renormalize,
              b.sorted_token_ids, b.expert_ids, b.num_tokens_post_pad, static_cast<unsigned*>(b.workspace),
              p.align_block, static_cast<int>(p.align_rows), static_cast<int>(p.align_blocks)};
}

// The reciprocal of a softmax row's sum of exp(x - max), taken once per row:
// each score is then one multiply (a division per value put a slow-path
// branch on each). Within 1.5 ulp of the quotient, far inside the check's
// 1e-5; equal logits still give equal scores.
__device__ __forceinline__ float row_inverse(float row_sum) { return 1.0f / row_sum; }

// Softmax score from a logit, the row max and row_inverse(row sum); sigmoid
// from the logit alone. Full-precision expf: the selection must agree with a
// float64 reference to ~1e-6 (docs/route.md). The sigmoid's reciprocal is
// the fast one (2 ulp; 0 once 1 + exp(-x) passes 2^126, x < -87.3, where the
// IEEE quotient is a denormal): an IEEE division per value put a slow-path
// branch on each of a lane's values, in series.
template <Scoring S>
__device__ __forceinline__ float score(float x, float row_max, float row_inv) {
  if constexpr (S == Scoring::softmax) return expf(x - row_max) * row_inv;
  else return __fdividef(1.0f, 1.0f + expf(-x));
}

// What a pick's score is multiplied by to give its weight: S, over the sum of
// the K picked scores when renormalizing -- unless that sum is not > 0 (every
// pick's sigmoid underflowed to 0 at logits near -1000), when the scores stay
// as they are instead of 0/0 = NaN. The CPU reference's weights_of() has the
// same rule (docs/route.md "Weights").
__device__ __forceinline__ float weight_scale(const Args& a, float total) {
  return a.renormalize && total > 0.f ? a.scaling / total : a.scaling;
}

// Group scores of one row of selection values c[E] in shared memory, then the
// topk_groups best groups (ties to the lower group): kept[g] = 1 for those,
// 0 for the rest. One warp, every lane calls it; kept and gscore hold G
// entries. Group score: the sum of the top two values with a bias (the
// DeepSeek-V3 rule), else the max.
__device__ __forceinline__ void select_groups(const float* c, float* gscore, int* kept, const Args& a,
                                              bool top2) {
  const int lane = threadIdx.x & 31;
  const int gs = a.experts / a.groups;
  for (int g = lane; g < a.groups; g += 32) {
    float m1 = kNegInf, m2 = kNegInf;
    for (int i = g * gs; i < (g + 1) * gs; ++i) {
      const float v = c[i];
      if (v > m1) m2 = m1, m1 = v;
      else if (v > m2) m2 = v;
    }
    gscore[g] = top2 && gs >= 2 ? m1 + m2 : m1;
    kept[g] = 0;
  }
  __syncwarp();
  for (int r = 0; r < a.topk_groups; ++r) {
    prim::ArgMax best = prim::argmax_empty();
    for (int g = lane; g < a.groups; g += 32)
      if (!kept[g] && prim::argmax_better(gscore[g], g, best.v, best.i)) best = {gscore[g], g};
    best = prim::warp_argmax(best);
    __syncwarp();  // every lane's read of kept is done before lane 0 writes it
    if (lane == 0) kept[best.i] = 1;
    __syncwarp();
  }
}

}  // namespace moekit::route::detail
