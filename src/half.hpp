// Host-only IEEE binary16 (f16) and bfloat16 (bf16) bit conversions, and ULP
// distances between bit patterns. CUDA-free: used by the CPU references, the
// checkers and `moekit gen`, so it must not depend on cuda_fp16.h.
//
// All narrowing conversions round to nearest, ties to even, produce subnormals
// (no flush to zero), saturate to infinity on overflow and keep NaN a (quiet)
// NaN with its sign. The double -> f16/bf16 conversions round ONCE, so a value
// computed in double is never double-rounded through float.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace moekit {

namespace half_detail {

// A binary format with `E` exponent bits and `M` stored mantissa bits, packed
// in 16 bits (1 + E + M == 16). f16 = <5, 10>, bf16 = <8, 7>.
template <int E, int M>
struct Format {
  static_assert(1 + E + M == 16, "16-bit formats only");
  static constexpr int bias = (1 << (E - 1)) - 1;
  static constexpr int emin = 1 - bias;  // exponent of the smallest normal
  static constexpr std::uint16_t sign_mask = 0x8000;
  static constexpr std::uint16_t exp_mask = static_cast<std::uint16_t>(((1u << E) - 1) << M);
  static constexpr std::uint16_t man_mask = static_cast<std::uint16_t>((1u << M) - 1);
  static constexpr std::uint16_t quiet_bit = static_cast<std::uint16_t>(1u << (M - 1));
};

// Round a double to the nearest format value (ties to even). Works on the exact
// integer significand of the double, so the only rounding is the final one.
template <class F, int M>
constexpr std::uint16_t from_double(double x) {
  const std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const std::uint16_t sign = (b >> 63) ? F::sign_mask : 0;
  const int dexp = static_cast<int>((b >> 52) & 0x7ff);
  const std::uint64_t dman = b & ((std::uint64_t{1} << 52) - 1);
  if (dexp == 0x7ff) {
    if (dman == 0) return sign | F::exp_mask;  // infinity
    // NaN: keep the top payload bits, force quiet so it never becomes inf.
    return static_cast<std::uint16_t>(sign | F::exp_mask | F::quiet_bit |
                                      static_cast<std::uint16_t>(dman >> (52 - M)));
  }
  // x = S * 2^q exactly, S an integer below 2^53.
  std::uint64_t S = dexp ? (dman | (std::uint64_t{1} << 52)) : dman;
  const int q = dexp ? dexp - 1075 : -1074;
  if (S == 0) return sign;
  const int e = q + (std::bit_width(S) - 1);  // x in [2^e, 2^(e+1))
  const int te = e > F::emin ? e : F::emin;   // target exponent (subnormal floor)
  const int shift = (te - M) - q;             // S * 2^q in units of 2^(te-M)
  std::uint64_t R;
  if (shift <= 0) {
    R = S << -shift;  // exact: fewer significant bits than the target holds
  } else if (shift >= 63) {
    R = 0;  // below half the smallest subnormal (S < 2^53 <= 2^(shift-1))
  } else {
    R = S >> shift;
    const std::uint64_t rem = S & ((std::uint64_t{1} << shift) - 1);
    const std::uint64_t half = std::uint64_t{1} << (shift - 1);
    if (rem > half || (rem == half && (R & 1))) ++R;
  }
  // R is the significand in units of the target quantum: R < 2^M means
  // subnormal (te == emin), R == 2^(M+1) after rounding carries into the
  // exponent. ((te + bias - 1) << M) + R encodes all of these cases.
  const std::int64_t enc = (static_cast<std::int64_t>(te + F::bias - 1) << M) + static_cast<std::int64_t>(R);
  if (enc >= F::exp_mask) return sign | F::exp_mask;  // overflow -> infinity
  return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(enc));
}

template <class F, int M>
inline double to_double(std::uint16_t h) {
  const bool neg = h & F::sign_mask;
  const int exp = (h & F::exp_mask) >> M;
  const int man = h & F::man_mask;
  double v;
  if (exp == (F::exp_mask >> M)) {
    v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), F::emin - M);
  } else {
    v = std::ldexp(static_cast<double>(man | (1 << M)), exp - F::bias - M);
  }
  return neg ? -v : v;
}

// Position of a finite or infinite pattern on the number line, in ULPs: both
// zeros map to 0 and neighbours differ by 1 (largest finite -> inf is 1).
constexpr std::int64_t ordinal16(std::uint16_t h) {
  const std::int64_t mag = h & 0x7fff;
  return (h & 0x8000) ? -mag : mag;
}

}  // namespace half_detail

using F16Format = half_detail::Format<5, 10>;
using BF16Format = half_detail::Format<8, 7>;

// ---- f16 -------------------------------------------------------------------
inline std::uint16_t f64_to_f16_bits(double x) { return half_detail::from_double<F16Format, 10>(x); }
// float -> double is exact, so this is a single rounding as well.
inline std::uint16_t f32_to_f16_bits(float x) { return f64_to_f16_bits(static_cast<double>(x)); }
inline double f16_bits_to_f64(std::uint16_t h) { return half_detail::to_double<F16Format, 10>(h); }
inline float f16_bits_to_f32(std::uint16_t h) {
  if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff)) {
    // NaN: widen the payload bit for bit (quieted), as the GPU's cvt does.
    return std::bit_cast<float>(static_cast<std::uint32_t>(h & 0x8000) << 16 | 0x7fc00000u |
                                static_cast<std::uint32_t>(h & 0x03ff) << 13);
  }
  return static_cast<float>(f16_bits_to_f64(h));
}
inline bool f16_is_nan(std::uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff); }
inline bool f16_is_inf(std::uint16_t h) { return (h & 0x7fff) == 0x7c00; }

// ---- bf16 ------------------------------------------------------------------
inline std::uint16_t f64_to_bf16_bits(double x) { return half_detail::from_double<BF16Format, 7>(x); }
inline std::uint16_t f32_to_bf16_bits(float x) { return f64_to_bf16_bits(static_cast<double>(x)); }
// bf16 is the top half of a float: widening is a shift.
inline float bf16_bits_to_f32(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}
inline double bf16_bits_to_f64(std::uint16_t h) { return static_cast<double>(bf16_bits_to_f32(h)); }
inline bool bf16_is_nan(std::uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x007f); }
inline bool bf16_is_inf(std::uint16_t h) { return (h & 0x7fff) == 0x7f80; }

// ---- Spacing of values ----------------------------------------------------------
// The distance between neighbouring values of the format at |v|: the
// subnormals' spacing below the smallest normal (0 and NaN included), infinite
// at an infinite v.
inline double spacing16(double v, int mantissa_bits, int emin) {
  return std::ldexp(1.0, std::max(std::ilogb(v), emin) - mantissa_bits);
}
inline double f16_spacing(double v) { return spacing16(v, 10, -14); }
inline double bf16_spacing(double v) { return spacing16(v, 7, -126); }

// ---- ULP distances -----------------------------------------------------------
// Number of representable values between two patterns of the same format
// (+0 and -0 are the same point). NaN handling is the caller's: the result
// for a NaN pattern is meaningless, so test f16_is_nan/bf16_is_nan first.
inline std::int64_t ulp_distance16(std::uint16_t a, std::uint16_t b) {
  const std::int64_t d = half_detail::ordinal16(a) - half_detail::ordinal16(b);
  return d < 0 ? -d : d;
}
inline std::int64_t ulp_distance_f16(std::uint16_t a, std::uint16_t b) { return ulp_distance16(a, b); }
inline std::int64_t ulp_distance_bf16(std::uint16_t a, std::uint16_t b) { return ulp_distance16(a, b); }

// Same for float patterns (finite or infinite; not NaN).
inline std::int64_t ulp_distance_f32(float a, float b) {
  auto ord = [](float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::int64_t mag = u & 0x7fffffffu;
    return (u & 0x80000000u) ? -mag : mag;
  };
  const std::int64_t d = ord(a) - ord(b);
  return d < 0 ? -d : d;
}

}  // namespace moekit
