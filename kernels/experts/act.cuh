// act(gate) * up in f32 (experts.hpp's Act), and the row -> expert lookup of
// a RowMap: the device building blocks every FFN kernel of the family shares.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "experts/experts.hpp"

namespace moekit::experts {

__device__ __forceinline__ float act_and_mul(Act act, float g, float u) {
  switch (act) {
    case Act::silu: return g / (1.0f + expf(-g)) * u;
    // Forms without the cancellation of 1 + erf / 1 + tanh at very negative g:
    // 0.5 (1 + erf(x)) = 0.5 erfc(-x), 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2 z)).
    case Act::gelu: return 0.5f * g * erfcf(-g * 0.70710678118654752f) * u;
    case Act::gelu_tanh: {
      const float c = 0.79788456080286536f;  // sqrt(2 / pi)
      return g / (1.0f + expf(-2.0f * c * (g + 0.044715f * g * g * g))) * u;
    }
    case Act::swiglu_oai: {
      const float gc = fminf(g, kSwigluLimit);
      const float uc = fminf(fmaxf(u, -kSwigluLimit), kSwigluLimit);
      return gc / (1.0f + expf(-kSwigluAlpha * gc)) * (uc + 1.0f);
    }
  }
  return 0.0f;
}

// Rows of W1 holding gate i and up i.
__host__ __device__ __forceinline__ std::int64_t gate_row(W1Layout l, std::int64_t i, std::int64_t /*inter*/) {
  return l == W1Layout::interleaved ? 2 * i : i;
}
__host__ __device__ __forceinline__ std::int64_t up_row(W1Layout l, std::int64_t i, std::int64_t inter) {
  return l == W1Layout::interleaved ? 2 * i + 1 : inter + i;
}

template <class T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }

// The expert that owns row r, or -1 (padding, dropped, past the rows in use).
// Compact: the last e with offsets[e] <= r, where r < offsets[E].
__device__ __forceinline__ int row_expert(const RowMap& m, int experts, std::int64_t r) {
  if (m.compact) {
    if (r >= m.offsets[experts]) return -1;
    int lo = 0, hi = experts - 1;  // offsets[lo] <= r < offsets[hi + 1]
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (m.offsets[mid] <= r) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }
  if (r >= *m.num_tokens_post_pad || m.sorted_token_ids[r] >= m.numel) return -1;
  const int e = m.expert_ids[r / m.block_size];
  return e >= 0 && e < experts ? e : -1;
}

}  // namespace moekit::experts
