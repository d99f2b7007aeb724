// CPU tests: f16/bf16 conversions (src/half.hpp), the act-and-mul reference and
// its checker (src/act_and_mul/reference.cpp). The checker tests make sure it can fail.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "half.hpp"
#include "act_and_mul/buffers.hpp"
#include "act_and_mul/reference.hpp"

using namespace moekit;
using moekit::act::Activation;
using moekit::act::DType;
using moekit::act::Problem;

namespace {

constexpr float kInfF = std::numeric_limits<float>::infinity();
constexpr float kNaNF = std::numeric_limits<float>::quiet_NaN();

std::uint16_t f16_oracle(float x) {
  // GCC's _Float16 conversion (round to nearest even in software/F16C) as an
  // independent check of ours.
  const _Float16 h = static_cast<_Float16>(x);
  std::uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

// bf16 oracle by integer rounding on the float's bits (the textbook form).
std::uint16_t bf16_oracle(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("f16: every pattern survives f16 -> f32 -> f16") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = f16_bits_to_f32(h);
    const std::uint16_t back = f32_to_f16_bits(f);
    if (f16_is_nan(h)) {
      REQUIRE(std::isnan(f));
      REQUIRE(f16_is_nan(back));
      REQUIRE((back & 0x8000) == (h & 0x8000));
    } else {
      REQUIRE(back == h);
      REQUIRE(f16_bits_to_f64(h) == static_cast<double>(f));
    }
  }
}

TEST_CASE("bf16: every pattern survives bf16 -> f32 -> bf16") {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const float f = bf16_bits_to_f32(h);
    const std::uint16_t back = f32_to_bf16_bits(f);
    if (bf16_is_nan(h)) {
      REQUIRE(std::isnan(f));
      REQUIRE(bf16_is_nan(back));
    } else {
      REQUIRE(back == h);
    }
  }
}

TEST_CASE("f16: known values, ties to even, subnormals, overflow") {
  CHECK(f32_to_f16_bits(1.0f) == 0x3c00);
  CHECK(f32_to_f16_bits(-2.0f) == 0xc000);
  CHECK(f32_to_f16_bits(65504.0f) == 0x7bff);
  CHECK(f32_to_f16_bits(65519.99f) == 0x7bff);
  CHECK(f32_to_f16_bits(65520.0f) == 0x7c00);  // tie at the top rounds to even = inf
  CHECK(f32_to_f16_bits(kInfF) == 0x7c00);
  CHECK(f32_to_f16_bits(-kInfF) == 0xfc00);
  CHECK(f16_is_nan(f32_to_f16_bits(kNaNF)));
  CHECK(f16_is_nan(f32_to_f16_bits(-kNaNF)));
  CHECK(f32_to_f16_bits(0.0f) == 0x0000);
  CHECK(f32_to_f16_bits(-0.0f) == 0x8000);
  CHECK(f32_to_f16_bits(0x1p-24f) == 0x0001);               // smallest subnormal
  CHECK(f32_to_f16_bits(0x1p-25f) == 0x0000);               // tie -> even (0)
  CHECK(f32_to_f16_bits(0x1.000002p-25f) == 0x0001);        // just above the tie
  CHECK(f32_to_f16_bits(0x3p-25f) == 0x0002);               // tie 1.5 -> 2
  CHECK(f32_to_f16_bits(0x5p-25f) == 0x0002);               // tie 2.5 -> 2
  CHECK(f32_to_f16_bits(0x1p-14f - 0x1p-25f) == 0x0400);    // largest subnormal tie -> min normal
  CHECK(f32_to_f16_bits(1.0f + 0x1p-11f) == 0x3c00);        // tie -> even
  CHECK(f32_to_f16_bits(1.0f + 0x3p-11f) == 0x3c02);        // tie -> even (up)
  CHECK(f32_to_f16_bits(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
  CHECK(f16_bits_to_f32(0x0001) == 0x1p-24f);
  CHECK(f16_bits_to_f32(0x03ff) == 0x3ffp-24f);
  CHECK(f16_bits_to_f32(0x7bff) == 65504.0f);
  CHECK(std::isinf(f16_bits_to_f32(0xfc00)));
  CHECK(f16_bits_to_f32(0xfc00) < 0);
}

TEST_CASE("f16: double is rounded once, not through float") {
  // Rounds to float's 1 + 2^-11 (an exact f16 tie, which would go to 1.0), but
  // the double lies above the tie, so the single rounding goes up.
  const double x = 1.0 + 0x1p-11 + 0x1p-40;
  CHECK(f32_to_f16_bits(static_cast<float>(x)) == 0x3c00);
  CHECK(f64_to_f16_bits(x) == 0x3c01);
  // Same for bf16 (tie at 1 + 2^-8).
  const double y = 1.0 + 0x1p-8 + 0x1p-40;
  CHECK(f32_to_bf16_bits(static_cast<float>(y)) == 0x3f80);
  CHECK(f64_to_bf16_bits(y) == 0x3f81);
  // Doubles far below the smallest subnormal go to zero, keeping the sign.
  CHECK(f64_to_f16_bits(1e-300) == 0x0000);
  CHECK(f64_to_f16_bits(-1e-300) == 0x8000);
  CHECK(f64_to_bf16_bits(-1e-300) == 0x8000);
  CHECK(f64_to_f16_bits(1e300) == 0x7c00);
  CHECK(f64_to_bf16_bits(-1e300) == 0xff80);
}

TEST_CASE("f16/bf16: agree with independent conversions on random and edge floats") {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    // Random patterns cover every exponent, subnormals, inf and NaN.
    const float f = std::bit_cast<float>(bits(rng));
    const std::uint16_t a = f32_to_f16_bits(f), b = f16_oracle(f);
    if (std::isnan(f)) {
      REQUIRE(f16_is_nan(a));
    } else {
      REQUIRE(a == b);
    }
    const std::uint16_t c = f32_to_bf16_bits(f), e = bf16_oracle(f);
    if (std::isnan(f)) {
      REQUIRE(bf16_is_nan(c));
    } else {
      REQUIRE(c == e);
    }
  }
}

TEST_CASE("bf16: known values, ties, subnormals, overflow") {
  CHECK(f32_to_bf16_bits(1.0f) == 0x3f80);
  CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie -> even
  CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie -> even (up)
  CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x3f808001u)) == 0x3f81);
  CHECK(f32_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds up to inf
  CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x00010000u)) == 0x0001);  // bf16 subnormal
  CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x00008000u)) == 0x0000);  // tie -> 0
  CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x00018000u)) == 0x0002);  // tie -> 2
  CHECK(f32_to_bf16_bits(std::bit_cast<float>(0x80000001u)) == 0x8000);
  CHECK(bf16_bits_to_f32(0x0001) == std::bit_cast<float>(0x00010000u));
  CHECK(f32_to_bf16_bits(-kInfF) == 0xff80);
  CHECK(bf16_is_nan(f32_to_bf16_bits(kNaNF)));
  CHECK(bf16_is_inf(0x7f80));
  CHECK_FALSE(bf16_is_inf(0x7f81));
}

TEST_CASE("ULP distances") {
  CHECK(ulp_distance_f16(0x3c00, 0x3c01) == 1);
  CHECK(ulp_distance_f16(0x3c01, 0x3c00) == 1);
  CHECK(ulp_distance_f16(0x0000, 0x8000) == 0);  // +0 and -0
  CHECK(ulp_distance_f16(0x0001, 0x8001) == 2);  // across zero
  CHECK(ulp_distance_f16(0x7bff, 0x7c00) == 1);  // max finite to inf
  CHECK(ulp_distance_bf16(0x3f80, 0xbf80) == 2 * 0x3f80);
  CHECK(ulp_distance_f32(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ulp_distance_f32(-0.0f, 0.0f) == 0);
}

// ---- reference ---------------------------------------------------------------

namespace {

std::vector<float> ref_f32(Activation a, const std::vector<float>& x, const std::vector<float>& y) {
  Problem p{1, static_cast<std::int64_t>(x.size()), DType::f32, a};
  std::vector<float> in(x);
  in.insert(in.end(), y.begin(), y.end());
  std::vector<float> out(x.size());
  act::reference(p, in.data(), out.data());
  return out;
}

}  // namespace

TEST_CASE("reference: known activation values (f32)") {
  const std::vector<float> x{1.0f, -1.0f, 2.0f, -3.0f}, y{1.0f, 1.0f, 1.0f, 2.0f};
  auto s = ref_f32(Activation::silu, x, y);
  CHECK(s[0] == static_cast<float>(0.7310585786300049));
  CHECK(s[1] == static_cast<float>(-0.2689414213699951));
  CHECK(s[2] == static_cast<float>(1.7615941559557646));
  CHECK(s[3] == static_cast<float>(2 * -0.14227761953270035));
  auto g = ref_f32(Activation::gelu, x, y);
  CHECK(g[0] == static_cast<float>(0.8413447460685429));
  CHECK(g[1] == static_cast<float>(-0.15865525393145707));
  CHECK(g[2] == static_cast<float>(1.9544997361036416));
  CHECK(g[3] == static_cast<float>(2 * -0.004049694094890287));
  auto t = ref_f32(Activation::gelu_tanh, x, y);
  CHECK(t[0] == static_cast<float>(0.8411919906082768));
  CHECK(t[1] == static_cast<float>(-0.15880800939172324));
  CHECK(t[2] == static_cast<float>(1.954597694087775));
  CHECK(t[3] == static_cast<float>(2 * -0.0036373920817729943));
}

TEST_CASE("reference: non-finite inputs and far tails") {
  for (Activation a : {Activation::silu, Activation::gelu, Activation::gelu_tanh}) {
    CAPTURE(static_cast<int>(a));
    const std::vector<float> x{kNaNF, 1.0f, kInfF, -kInfF, kInfF, 0.0f, -3.0f, -500.0f, kInfF, -1e30f};
    const std::vector<float> y{1.0f, kNaNF, 2.0f, 2.0f, 0.0f, kInfF, kInfF, -kInfF, -kInfF, 1e30f};
    auto r = ref_f32(a, x, y);
    CHECK(std::isnan(r[0]));
    CHECK(std::isnan(r[1]));
    CHECK(r[2] == kInfF);          // act(+inf) = +inf
    CHECK(std::isnan(r[3]));       // act(-inf) = NaN by the formula
    CHECK(std::isnan(r[4]));       // inf * 0
    CHECK(std::isnan(r[5]));       // act(0) * inf
    CHECK(r[6] == -kInfF);         // act(-3) < 0, times +inf
    CHECK(r[7] == kInfF);          // act(-500) is tiny but negative: times -inf
    CHECK(r[8] == -kInfF);
    CHECK(r[9] == 0.0f);           // underflows to (-)0
  }
  // silu far tail: x e^x y stays representable for huge y even where e^-x
  // overflows float.
  auto s = ref_f32(Activation::silu, {-100.0f}, {1e30f});
  CHECK(s[0] == doctest::Approx(-100.0 * std::exp(-100.0) * 1e30).epsilon(1e-6));
  CHECK(s[0] < 0);
  // gelu-tanh far tail (1 + tanh would cancel to 0 in double).
  auto t = ref_f32(Activation::gelu_tanh, {-10.0f}, {1e30f});
  CHECK(t[0] < 0);
  CHECK(t[0] > -1e-3f);
}

TEST_CASE("reference: f16 and bf16 are rounded from double once") {
  Problem p{2, 3, DType::f16, Activation::silu};
  std::vector<std::uint16_t> in(12);
  const float xs[6] = {0.5f, -2.0f, 3.25f, 1.5f, -0.75f, 6.0f};
  for (int t = 0; t < 2; ++t)
    for (int j = 0; j < 3; ++j) {
      in[t * 6 + j] = f32_to_f16_bits(xs[t * 3 + j]);
      in[t * 6 + 3 + j] = f32_to_f16_bits(1.0f + 0.5f * static_cast<float>(j));
    }
  std::vector<std::uint16_t> out(6);
  act::reference(p, in.data(), out.data());
  for (int t = 0; t < 2; ++t)
    for (int j = 0; j < 3; ++j) {
      const double x = f16_bits_to_f64(in[t * 6 + j]), y = f16_bits_to_f64(in[t * 6 + 3 + j]);
      CHECK(out[t * 3 + j] == f64_to_f16_bits(x / (1 + std::exp(-x)) * y));
    }
  p.dtype = DType::bf16;
  for (auto& v : in) v = f32_to_bf16_bits(f16_bits_to_f32(v));
  act::reference(p, in.data(), out.data());
  for (int t = 0; t < 2; ++t)
    for (int j = 0; j < 3; ++j) {
      const double x = bf16_bits_to_f64(in[t * 6 + j]), y = bf16_bits_to_f64(in[t * 6 + 3 + j]);
      CHECK(out[t * 3 + j] == f64_to_bf16_bits(x / (1 + std::exp(-x)) * y));
    }
}

// ---- checker -----------------------------------------------------------------

TEST_CASE("checker: f16/bf16 pass within 1 ULP, fail beyond, report where") {
  for (DType dt : {DType::f16, DType::bf16}) {
    Problem p{2, 3, dt, Activation::silu};
    const std::uint16_t one = dt == DType::f16 ? 0x3c00 : 0x3f80;
    std::vector<std::uint16_t> ref(6, one), got(6, one);
    auto r = act::check(p, ref.data(), got.data());
    CHECK(r.ok);
    CHECK(r.max_error == 0);
    CHECK(r.error_unit == "ulp");
    got[4] = one + 1;  // 1 ULP: fine
    r = act::check(p, ref.data(), got.data());
    CHECK(r.ok);
    CHECK(r.max_error == 1);
    got[5] = one - 2;  // 2 ULP: token 1, column 2
    r = act::check(p, ref.data(), got.data());
    CHECK_FALSE(r.ok);
    CHECK(r.max_error == 2);
    CHECK(r.first_difference.find("token 1, column 2") != std::string::npos);
    CHECK(r.first_difference.find("1 of 6") != std::string::npos);
  }
}

TEST_CASE("checker: NaN must match NaN, infinities must match exactly") {
  Problem p{1, 2, DType::f16, Activation::gelu};
  std::vector<std::uint16_t> ref{0x7e00, 0x7bff}, got{0x7e00, 0x7bff};
  CHECK(act::check(p, ref.data(), got.data()).ok);
  got[0] = 0xfe01;  // another NaN: still a NaN
  CHECK(act::check(p, ref.data(), got.data()).ok);
  got[0] = 0x3c00;  // a number where NaN is expected
  auto r = act::check(p, ref.data(), got.data());
  CHECK_FALSE(r.ok);
  CHECK(r.first_difference.find("column 0") != std::string::npos);
  got[0] = 0x7e00;
  got[1] = 0x7c00;  // inf where the max finite is expected: 1 ULP apart, still wrong
  CHECK_FALSE(act::check(p, ref.data(), got.data()).ok);
  ref[1] = 0xfc00;
  got[1] = 0x7c00;  // wrong sign of inf
  CHECK_FALSE(act::check(p, ref.data(), got.data()).ok);
  got[1] = 0xfc00;
  CHECK(act::check(p, ref.data(), got.data()).ok);
  ref[0] = 0x3c00;
  got[0] = 0x7e00;  // NaN where a number is expected
  CHECK_FALSE(act::check(p, ref.data(), got.data()).ok);
}

TEST_CASE("checker: f32 relative bound and the absolute floor near zero") {
  Problem p{1, 3, DType::f32, Activation::silu};
  std::vector<float> ref{1.0f, -3.0f, 1e-40f}, got{1.0f + 5e-6f, -3.0f, 1e-40f};
  auto r = act::check(p, ref.data(), got.data());
  CHECK(r.ok);
  CHECK(r.error_unit == "rel");
  CHECK(r.max_error == doctest::Approx(5e-6).epsilon(0.05));
  got[1] = -3.0f * (1 + 2e-5f);
  r = act::check(p, ref.data(), got.data());
  CHECK_FALSE(r.ok);
  CHECK(r.first_difference.find("token 0, column 1") != std::string::npos);
  got[1] = -3.0f;
  got[2] = 1e-40f + 50 * 0x1p-149f;  // subnormal: 50 steps are inside the floor
  CHECK(act::check(p, ref.data(), got.data()).ok);
  got[2] = 1e-40f + 200 * 0x1p-149f;  // 200 steps are not
  CHECK_FALSE(act::check(p, ref.data(), got.data()).ok);
  got[2] = kNaNF;
  CHECK_FALSE(act::check(p, ref.data(), got.data()).ok);
  ref[2] = kNaNF;
  CHECK(act::check(p, ref.data(), got.data()).ok);
  ref[2] = kInfF;
  got[2] = std::numeric_limits<float>::max();
  CHECK_FALSE(act::check(p, ref.data(), got.data()).ok);
}

TEST_CASE("checker: empty problems pass") {
  Problem p{0, 7, DType::bf16, Activation::silu};
  CHECK(act::check(p, nullptr, nullptr).ok);
}

}  // TEST_SUITE

// The GB/s of the CLI and bench_act_and_mul count this traffic: 3 rows of
// 2d = 10 bf16 read (60 bytes), 3 rows of d = 5 written (30 bytes).
TEST_CASE("act-and-mul bytes moved: the input read once, the output written once") {
  Problem p{3, 5, DType::bf16, Activation::silu};
  CHECK(act::out_bytes(p) == 30);
  CHECK(act::bytes_moved(p) == 90.0);
  p.dtype = DType::f32;
  CHECK(act::bytes_moved(p) == 180.0);
}

TEST_CASE("f16/bf16: spacing16 is the step to the next value, for every positive pattern") {
  for (std::uint32_t h = 0; h < 0x7bffu; ++h) {  // up to the largest finite f16 below max
    const double v = f16_bits_to_f64(std::uint16_t(h)), next = f16_bits_to_f64(std::uint16_t(h + 1));
    REQUIRE(f16_spacing(v) == next - v);
    REQUIRE(f16_spacing(-v) == next - v);
  }
  for (std::uint32_t h = 0; h < 0x7f7fu; ++h) {
    const double v = bf16_bits_to_f64(std::uint16_t(h)), next = bf16_bits_to_f64(std::uint16_t(h + 1));
    REQUIRE(bf16_spacing(v) == next - v);
  }
  CHECK(std::isinf(f16_spacing(INFINITY)));
}
