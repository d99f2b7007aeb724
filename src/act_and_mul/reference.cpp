// CPU reference and checker for SiLU/GELU-and-mul (semantics: docs/act-and-mul.md).
//
// The reference evaluates act(x) * y in double with numerically stable forms
// of each activation (no 1 + tanh or 1 + erf cancellation), then rounds once to
// the output dtype. Only the infinite-y case is written out by hand: there the
// double formula would turn an underflowed act(x) into 0 * inf = NaN, while
// act(x) is mathematically nonzero for every finite x != 0.
#include "act_and_mul/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "half.hpp"

namespace moekit::act {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
// f32 tolerance: |got - ref| <= 1e-5 * max(|ref|, 2^-126). Relative error
// where the result is a normal float; in the subnormal range, where f32 itself
// keeps only an absolute 2^-149 step, an absolute bound of 1e-5 * 2^-126
// (about 1.2e-43, 84 subnormal steps).
constexpr double kF32RelTolerance = 1e-5;
constexpr double kF32RelFloor = 0x1p-126;

// act(x) in double. silu: x / (1 + e^-x). gelu: x * Phi(x) with
// Phi(x) = erfc(-x / sqrt2) / 2 (the same as (1 + erf(x / sqrt2)) / 2 without
// the cancellation for negative x). gelu-tanh: x * (1 + tanh(u)) / 2 with
// u = sqrt(2/pi) (x + 0.044715 x^3), written as x / (1 + e^(-2u)).
double act_f64(Activation a, double x) {
  switch (a) {
    case Activation::silu:
      return x / (1.0 + std::exp(-x));
    case Activation::gelu:
      return x * 0.5 * std::erfc(-x / std::sqrt(2.0));
    case Activation::gelu_tanh: {
      const double k = std::sqrt(2.0 / std::acos(-1.0));
      const double two_u = 2.0 * k * (x + 0.044715 * x * x * x);
      return x / (1.0 + std::exp(-two_u));
    }
  }
  return kNaN;
}

double act_mul_f64(Activation a, double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return kNaN;
  if (std::isinf(y)) {
    // act(-inf) is NaN by the formula (-inf / inf, -inf * 0); act(0) = 0.
    if (x == 0.0 || x == -kInf) return kNaN;
    return (x > 0) == (y > 0) ? kInf : -kInf;
  }
  return act_f64(a, x) * y;
}

template <class Load, class Store>
void reference_impl(const Problem& p, Load load, Store store) {
  const std::int64_t d = p.d;
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    for (std::int64_t j = 0; j < d; ++j) {
      const double x = load(t * 2 * d + j);
      const double y = load(t * 2 * d + d + j);
      store(t * d + j, act_mul_f64(p.act, x, y));
    }
  }
}

std::string where(const Problem& p, std::int64_t i) {
  return fmt::format("token {}, column {}", i / p.d, i % p.d);
}

// f16/bf16: ULP distance, NaN must match NaN, infinities must match exactly.
template <class IsNan, class IsInf, class ToF32>
CheckResult check16(const Problem& p, const std::uint16_t* ref, const std::uint16_t* got,
                    IsNan is_nan, IsInf is_inf, ToF32 to_f32) {
  CheckResult r;
  r.error_unit = "ulp";
  const std::int64_t n = p.tokens * p.d;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t a = ref[i], b = got[i];
    bool fail;
    double err = 0;
    if (is_nan(a) || is_nan(b)) {
      fail = is_nan(a) != is_nan(b);
    } else if (is_inf(a) || is_inf(b)) {
      fail = a != b;
    } else {
      err = static_cast<double>(ulp_distance16(a, b));
      fail = err > 1.0;
    }
    if (err > r.max_error) r.max_error = err;
    if (fail) {
      if (bad == 0) {
        r.first_difference = fmt::format("{}: expected {:g} (0x{:04x}), got {:g} (0x{:04x})",
                                         where(p, i), to_f32(a), a, to_f32(b), b);
      }
      ++bad;
    }
  }
  if (bad) {
    r.ok = false;
    r.first_difference += fmt::format(" [{} of {} elements outside 1 ULP]", bad, n);
  }
  return r;
}

CheckResult check_f32(const Problem& p, const float* ref, const float* got) {
  CheckResult r;
  r.error_unit = "rel";
  const std::int64_t n = p.tokens * p.d;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double a = ref[i], b = got[i];
    bool fail;
    double err = 0;
    if (std::isnan(a) || std::isnan(b)) {
      fail = std::isnan(a) != std::isnan(b);
    } else if (std::isinf(a) || std::isinf(b)) {
      fail = a != b;
    } else {
      err = std::fabs(a - b) / std::max(std::fabs(a), kF32RelFloor);
      fail = err > kF32RelTolerance;
    }
    if (err > r.max_error) r.max_error = err;
    if (fail) {
      if (bad == 0) {
        r.first_difference = fmt::format("{}: expected {:.9g}, got {:.9g} (relative error {:.3g})",
                                         where(p, i), a, b, err);
      }
      ++bad;
    }
  }
  if (bad) {
    r.ok = false;
    r.first_difference += fmt::format(" [{} of {} elements outside tolerance]", bad, n);
  }
  return r;
}

}  // namespace

void reference(const Problem& p, const void* input, void* out) {
  switch (p.dtype) {
    case DType::f16: {
      auto in = static_cast<const std::uint16_t*>(input);
      auto o = static_cast<std::uint16_t*>(out);
      reference_impl(
          p, [&](std::int64_t i) { return f16_bits_to_f64(in[i]); },
          [&](std::int64_t i, double v) { o[i] = f64_to_f16_bits(v); });
      break;
    }
    case DType::bf16: {
      auto in = static_cast<const std::uint16_t*>(input);
      auto o = static_cast<std::uint16_t*>(out);
      reference_impl(
          p, [&](std::int64_t i) { return bf16_bits_to_f64(in[i]); },
          [&](std::int64_t i, double v) { o[i] = f64_to_bf16_bits(v); });
      break;
    }
    case DType::f32: {
      auto in = static_cast<const float*>(input);
      auto o = static_cast<float*>(out);
      reference_impl(
          p, [&](std::int64_t i) { return static_cast<double>(in[i]); },
          [&](std::int64_t i, double v) { o[i] = static_cast<float>(v); });
      break;
    }
  }
}

CheckResult check(const Problem& p, const void* ref, const void* got) {
  switch (p.dtype) {
    case DType::f16:
      return check16(p, static_cast<const std::uint16_t*>(ref), static_cast<const std::uint16_t*>(got),
                     f16_is_nan, f16_is_inf, f16_bits_to_f32);
    case DType::bf16:
      return check16(p, static_cast<const std::uint16_t*>(ref), static_cast<const std::uint16_t*>(got),
                     bf16_is_nan, bf16_is_inf, bf16_bits_to_f32);
    case DType::f32:
      return check_f32(p, static_cast<const float*>(ref), static_cast<const float*>(got));
  }
  return {};
}

}  // namespace moekit::act
