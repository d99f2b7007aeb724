// Variant `warp-regs` (the register top-k): kLanes lanes per token (32 for
// E > 64; fewer, several tokens per warp, for small E), lane l of a token
// holding the N consecutive experts [l*N, l*N + N) in registers, loaded with
// 8- or 16-byte vectors where the row allows. Each of the K picks is one
// arg-max of the lanes' local bests -- two warp-wide integer reductions when
// kLanes = 32, else log2(kLanes) shuffle steps -- and only the winning lane
// rescans its N values (a 3-level tree for N = 8). With kLanes < 32 and
// K <= 2 there are no rounds: each lane's best two are merged across the
// token's lanes by butterfly steps (top2_merged).
//
// Groups (kLanes = 32 only): where a group is whole lanes (E = 32N, E/G a
// multiple of N, E/(G N) a power of two) the group scores are butterfly merges
// of the lanes' local top two, with no shared memory; otherwise the row goes
// through shared memory (select_groups).
#pragma once

#include <type_traits>

#include "primitives/pdl.cuh"
#include "primitives/warp_reduce.cuh"
#include "route/common.cuh"

namespace moekit::route::detail {

constexpr int kRegsMaxPerLane = 16;      // E <= 512
constexpr int kRegsMaxTopk = 32;         // pick j is kept by lane j of the token
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

// Arg-max over the kLanes lanes of a token (every lane of the warp calls it).
template <int kLanes>
__device__ __forceinline__ prim::ArgMax token_argmax(prim::ArgMax a) {
  if constexpr (kLanes == 32) return prim::warp_argmax_redux(a);
  else return prim::warp_argmax<kLanes>(a);
}

// Best (value, index) of c[0..N) and its position, ties to the lower
// position: a tree, so the winning lane's rescan is log2(N) deep.
template <int N>
__device__ __forceinline__ int best_of(const float (&c)[N]) {
  int idx[N];
  float v[N];
#pragma unroll
  for (int j = 0; j < N; ++j) idx[j] = j, v[j] = c[j];
#pragma unroll
  for (int w = 1; w < N; w *= 2) {
#pragma unroll
    for (int j = 0; j + w < N; j += 2 * w)
      if (v[j + w] > v[j]) v[j] = v[j + w], idx[j] = idx[j + w];
  }
  return idx[0];
}

// The value and score at position j of (c, s) (static indexing: registers).
template <int N>
__device__ __forceinline__ void pick_at(const float (&c)[N], const float (&s)[N], int j, float& v, float& sc) {
  v = c[0], sc = s[0];
#pragma unroll
  for (int q = 1; q < N; ++q)
    if (q == j) v = c[q], sc = s[q];
}

// K <= 2 on a token of kLanes < 32 lanes: each lane's own best two, merged
// across the token's lanes by butterfly steps (six shuffles a step, all
// independent) instead of K rounds of an arg-max and a score shuffle; every
// lane ends with the token's best two, ties to the lower index as the rounds
// give them. Lane j of the token writes pick j.
template <int N, int kLanes>
__device__ __forceinline__ void top2_merged(const Args& a, const float (&c)[N], const float (&s)[N], int base, int sl,
                                            bool live, std::int64_t t) {
  float cc[N];
#pragma unroll
  for (int j = 0; j < N; ++j) cc[j] = c[j];
  float v0, v1, s0, s1;
  const int j0 = best_of(cc);
  pick_at(cc, s, j0, v0, s0);
#pragma unroll
  for (int j = 0; j < N; ++j)
    if (j == j0) cc[j] = kNegInf;
  const int j1 = best_of(cc);
  pick_at(cc, s, j1, v1, s1);
  int i0 = base + j0, i1 = base + j1;
#pragma unroll
  for (int off = 1; off < kLanes; off <<= 1) {
    const float w0 = __shfl_xor_sync(prim::kFullWarpMask, v0, off);
    const float w1 = __shfl_xor_sync(prim::kFullWarpMask, v1, off);
    const float t0 = __shfl_xor_sync(prim::kFullWarpMask, s0, off);
    const float t1 = __shfl_xor_sync(prim::kFullWarpMask, s1, off);
    const int k0 = __shfl_xor_sync(prim::kFullWarpMask, i0, off);
    const int k1 = __shfl_xor_sync(prim::kFullWarpMask, i1, off);
    if (prim::argmax_better(v0, i0, w0, k0)) {
      // Mine first; second: my second or their first.
      if (!prim::argmax_better(v1, i1, w0, k0)) v1 = w0, i1 = k0, s1 = t0;
    } else {
      // Theirs first; second: my first or their second.
      if (prim::argmax_better(v0, i0, w1, k1)) v1 = v0, i1 = i0, s1 = s0;
      else v1 = w1, i1 = k1, s1 = t1;
      v0 = w0, i0 = k0, s0 = t0;
    }
  }
  const int K = a.topk;
  const float total = K == 2 ? s0 + s1 : s0;  // pick order, as the rounds sum
  if (live && sl < K) {
    const float scale = weight_scale(a, total);
    a.ids[t * K + sl] = sl == 0 ? i0 : i1;
    a.weights[t * K + sl] = (sl == 0 ? s0 : s1) * scale;
  }
}

template <class T, Scoring S, int N, int kLanes, bool kVec, bool kLaneGroups>
__global__ void __launch_bounds__(kRegsWarpsPerBlock * 32) warp_regs_kernel(Args a) {
  static_assert(kLanes >= 2 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0, "kLanes: a power of two in [2, 32]");
  extern __shared__ float smem[];  // generic groups only: E + 2G words per warp
  constexpr int kTokensPerWarp = 32 / kLanes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int sl = lane % kLanes;  // lane within the token
  const std::int64_t t = (static_cast<std::int64_t>(blockIdx.x) * kRegsWarpsPerBlock + warp) * kTokensPerWarp +
                         lane / kLanes;
  prim::pdl_wait();
  if (t - lane / kLanes >= a.tokens) {  // the warp's first token: warp-uniform
    prim::pdl_launch_dependents();
    return;
  }
  // With several tokens per warp, lanes past the last token keep shuffling
  // (full-mask shuffles) on an empty row and write nothing.
  const bool live = t < a.tokens;
  const int E = a.experts, K = a.topk, base = sl * N;
  const int valid = live ? min(N, max(0, E - base)) : 0;
  float x[N];
  load_row_chunk<T, N, kVec>(static_cast<const T*>(a.logits) + (live ? t * E + base : 0), valid, x);
  prim::pdl_launch_dependents();

  // No branch per value: a value past the row is -inf, whose exp and score
  // are 0 (softmax and sigmoid alike) on a live token.
  float m = kNegInf, inv = 0.f;
  if constexpr (S == Scoring::softmax) {
#pragma unroll
    for (int j = 0; j < N; ++j) m = fmaxf(m, x[j]);
    m = prim::warp_max<kLanes>(m);
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < N; ++j) sum += expf(x[j] - m);
    inv = row_inverse(prim::warp_sum<kLanes>(sum));
  }
  float s[N], c[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    s[j] = score<S>(x[j], m, inv);
    const float b = a.bias != nullptr && j < valid ? __ldg(a.bias + base + j) : 0.f;
    c[j] = j < valid ? s[j] + b : kNegInf;
  }

  if constexpr (kLanes == 32) {
    if (a.groups > 1) {
      bool keep;
      if constexpr (kLaneGroups) {
        // A group is L = E / (G N) consecutive lanes: merge their top two.
        const int L = E / a.groups / N;
        float t1 = kNegInf, t2 = kNegInf;
#pragma unroll
        for (int j = 0; j < N; ++j) merge_top2(t1, t2, c[j], kNegInf);
        for (int off = L / 2; off > 0; off >>= 1)
          merge_top2(t1, t2, __shfl_xor_sync(prim::kFullWarpMask, t1, off),
                     __shfl_xor_sync(prim::kFullWarpMask, t2, off));
        float gscore = a.bias != nullptr && E / a.groups >= 2 ? t1 + t2 : t1;
        const int g = lane / L;
        keep = false;
        for (int r = 0; r < a.topk_groups; ++r) {
          const prim::ArgMax best = prim::warp_argmax_redux(prim::ArgMax{gscore, g});
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
  }

  if constexpr (kLanes < 32) {
    if (K <= 2) {  // warp-uniform
      top2_merged<N, kLanes>(a, c, s, base, sl, live, t);
      return;
    }
  }

  // Local best (value, index, score).
  int lj = best_of(c);
  prim::ArgMax lb{c[0], base};
  float lbs = s[0];
#pragma unroll
  for (int j = 1; j < N; ++j)
    if (j == lj) lb = {c[j], base + j}, lbs = s[j];
  int my_id = 0;
  float my_s = 0.f, total = 0.f;
  const int first_lane = lane - sl;
  for (int r = 0; r < K; ++r) {
    const prim::ArgMax best = token_argmax<kLanes>(lb);
    const int owner = first_lane + best.i / N;
    const float ps = __shfl_sync(prim::kFullWarpMask, lbs, owner);
    total += ps;
    if (sl == r) my_id = best.i, my_s = ps;
    if (lane == owner) {
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (j == lj) c[j] = kNegInf;
      lj = best_of(c);
#pragma unroll
      for (int j = 0; j < N; ++j)
        if (j == lj) lb = {c[j], base + j}, lbs = s[j];
    }
  }
  if (live && sl < K) {
    const float scale = weight_scale(a, total);
    a.ids[t * K + sl] = my_id;
    a.weights[t * K + sl] = my_s * scale;
  }
}

}  // namespace moekit::route::detail
