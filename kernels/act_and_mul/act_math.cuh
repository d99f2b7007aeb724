// act(x) * y in f32 for silu, gelu and gelu-tanh, accurate over the whole
// float range (accuracy contract: docs/act-and-mul.md).
//
// Fast path: act(x) is evaluated as a normal float with a few-ulp error and
// multiplied by y; that product is the only rounding that can under- or
// overflow, so it is right for every y. It covers x >= kTail (and x not
// tiny, |x| >= 2^-125), i.e. all but the rarest inputs.
//
// kLowp (16-bit outputs): the fast path takes e^t from ex2.approx (__expf's
// 2 + 1.173 |t| ulp, CUDA Programming Guide) and the quotient from an
// approximate reciprocal (1 ulp): at most ~105 f32 ulp for |t| <= 87, against the 4096
// f32 ulp of half an f16 ulp (2^15 for bf16), so the output stays within 1 ulp
// of the correctly rounded result. That is 4 instructions per element instead
// of ~15, and the difference between FlashInfer's speed and ours at 128 x 4096
// (the math was ~0.6 us of a 2.3 us launch; H200, .dev ablation in
// docs/bench/act-and-mul-notes.md). f32 outputs keep expf and __fdividef.
//
// Slow path (x in the far negative tail, tiny x, non-finite values): there
// act(x) itself underflows or loses bits in f32, while act(x) * y may still be a
// normal number when |y| is huge. It writes act(x) = x * g(x) with
// g(x) = gm * 2^gk and combines mantissas and exponents separately, rounding
// once in ldexpf. Kept out of line: it costs nothing unless a lane takes it.
// Comments here keep µs figures: 1 line (why alternative designs lost; not thresholds).
#pragma once

// Also compiled as plain C++ by tests/act_and_mul/cpu_act_math.cpp, which
// supplies host stand-ins for the CUDA qualifiers and intrinsics.
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#define MOEKIT_ACT_UNROLL _Pragma("unroll")
#else
#define MOEKIT_ACT_UNROLL
#endif

#include <cstdint>

#include "act_and_mul/act_and_mul.hpp"

namespace moekit::act::detail {

// ---- float-float helpers: exact products and sums via fma ------------------
struct FF {
  float hi, lo;
};
__device__ __forceinline__ FF two_prod(float a, float b) {
  const float p = a * b;
  return {p, fmaf(a, b, -p)};
}
__device__ __forceinline__ FF two_sum(float a, float b) {
  const float s = a + b;
  const float bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
// (ah + al) * (bh + bl), lo parts to first order.
__device__ __forceinline__ FF ff_mul(FF a, FF b) {
  FF p = two_prod(a.hi, b.hi);
  p.lo += a.hi * b.lo + a.lo * b.hi;
  return p;
}
__device__ __forceinline__ FF ff_add(FF a, FF b) {
  FF s = two_sum(a.hi, b.hi);
  s.lo += a.lo + b.lo;
  const float h = s.hi + s.lo;
  return {h, s.lo - (h - s.hi)};
}

// Constants split into float hi + lo (hi + lo is the double value to ~1e-16).
constexpr FF kLog2e{0x1.715476p+0f, 0x1.4ae0cp-26f};      // 1 / ln 2
constexpr FF kHalfLog2e{0x1.715476p-1f, 0x1.4ae0cp-27f};  // 1 / (2 ln 2)
constexpr FF kTanhC1{0x1.988454p+0f, -0x1.857936p-25f};   // 2 sqrt(2/pi)
constexpr FF kTanhC2{0x1.2444f2p-4f, 0x1.49b16ap-29f};    // 2 sqrt(2/pi) * 0.044715
constexpr float kRsqrt2 = 0.70710678118654752f;

// 2^(h + l) as m * 2^k with m in [1, 2]. h <= 0 is at most a few thousand.
__device__ __forceinline__ float exp2_split(FF e, int& k) {
  const float kf = floorf(e.hi);
  k = static_cast<int>(kf);
  return exp2f((e.hi - kf) + e.lo);  // e.hi - kf is exact
}

// 2u = 2 sqrt(2/pi) (x + 0.044715 x^3) as float-float: the exponent of
// gelu-tanh is large for negative x, and its absolute error is the result's
// relative error.
__device__ __forceinline__ FF tanh_arg_ff(float x) {
  const FF x2 = two_prod(x, x);
  FF x3 = two_prod(x2.hi, x);
  x3.lo += x2.lo * x;
  return ff_add(ff_mul(kTanhC2, x3), ff_mul(kTanhC1, FF{x, 0.0f}));
}

// |x| < 2^-125, x != 0: act(x) ~ x / 2 would round into the subnormal range.
__device__ __forceinline__ bool is_tiny(float x) { return fabsf(x) < 0x1p-125f && x != 0.0f; }

// The low-precision fast path's two approximations. Host builds (the
// emulation test) supply host_* stand-ins that are off by these bounds.
// 1 / v, 1 ulp, for normal v whose reciprocal is normal (here 1 <= v < 2^126).
__device__ __forceinline__ float rcp_approx(float v) {
#if defined(__CUDACC__)
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
#else
  return host_rcp_approx(v);
#endif
}
// e^t as 2^(t log2 e): __expf without its subnormal-result scaling (a result
// below 2^-126 flushes to 0; here it is only ever added to 1). Error as
// __expf's: 2 + floor(1.173 |t|) ulp.
__device__ __forceinline__ float exp_approx(float t) {
#if defined(__CUDACC__)
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t * kLog2e.hi));
  return r;
#else
  return host_exp_approx(t);
#endif
}

template <Activation A>
struct ActMath;

// silu(x) = x / (1 + e^-x). Fast for x >= -80: e^-x <= e^80 stays finite and
// the quotient is a normal float (>= 80 e^-80 ~ 1e-33).
template <>
struct ActMath<Activation::silu> {
  static constexpr float kTail = -80.0f;
  template <bool kLowp>
  __device__ __forceinline__ static float act(float x) {
    // 1 + e^80 is far below 2^126, where __fdividef (2 ulp) and the
    // reciprocal stop being accurate.
    if constexpr (kLowp) return x * rcp_approx(1.0f + exp_approx(-x));
    return __fdividef(x, 1.0f + expf(-x));
  }
  // g(x) = e^x / (1 + e^x) ~ e^x (relative 2^-115) for x < -80.
  __device__ static float tail_g(float x, int& gk) {
    x = fmaxf(x, -1000.0f);  // beyond, act(x) * y is 0 for every float y
    FF e = two_prod(x, kLog2e.hi);
    e.lo += x * kLog2e.lo;
    return exp2_split(e, gk);
  }
};

// gelu(x) = x Phi(x), Phi(x) = erfc(-x / sqrt2) / 2. erfcf avoids the 1 + erf
// cancellation; for x >= -4 its argument error costs < 2e-6 relative.
template <>
struct ActMath<Activation::gelu> {
  static constexpr float kTail = -4.0f;
  template <bool>
  __device__ __forceinline__ static float act(float x) { return x * (0.5f * erfcf(-x * kRsqrt2)); }
  // Phi(x) = erfcx(z) e^(-z^2) / 2 with z = -x / sqrt2 > 0: erfcx is smooth and
  // e^(-x^2/2) is taken from the exact square of x.
  __device__ static float tail_g(float x, int& gk) {
    x = fmaxf(x, -200.0f);
    const FF x2 = two_prod(x, x);
    FF e = ff_mul(x2, kHalfLog2e);
    e = {-e.hi, -e.lo};
    const float m = exp2_split(e, gk);
    return m * (0.5f * erfcxf(-x * kRsqrt2));
  }
};

// gelu-tanh(x) = x (1 + tanh u) / 2 = x / (1 + e^(-2u)). Fast for x >= -4.5,
// where |2u| <= 14 and a plain f32 argument is accurate enough.
template <>
struct ActMath<Activation::gelu_tanh> {
  static constexpr float kTail = -4.5f;
  template <bool kLowp>
  __device__ __forceinline__ static float act(float x) {
    const float xc = fminf(x, 10.0f);  // e^(-2u) is 0 beyond: keeps x^3 finite
    const float two_u = xc * fmaf(kTanhC2.hi, xc * xc, kTanhC1.hi);
    if constexpr (kLowp) return x * rcp_approx(1.0f + exp_approx(-two_u));
    return __fdividef(x, 1.0f + expf(-two_u));
  }
  // g = E / (1 + E), E = e^(2u) computed from a float-float 2u.
  __device__ static float tail_g(float x, int& gk) {
    x = fmaxf(x, -200.0f);
    const FF e = ff_mul(tanh_arg_ff(x), kLog2e);
    const float m = exp2_split(e, gk);
    return m / (1.0f + ldexpf(m, gk));
  }
};

template <Activation A>
__device__ __noinline__ float act_mul_slow(float x, float y) {
  constexpr float kInf = __builtin_huge_valf();
  if (isnan(x) || isnan(y)) return x + y;  // propagates the NaN
  if (isinf(y)) {
    // act(x) has the sign of x and is never 0 for finite x != 0; act(-inf) is
    // NaN by the formula (-inf / inf).
    if (x == 0.0f || x == -kInf) return __int_as_float(0x7fc00000);
    return (signbit(x) != signbit(y)) ? -kInf : kInf;
  }
  if (x == -kInf) return __int_as_float(0x7fc00000);
  if (isinf(x) || x == 0.0f || y == 0.0f) return x * y;  // +inf * y, or a signed zero
  int ex, ey, gk = 0;
  const float xm = frexpf(x, &ex), ym = frexpf(y, &ey);
  // Tiny x: act(x) = x / 2 to relative 2^-125 for all three activations.
  const float gm = is_tiny(x) ? 0.5f : ActMath<A>::tail_g(x, gk);
  return ldexpf(xm * ym * gm, ex + ey + gk);
}

// Whether act(x) * y takes the fast path (NaN fails the comparison).
template <Activation A>
__device__ __forceinline__ bool fast_ok(float x) {
  return x >= ActMath<A>::kTail && !is_tiny(x);
}

// fast_ok over a vector, in two accumulators (2 instructions per element
// instead of a predicate chain per element): `ok` ANDs x >= kTail, `key`
// takes the minimum of 2|x|_bits - 1, which is below 2^25 - 1 exactly for
// the tiny x (0 < |x| < 2^-125 = bits 0x01000000; x = 0 wraps to the top).
struct FastOk {
  bool ok = true;
  unsigned key = ~0u;
  template <Activation A>
  __device__ __forceinline__ void add(float x) {
    ok = ok & (x >= ActMath<A>::kTail);
    const unsigned k = (__float_as_uint(x) << 1) - 1u;
    key = k < key ? k : key;
  }
  __device__ __forceinline__ bool all() const { return ok && key >= (0x01000000u << 1) - 1u; }
};

// act(x) * y, computed in f32 (kLowp: for a 16-bit output, see the top).
template <Activation A, bool kLowp = false>
__device__ __forceinline__ float act_mul(float x, float y) {
  if (fast_ok<A>(x)) return ActMath<A>::template act<kLowp>(x) * y;
  return act_mul_slow<A>(x, y);
}

// act_mul over N pairs, in place in x. One fast-path test for the vector
// first; then, when every pair passes (all but the rarest inputs), the fast
// path for every pair without a branch, so the N chains interleave (one
// branch per element kept them apart: ~50 cycles of latency each, 8 in a
// row per thread); otherwise act_mul pair by pair. Only x and y are live
// across the test (a 32-register block kept 60 bytes of spills with the
// fast results live too).
template <Activation A, bool kLowp, int N>
__device__ __forceinline__ void act_mul_n(float (&x)[N], const float (&y)[N]) {
  FastOk fast;
  MOEKIT_ACT_UNROLL
  for (int i = 0; i < N; ++i) fast.add<A>(x[i]);
  if (fast.all()) {
    MOEKIT_ACT_UNROLL
    for (int i = 0; i < N; ++i) x[i] = ActMath<A>::template act<kLowp>(x[i]) * y[i];
  } else {
    MOEKIT_ACT_UNROLL
    for (int i = 0; i < N; ++i) x[i] = act_mul<A, kLowp>(x[i], y[i]);
  }
}

}  // namespace moekit::act::detail
