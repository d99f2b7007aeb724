// Host emulation of the kernels' f32 math (kernels/act_and_mul/act_math.cuh):
// the same source compiled as C++ with libm standing in for the CUDA math
// library, checked against the double reference over random and edge inputs.
// It tests the algorithm (fast/slow path split, tail scalings, non-finite
// rules) without a GPU; the GPU test checks the real thing.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "primitives/fast_div.hpp"
#include "half.hpp"
#include "act_and_mul/reference.hpp"

namespace {
// erfcx(z) = e^(z^2) erfc(z), in double, asymptotic series where e^(z^2) overflows.
float host_erfcxf(float zf) {
  const double z = zf;
  if (z < 25.0) return static_cast<float>(std::exp(z * z) * std::erfc(z));
  const double r = 1.0 / (z * z);
  return static_cast<float>(1.0 / (z * std::sqrt(std::acos(-1.0))) * (1 - 0.5 * r + 0.75 * r * r - 1.875 * r * r * r));
}
// __fdividef: x * (1/y), the approximate division the GPU uses.
float host_fdividef(float x, float y) { return x * (1.0f / y); }
float host_int_as_float(int i) { return std::bit_cast<float>(i); }
unsigned host_float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
// The low-precision path's approximations, each off by its documented worst
// case (the direction from the argument's last bit, so both occur): __expf
// 2 + floor(1.173 |t|) ulp (CUDA Programming Guide), rcp.approx 1 ulp; a
// subnormal e^t may come out as anything from 0 up (ftz).
float off_by_ulps(float v, int ulps, bool up) {  // v > 0, finite
  const std::int64_t b = std::int64_t{std::bit_cast<std::uint32_t>(v)} + (up ? ulps : -ulps);
  return std::bit_cast<float>(static_cast<std::uint32_t>(std::clamp<std::int64_t>(b, 0, 0x7f800000)));
}
float host_exp_approx(float t) {
  const float r = std::exp(t);
  if (!std::isfinite(r) || r == 0.0f) return r;
  return off_by_ulps(r, 2 + static_cast<int>(1.173f * std::fabs(t)), std::bit_cast<std::uint32_t>(t) & 1);
}
float host_rcp_approx(float v) { return off_by_ulps(1.0f / v, 1, std::bit_cast<std::uint32_t>(v) & 1); }
}  // namespace

#define __device__
#define __forceinline__ inline
#define __noinline__
#define erfcxf host_erfcxf
#define __fdividef host_fdividef
#define __int_as_float host_int_as_float
#define __float_as_uint host_float_as_uint
using std::isinf;
using std::isnan;
using std::signbit;
#include "act_and_mul/act_math.cuh"
#undef __device__
#undef __forceinline__
#undef __noinline__

using namespace moekit;
using moekit::act::Activation;
using moekit::act::DType;
using moekit::act::Problem;

namespace {

// What the kernels compute for one pair: the vector path (act_mul_n) and, for
// scalar tails, act_mul; lowp for 16-bit outputs, as the kernels choose.
int g_scalar_mismatches = 0;  // act_mul and act_mul_n disagreeing

template <Activation A, bool kLowp>
float emulate(float x, float y) {
  float xs[1] = {x};
  const float ys[1] = {y};
  act::detail::act_mul_n<A, kLowp>(xs, ys);
  const float scalar = act::detail::act_mul<A, kLowp>(x, y);
  if (std::bit_cast<std::uint32_t>(scalar) != std::bit_cast<std::uint32_t>(xs[0])) ++g_scalar_mismatches;
  return xs[0];
}

template <bool kLowp>
float emulate(Activation a, float x, float y) {
  switch (a) {
    case Activation::silu: return emulate<Activation::silu, kLowp>(x, y);
    case Activation::gelu: return emulate<Activation::gelu, kLowp>(x, y);
    case Activation::gelu_tanh: return emulate<Activation::gelu_tanh, kLowp>(x, y);
  }
  return 0;
}

std::vector<float> edge_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v{0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f,
                       3.4e38f, -3.4e38f, 1e30f, -1e30f, 1e-40f, -1e-40f, 0x1p-149f, -0x1p-149f,
                       0x1p-126f, 0x1p-125f, 0x1.8p-126f, 65504.0f, -60000.0f};
  for (float t = -260.0f; t <= 20.0f; t += 0.37f) v.push_back(t);
  for (float t : {-3.99f, -4.0f, -4.01f, -4.49f, -4.5f, -4.51f, -79.9f, -80.0f, -80.1f, -9.5f, -10.5f, -13.0f,
                  -13.5f, -19.0f, -19.5f, -20.5f, -26.0f, -40.0f, -103.0f, -104.0f, -150.0f, -186.0f, -190.0f})
    v.push_back(t);
  return v;
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("prim::FastDivU32 matches division") {
  std::mt19937 rng(7);
  std::vector<std::uint32_t> divisors{1, 2, 3, 7, 8, 127, 512, 1792, 2304, 4095, 4096, 11008, 14336, 18432,
                                      65535, 65536, 1000003, 0x7fffffffu, 0x80000000u, 0xffffffffu};
  for (int i = 0; i < 200; ++i) divisors.push_back(rng() % 100000 + 1);
  for (std::uint32_t d : divisors) {
    const prim::FastDivU32 f(d);
    for (std::uint32_t n : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0xffffffffu, 0xfffffffeu, 0x80000000u}) {
      REQUIRE(f.div(n) == n / d);
    }
    for (int k = 0; k < 2000; ++k) {
      const std::uint32_t n = static_cast<std::uint32_t>(rng());
      REQUIRE(f.div(n) == n / d);
    }
  }
}

TEST_CASE("emulated device math stays within the accuracy contract") {
  // Every pair of edge values, plus random normal and wide random pairs, for
  // all three activations and output dtypes.
  std::vector<float> xs, ys;
  const auto e = edge_values();
  for (float a : e)
    for (float b : e) {
      xs.push_back(a);
      ys.push_back(b);
    }
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ue(-150.0f, 130.0f);
  for (int i = 0; i < 200000; ++i) {
    xs.push_back(nd(rng) * (i % 4 == 0 ? 8.0f : 1.0f));
    ys.push_back(nd(rng));
    // Wide magnitudes: x and y = +-2^u.
    const float ex = ue(rng) * 0.25f, ey = ue(rng);
    xs.push_back(std::ldexp(1.0f + 0.5f * nd(rng) * 0.1f, static_cast<int>(ex)) * (rng() & 1 ? 1 : -1) * 0.9f);
    ys.push_back(std::ldexp(1.3f, static_cast<int>(ey)) * (rng() & 1 ? 1 : -1));
  }
  const std::int64_t n = static_cast<std::int64_t>(xs.size());
  for (Activation a : {Activation::silu, Activation::gelu, Activation::gelu_tanh}) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      CAPTURE(static_cast<int>(a));
      CAPTURE(static_cast<int>(dt));
      // One token per pair: input row [x, y], d = 1.
      Problem p{n, 1, dt, a};
      std::vector<std::uint32_t> in32(2 * n), out32(n), ref32(n);
      std::vector<std::uint16_t> in16(2 * n), out16(n), ref16(n);
      for (std::int64_t i = 0; i < n; ++i) {
        float x = xs[i], y = ys[i];
        if (dt == DType::f32) {
          in32[2 * i] = std::bit_cast<std::uint32_t>(x);
          in32[2 * i + 1] = std::bit_cast<std::uint32_t>(y);
        } else {
          const bool h = dt == DType::f16;
          in16[2 * i] = h ? f32_to_f16_bits(x) : f32_to_bf16_bits(x);
          in16[2 * i + 1] = h ? f32_to_f16_bits(y) : f32_to_bf16_bits(y);
          x = h ? f16_bits_to_f32(in16[2 * i]) : bf16_bits_to_f32(in16[2 * i]);
          y = h ? f16_bits_to_f32(in16[2 * i + 1]) : bf16_bits_to_f32(in16[2 * i + 1]);
        }
        const float r = dt == DType::f32 ? emulate<false>(a, x, y) : emulate<true>(a, x, y);
        if (dt == DType::f32) {
          out32[i] = std::bit_cast<std::uint32_t>(r);
        } else {
          out16[i] = dt == DType::f16 ? f32_to_f16_bits(r) : f32_to_bf16_bits(r);
        }
      }
      CheckResult c;
      if (dt == DType::f32) {
        act::reference(p, in32.data(), ref32.data());
        c = act::check(p, ref32.data(), out32.data());
      } else {
        act::reference(p, in16.data(), ref16.data());
        c = act::check(p, ref16.data(), out16.data());
      }
      INFO(c.first_difference);
      CHECK(c.ok);
      MESSAGE("activation ", static_cast<int>(a), " dtype ", static_cast<int>(dt), ": max error ", c.max_error, " ",
              c.error_unit);
    }
  }
  CHECK(g_scalar_mismatches == 0);
}

}  // TEST_SUITE
