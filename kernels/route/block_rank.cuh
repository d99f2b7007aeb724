// Variant `block-rank` (decode latency): one block per token, one expert per
// thread (E <= 1024), and no sequential pick rounds. Every step is a
// parallel rank:
//   1. scores, then the row max / sum (softmax) as block reductions;
//   2. groups: each group's score by lane shuffles (groups of up to 32
//      experts that tile a warp) or per-warp partials merged in shared memory
//      (groups of whole warps), else a scan; each thread ranks its group among
//      the G group scores and masks itself out unless the rank is < KG;
//   3. each warp ranks its 32 values all-to-all (32 broadcast shuffles) and
//      writes its best min(K, 32) in order to shared memory;
//   4. each of those W * min(K, 32) candidates counts the candidates that beat
//      it: the ones with a count < K are the picks, the count is the slot.
// The longest dependent chain is a few dozen instructions per step, against
// K rounds of warp-wide arg-max in the one-warp variants.
//
// Variant `block-rank-align` (--then-align, decode): the same, then the last
// block to finish (a counter in a zeroed workspace) runs align on all T*K ids
// in shared memory with align's one-block building block (align/block_align.cuh:
// per-expert counts with ranks from shared atomics, a warp scan of the padded
// counts, expert_ids per expert, and the scatter; every block fills its share
// of the padding rows first, while its loads fly). One launch instead of
// route + align; slots inside an expert are in atomic order (align's
// non-stable contract).
#pragma once

#include "align/block_align.cuh"
#include "primitives/argmax.cuh"
#include "primitives/pdl.cuh"
#include "primitives/warp_reduce.cuh"
#include "primitives/warp_scan.cuh"
#include "route/common.cuh"

namespace moekit::route::detail {

constexpr int kRankMaxExperts = 1024;  // one thread per expert
constexpr int kRankMaxTopk = 32;       // a warp's best K fit its lanes
constexpr int kFusedMaxSlots = 8192;   // T*K: a rank per slot in shared memory

inline int rank_threads(const Problem& p) { return (p.experts + 31) / 32 * 32; }
inline int rank_warp_picks(const Problem& p) { return p.topk < 32 ? p.topk : 32; }
// Candidates (value, index, score) [3 W Kc], or the row [32 W] in the
// group-scan fallback, which runs before them.
__host__ __device__ inline int rank_region_words(int warps, int kc) {
  return 3 * warps * kc > 32 * warps ? 3 * warps * kc : 32 * warps;
}
// Dynamic shared memory (words): group scores [G], per-warp group partials
// [2 W], the candidate region, picked scores [K].
// With align fused, the last block reuses it for align::block_align (counts,
// starts and a rank per slot: block_align_smem_words).
inline std::size_t rank_smem_bytes(const Problem& p) {
  const int w = rank_threads(p) / 32;
  const std::size_t route = p.groups + 2 * w + rank_region_words(w, rank_warp_picks(p)) + p.topk;
  const std::size_t aligned = p.align_block > 0 ? align::block_align_smem_words(p.experts, p.tokens * p.topk) : 0;
  return 4 * (route > aligned ? route : aligned);
}

// route's Args as align::block_align's arguments (its View): the T*K ids this
// grid wrote, all in [0, E), and the align outputs, read where align uses them.
struct AlignView {
  const Args& a;
  __device__ int numel() const { return a.tokens * a.topk; }
  __device__ int num_experts() const { return a.experts; }
  __device__ int block_size() const { return a.align_block; }
  __device__ int max_padded() const { return a.align_rows; }
  __device__ int max_blocks() const { return a.align_blocks; }
  __device__ const std::int32_t* ids() const { return a.ids; }
  __device__ std::int32_t* sorted() const { return a.sorted; }
  __device__ std::int32_t* eids() const { return a.expert_ids; }
  __device__ std::int32_t* total() const { return a.ntpp; }
};

template <class T, Scoring S, bool kAlign>
__global__ void __launch_bounds__(kRankMaxExperts) block_rank_kernel(Args a) {
  extern __shared__ float smem[];
  __shared__ float red[2][32];
  const int e = threadIdx.x, lane = e & 31, warp = e >> 5, W = blockDim.x >> 5;
  const int E = a.experts, K = a.topk, G = a.groups, Kc = K < 32 ? K : 32;
  const std::int64_t t = blockIdx.x;
  const bool in = e < E;
  const T* row = static_cast<const T*>(a.logits) + t * E;
  prim::pdl_wait();
  const float x = in ? to_f32(row[e]) : kNegInf;
  const float b = in && a.bias ? __ldg(a.bias + e) : 0.f;
  prim::pdl_launch_dependents();
  if constexpr (kAlign) align::fill_padding_share(AlignView{a});  // while the loads are in flight

  float* gscore = smem;
  float* gpart = gscore + G;                         // [2 W]: per-warp top two
  float* cv = gpart + 2 * W;                         // [W Kc] candidate values
  int* ci = reinterpret_cast<int*>(cv + W * Kc);     // indices
  float* cs = reinterpret_cast<float*>(ci + W * Kc);  // scores
  float* picked = cv + rank_region_words(W, Kc);     // [K]

  float m = 0.f, sum = 0.f, inv = 0.f;
  if constexpr (S == Scoring::softmax) {
    m = prim::warp_max(x);
    if (lane == 0) red[0][warp] = m;
    __syncthreads();
    m = red[0][0];
    for (int w = 1; w < W; ++w) m = fmaxf(m, red[0][w]);
    sum = prim::warp_sum(in ? expf(x - m) : 0.f);
    if (lane == 0) red[1][warp] = sum;
    __syncthreads();
    sum = red[1][0];
    for (int w = 1; w < W; ++w) sum += red[1][w];
    inv = row_inverse(sum);
  }
  const float s = in ? score<S>(x, m, inv) : 0.f;
  float c = in ? s + b : kNegInf;

  if (G > 1) {
    const int gs = E / G;
    const bool top2 = a.bias != nullptr && gs >= 2;
    if (gs <= 32 && 32 % gs == 0) {
      // A group is gs consecutive lanes of one warp.
      float t1 = c, t2 = kNegInf;
      for (int off = 1; off < gs; off <<= 1) {
        const float o1 = __shfl_xor_sync(prim::kFullWarpMask, t1, off);
        const float o2 = __shfl_xor_sync(prim::kFullWarpMask, t2, off);
        if (t1 >= o1) t2 = fmaxf(t2, o1);
        else t2 = fmaxf(t1, o2), t1 = o1;
      }
      if (in && e % gs == 0) gscore[e / gs] = top2 ? t1 + t2 : t1;
    } else if (gs % 32 == 0) {
      // A group is whole warps: each warp's top two, merged per group below.
      float t1 = c, t2 = kNegInf;
      for (int off = 1; off < 32; off <<= 1) {
        const float o1 = __shfl_xor_sync(prim::kFullWarpMask, t1, off);
        const float o2 = __shfl_xor_sync(prim::kFullWarpMask, t2, off);
        if (t1 >= o1) t2 = fmaxf(t2, o1);
        else t2 = fmaxf(t1, o2), t1 = o1;
      }
      if (lane == 0) gpart[2 * warp] = t1, gpart[2 * warp + 1] = t2;
      __syncthreads();
      if (e < G) {
        const int wpg = gs / 32;
        float g1 = kNegInf, g2 = kNegInf;
        for (int w = e * wpg; w < (e + 1) * wpg; ++w) {
          const float o1 = gpart[2 * w], o2 = gpart[2 * w + 1];
          if (g1 >= o1) g2 = fmaxf(g2, o1);
          else g2 = fmaxf(g1, o2), g1 = o1;
        }
        gscore[e] = top2 ? g1 + g2 : g1;
      }
    } else {
      // Any other group size: the row through shared memory (the candidate
      // region is free until step 3 and holds at least 32 W >= E words).
      float* rowc = cv;
      if (in) rowc[e] = c;
      __syncthreads();
      if (e < G) {
        float g1 = kNegInf, g2 = kNegInf;
        for (int i = e * gs; i < (e + 1) * gs; ++i) {
          const float v = rowc[i];
          if (v > g1) g2 = g1, g1 = v;
          else if (v > g2) g2 = v;
        }
        gscore[e] = top2 ? g1 + g2 : g1;
      }
    }
    __syncthreads();
    if (in) {
      const int g = e / gs;
      const float mine = gscore[g];
      int rank = 0;
      for (int h = 0; h < G; ++h) rank += prim::argmax_better(gscore[h], h, mine, g);
      if (rank >= a.topk_groups) c = kNegInf;
    }
  }

  // 3. The warp's best Kc, ranked all-to-all (lane order is index order).
  int wrank = 0;
#pragma unroll 8
  for (int j = 0; j < 32; ++j) {
    const float v = __shfl_sync(prim::kFullWarpMask, c, j);
    wrank += v > c || (v == c && j < lane);
  }
  __syncthreads();  // the group scan above may still read cv
  if (wrank < Kc) {
    cv[warp * Kc + wrank] = c;
    ci[warp * Kc + wrank] = e;
    cs[warp * Kc + wrank] = s;
  }
  __syncthreads();

  // 4. Candidates ranked among all W Kc.
  const int C = W * Kc;
  if (e < C) {
    const float v = cv[e];
    const int i = ci[e];
    int rank = 0;
    for (int u = 0; u < C; ++u) rank += prim::argmax_better(cv[u], ci[u], v, i);
    if (rank < K) {
      a.ids[t * K + rank] = i;
      picked[rank] = cs[e];
    }
  }
  __syncthreads();
  if (e < K) {
    float total = 0.f;
    for (int j = 0; j < K; ++j) total += picked[j];  // pick order, as the other variants
    a.weights[t * K + e] = picked[e] * weight_scale(a, total);
  }
  if constexpr (kAlign) {
    if (gridDim.x > 1) {
      __shared__ bool last;
      __threadfence();  // this block's ids and fill, device-wide, before it counts itself done
      __syncthreads();
      if (e == 0) last = atomicAdd(a.done, 1u) == gridDim.x - 1;
      __syncthreads();
      if (!last) return;
      __threadfence();
      if (e == 0) *a.done = 0;  // the workspace goes back zeroed
    } else {
      __syncthreads();  // one block: its own writes are visible after the barrier
    }
    align::block_align(AlignView{a}, reinterpret_cast<int*>(smem));
  }
}

}  // namespace moekit::route::detail
