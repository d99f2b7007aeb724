// 16-byte vectors of f16, bf16 or f32 with converting load/store to float
// registers: one memory instruction moves 8 (16-bit) or 4 (f32) elements.
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

template <>
struct Dtype<float> {
  __device__ __forceinline__ static float to_float(float v) { return v; }
  __device__ __forceinline__ static float from_float(float v) { return v; }
};
template <>
struct Dtype<__half> {
  __device__ __forceinline__ static float to_float(__half v) { return __half2float(v); }
  __device__ __forceinline__ static __half from_float(float v) { return __float2half_rn(v); }
};
template <>
struct Dtype<__nv_bfloat16> {
  __device__ __forceinline__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

// Sixteen bytes of T, i.e. kSize elements.
template <class T>
struct Vec16 {
  static constexpr int kSize = 16 / sizeof(T);
  uint4 raw;

  // Streaming load (evict-first): every input byte is read exactly once.
  __device__ __forceinline__ void load(const T* p) { raw = __ldcs(reinterpret_cast<const uint4*>(p)); }
  __device__ __forceinline__ void store(T* p) const { *reinterpret_cast<uint4*>(p) = raw; }

  // Widen to float registers.
  __device__ __forceinline__ void to_float(float (&f)[kSize]) const;
  // Round float registers into this vector.
  __device__ __forceinline__ void from_float(const float (&f)[kSize]);
};

template <>
__device__ __forceinline__ void Vec16<float>::to_float(float (&f)[4]) const {
  f[0] = __uint_as_float(raw.x);
  f[1] = __uint_as_float(raw.y);
  f[2] = __uint_as_float(raw.z);
  f[3] = __uint_as_float(raw.w);
}
template <>
__device__ __forceinline__ void Vec16<float>::from_float(const float (&f)[4]) {
  raw = make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                   __float_as_uint(f[3]));
}

template <>
__device__ __forceinline__ void Vec16<__nv_bfloat16>::to_float(float (&f)[8]) const {
  // bf16 is the top half of a float: widening is a shift or a mask.
  const std::uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void Vec16<__nv_bfloat16>::from_float(const float (&f)[8]) {
  std::uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);  // .x = low half
    w[i] = *reinterpret_cast<const std::uint32_t*>(&p);
  }
  raw = make_uint4(w[0], w[1], w[2], w[3]);
}

template <>
__device__ __forceinline__ void Vec16<__half>::to_float(float (&f)[8]) const {
  const std::uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}
template <>
__device__ __forceinline__ void Vec16<__half>::from_float(const float (&f)[8]) {
  std::uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 p = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    w[i] = *reinterpret_cast<const std::uint32_t*>(&p);
  }
  raw = make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace moekit::act::detail
