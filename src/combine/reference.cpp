// CPU reference and checker for combine (docs/combine.md).
#include "combine/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstring>

#include "half.hpp"

namespace moekit::combine {
namespace {

std::size_t esize(DType d) { return d == DType::f32 ? 4 : 2; }

float load(DType d, const void* base, std::int64_t i) {
  switch (d) {
    case DType::f32: return static_cast<const float*>(base)[i];
    case DType::bf16: return bf16_bits_to_f32(static_cast<const std::uint16_t*>(base)[i]);
    case DType::f16: return f16_bits_to_f32(static_cast<const std::uint16_t*>(base)[i]);
  }
  return 0.f;
}

void store(DType d, void* base, std::int64_t i, float v) {
  switch (d) {
    case DType::f32: static_cast<float*>(base)[i] = v; break;
    case DType::bf16: static_cast<std::uint16_t*>(base)[i] = f32_to_bf16_bits(v); break;
    case DType::f16: static_cast<std::uint16_t*>(base)[i] = f32_to_f16_bits(v); break;
  }
}

// The f32 result of element (t, c) before rounding, and its terms' magnitude.
std::pair<float, double> f32_result(const Problem& p, const void* x, const std::int32_t* inverse,
                                    const float* weights, std::int64_t t, std::int64_t c) {
  float acc = 0.f;
  double mag = 0;
  for (std::int32_t j = 0; j < p.topk; ++j) {
    const std::int32_t r = inverse[t * p.topk + j];
    if (r < 0) continue;
    const float v = load(p.dtype, x, std::int64_t(r) * p.hidden + c);
    acc = std::fmaf(weights[t * p.topk + j], v, acc);
    mag += std::fabs(double(weights[t * p.topk + j]) * double(v));
  }
  return {acc * p.scaling, mag * std::fabs(double(p.scaling))};
}

// Spacing of the output dtype's values at |v| (0 for f32: its check is relative).
double ulp_at(DType d, double v) {
  if (d == DType::f32) return 0;
  return d == DType::bf16 ? bf16_spacing(v) : f16_spacing(v);
}

}  // namespace

void reference(const Problem& p, const void* x, const std::int32_t* inverse, const float* weights, void* out) {
  for (std::int64_t t = 0; t < p.tokens; ++t)
    for (std::int64_t c = 0; c < p.hidden; ++c) {
      float acc = 0.f;
      for (std::int32_t j = 0; j < p.topk; ++j) {
        const std::int32_t r = inverse[t * p.topk + j];
        if (r >= 0) acc = std::fmaf(weights[t * p.topk + j], load(p.dtype, x, std::int64_t(r) * p.hidden + c), acc);
      }
      store(p.dtype, out, t * p.hidden + c, acc * p.scaling);
    }
}

CheckResult check(const Problem& p, const void* ref, const void* got) {
  CheckResult r;
  const std::size_t es = esize(p.dtype), n = static_cast<std::size_t>(p.tokens * p.hidden);
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(static_cast<const char*>(ref) + i * es, static_cast<const char*>(got) + i * es, es) == 0) continue;
    r.ok = false;
    r.max_error = 1;
    r.first_difference = fmt::format("out[{}, {}] = {:.9g}, expected {:.9g} (bit for bit)", i / p.hidden,
                                     i % p.hidden, load(p.dtype, got, i), load(p.dtype, ref, i));
    break;
  }
  return r;
}

CheckResult check_tolerant(const Problem& p, const void* x, const std::int32_t* inverse, const float* weights,
                           const void* got) {
  CheckResult r;
  for (std::int64_t t = 0; t < p.tokens; ++t)
    for (std::int64_t c = 0; c < p.hidden; ++c) {
      const auto [want, mag] = f32_result(p, x, inverse, weights, t, c);
      const double g = load(p.dtype, got, t * p.hidden + c);
      const double err = std::fabs(g - double(want));
      const double tol = std::max(ulp_at(p.dtype, want), 1e-5 * mag);
      r.max_error = std::max(r.max_error, tol > 0 ? err / tol : err);
      if (err <= tol) continue;
      r.ok = false;
      r.first_difference = fmt::format("out[{}, {}] = {:.9g}, expected {:.9g} within {:.3g} (order-free tolerance)", t,
                                       c, g, want, tol);
      return r;
    }
  return r;
}

}  // namespace moekit::combine
