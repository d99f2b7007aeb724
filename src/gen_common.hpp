// What the families' input generators share (`moekit gen <family>`, and kernel
// commands run without an input file). Each family's generator lives in
// src/<family>/gen.*; all are deterministic for a given seed on one platform.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "display.hpp"
#include "errors.hpp"
#include "half.hpp"

namespace moekit::gen {

inline constexpr double kInt32Max = double(std::numeric_limits<std::int32_t>::max());

// Guards against asking for more memory than a sane input needs. `limit` is the
// most elements the family can take at all (index math in int32, say).
inline void check_size(double elements, std::string_view what, double limit = kInt32Max * 4) {
  if (elements > limit)
    throw InputError(fmt::format("{:.0f} elements of {} is too large (at most {:.0f})", elements, what, limit));
}

// A finite number, the whole of `s`; `what` names the option in the error.
inline double parse_number(const std::string& s, std::string_view what) {
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (...) {
  }
  throw InputError(fmt::format("{}: bad number '{}'", what, printable(s)));
}

// ---- random numbers ----------------------------------------------------------
// SplitMix64 used as a counter-based generator: number i of a stream is
// mix64(key + (i + 1) * gamma), so a row or an element can be drawn without
// generating what comes before it, and every draw is a few multiplications.
inline constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ull;

inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Unrelated keys for the generators that share a seed.
inline std::uint64_t stream_key(std::uint64_t seed, std::uint64_t stream) { return mix64(mix64(seed) ^ (stream * kGamma)); }

inline std::uint64_t counter_at(std::uint64_t key, std::uint64_t i) { return mix64(key + (i + 1) * kGamma); }

// A short sequential stream (one token's or one row's draws), started at a
// counter-based point.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() { return mix64(s += kGamma); }
  // Uniform in [0, n), n >= 1 (multiply-shift; bias below n / 2^64).
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Several small uniform indices from one random number: an index is the high
// part of x * bound and the low part carries on as the next x; a fresh number
// comes before the bounds' product passes 2^32, so each index keeps at least
// 32 bits of randomness (bias below bound / 2^32).
struct IndexStream {
  Rng& rng;
  std::uint64_t x = 0, used = std::uint64_t{1} << 32;
  std::uint64_t below(std::uint64_t bound) {  // 1 <= bound < 2^32
    if (used > (std::uint64_t{1} << 32) / bound) x = rng.next(), used = 1;
    used *= bound;
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * bound;
    x = static_cast<std::uint64_t>(m);
    return static_cast<std::uint64_t>(m >> 64);
  }
};

template <class T>
inline void shuffle(T* v, std::size_t n, Rng& rng) {
  IndexStream idx{rng};
  for (std::size_t j = n; j > 1; --j) std::swap(v[j - 1], v[idx.below(j)]);
}

// ---- normal values -----------------------------------------------------------
// Approximately standard normal from 32 random bits: the top 12 bits pick one
// of 4096 equal-probability bins of the normal distribution, the low 20 bits
// place the value linearly between the bin's exact quantiles. The two outer
// bins (|x| > 3.49, 1 draw in 2048) use the tail x = sqrt(a^2 - 2 ln w),
// reaching about 6.3. Mean 0 and symmetric by construction, variance 1 within
// 1e-3, no table lookups beyond 32 KiB.
struct NormalTable {
  static constexpr int kBits = 12, kBins = 1 << kBits;
  float q[kBins + 1];  // q[j] = Phi^-1(j / kBins); q[0] and q[kBins] unused
  float a2;            // q[1]^2: start of the tail
  NormalTable() {
    for (int j = 1; j <= kBins / 2; ++j) {
      const double p = double(j) / kBins;
      double lo = -10, hi = 0;  // Phi(x) = erfc(-x / sqrt 2) / 2 is increasing: bisect
      for (int it = 0; it < 64; ++it) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
      }
      q[j] = static_cast<float>(j == kBins / 2 ? 0.0 : (lo + hi) / 2);
      q[kBins - j] = -q[j];
    }
    q[0] = q[1];
    q[kBins] = q[kBins - 1];
    a2 = q[1] * q[1];
  }
  float operator()(std::uint32_t u) const {
    const std::uint32_t bin = u >> (32 - kBits);
    const float f = static_cast<float>(u & ((1u << (32 - kBits)) - 1)) * (1.0f / float(1u << (32 - kBits)));
    if (bin == 0 || bin == kBins - 1) [[unlikely]] {
      const float w = f + 0.5f / float(1u << (32 - kBits));  // (0, 1]
      const float x = std::sqrt(a2 - 2.0f * std::log(w));
      return bin == 0 ? -x : x;
    }
    return q[bin] + f * (q[bin + 1] - q[bin]);
  }
};

inline const NormalTable& normal_table() {
  static const NormalTable t;
  return t;
}

// Round to nearest even, as f32_to_bf16_bits / f32_to_f16_bits do, without
// the double round trip; values outside the fast path (never NaN here, f16
// subnormals and overflow) take the exact general conversion.
inline std::uint16_t to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline std::uint16_t to_f16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a < 0x38800000u || a >= 0x477ff000u) [[unlikely]]
    return f32_to_f16_bits(x);  // below 2^-14 (subnormal) or rounds to infinity
  const std::uint32_t h = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | h);
}

// Open-addressing set of non-negative int32 values, emptied in time
// proportional to what was inserted.
class SmallSet {
 public:
  explicit SmallSet(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 4 * n) cap *= 2;  // short probes: few mispredicted branches
    slots_.assign(cap, -1);
    mask_ = cap - 1;
  }
  bool insert(std::int32_t x) {
    std::size_t h = (static_cast<std::uint32_t>(x) * 0x9e3779b1u) & mask_;
    while (slots_[h] >= 0) {
      if (slots_[h] == x) return false;
      h = (h + 1) & mask_;
    }
    slots_[h] = x;
    used_.push_back(h);
    return true;
  }
  void clear() {
    for (auto h : used_) slots_[h] = -1;
    used_.clear();
  }

 private:
  std::vector<std::int32_t> slots_;
  std::vector<std::size_t> used_;
  std::size_t mask_ = 0;
};

}  // namespace moekit::gen
