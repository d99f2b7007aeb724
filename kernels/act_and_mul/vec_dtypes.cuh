// Vectors of N elements of f16, bf16 or f32 moved by one memory instruction
// (N * sizeof(T) = 2, 4, 8 or 16 bytes), with converting load/store to float
// registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace moekit::act::detail {

// Per-dtype conversions. from_float rounds to nearest even and keeps
// subnormals, infinities and NaN (cvt.rn without .ftz).
template <class T>
struct Dtype;

// Pair conversions (kPairs) move two 16-bit elements per instruction: one
// cvt.rn.{bf16x2,f16x2}.f32 on the way out.
template <>
struct Dtype<float> {
  static constexpr bool kPairs = false;
  __device__ __forceinline__ static float to_float(float v) { return v; }
  __device__ __forceinline__ static float from_float(float v) { return v; }
};
template <>
struct Dtype<__half> {
  static constexpr bool kPairs = true;
  using Pair = __half2;
  __device__ __forceinline__ static float to_float(__half v) { return __half2float(v); }
  __device__ __forceinline__ static __half from_float(float v) { return __float2half_rn(v); }
  __device__ __forceinline__ static float2 pair_to_float(Pair p) { return __half22float2(p); }
  __device__ __forceinline__ static Pair pair_from_float(float a, float b) { return __floats2half2_rn(a, b); }
};
template <>
struct Dtype<__nv_bfloat16> {
  static constexpr bool kPairs = true;
  using Pair = __nv_bfloat162;
  __device__ __forceinline__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
  __device__ __forceinline__ static float2 pair_to_float(Pair p) { return __bfloat1622float2(p); }
  __device__ __forceinline__ static Pair pair_from_float(float a, float b) { return __floats2bfloat162_rn(a, b); }
};

// The unsigned type one memory instruction moves for a given byte count.
template <int kBytes>
struct RawWord;
template <>
struct RawWord<2> {
  using type = unsigned short;
};
template <>
struct RawWord<4> {
  using type = unsigned int;
};
template <>
struct RawWord<8> {
  using type = uint2;
};
template <>
struct RawWord<16> {
  using type = uint4;
};

template <class T, int N>
struct alignas(N * sizeof(T)) VecN {
  static constexpr int kSize = N;
  static constexpr int kBytes = N * static_cast<int>(sizeof(T));
  using Raw = typename RawWord<kBytes>::type;
  T v[N];

  // Streaming load (evict-first): every input byte is read exactly once.
  __device__ __forceinline__ void load(const T* p) {
    *reinterpret_cast<Raw*>(v) = __ldcs(reinterpret_cast<const Raw*>(p));
  }
  // Plain load: for an input small enough to still sit in L2 from whoever
  // wrote it, or one larger than L2 (the rule: act::stream_loads in policy.hpp).
  __device__ __forceinline__ void load_cached(const T* p) {
    *reinterpret_cast<Raw*>(v) = *reinterpret_cast<const Raw*>(p);
  }
  __device__ __forceinline__ void load(const T* p, bool stream) {
    if (stream) load(p); else load_cached(p);
  }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<Raw*>(p) = *reinterpret_cast<const Raw*>(v); }

  __device__ __forceinline__ void to_float(float (&f)[N]) const {
    if constexpr (Dtype<T>::kPairs && N % 2 == 0) {
      using Pair = typename Dtype<T>::Pair;
#pragma unroll
      for (int i = 0; i < N; i += 2) {
        const float2 p = Dtype<T>::pair_to_float(*reinterpret_cast<const Pair*>(&v[i]));
        f[i] = p.x;
        f[i + 1] = p.y;
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) f[i] = Dtype<T>::to_float(v[i]);
    }
  }
  __device__ __forceinline__ void from_float(const float (&f)[N]) {
    if constexpr (Dtype<T>::kPairs && N % 2 == 0) {
      using Pair = typename Dtype<T>::Pair;
#pragma unroll
      for (int i = 0; i < N; i += 2) *reinterpret_cast<Pair*>(&v[i]) = Dtype<T>::pair_from_float(f[i], f[i + 1]);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) v[i] = Dtype<T>::from_float(f[i]);
    }
  }
};

// Sixteen bytes: 8 half-precision or 4 f32 elements.
template <class T>
using Vec16 = VecN<T, 16 / sizeof(T)>;

}  // namespace moekit::act::detail
