// The experts CPU reference and checker (src/experts/reference.hpp) against a
// second formulation written here: plain loops over the formula of
// kernels/experts/experts.hpp with this file's own f16/bf16 rounding (none of
// the reference's helpers, nor src/half.hpp), hand-listed cases per
// activation, wrong answers the checker must reject and GPU-like f32 answers
// it must accept, the token sample, and the weight generator against an
// independent SplitMix64.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/workspace_slices.hpp"
#include "experts/experts.hpp"
#include "experts/grouped.hpp"
#include "experts/reference.hpp"
#include "experts/weights.hpp"
#include "fake_caps.hpp"

using namespace moekit;
using namespace moekit::experts;

namespace {

// ---------------------------------------------------------------------------
// This file's own 16-bit formats: round to nearest (ties to even) with
// subnormals and overflow to infinity, from the value's exponent alone.

struct Format {
  int sig;   // significant bits, the implicit one included
  int emin;  // exponent of the smallest normal
  double max;
};
constexpr Format kBf16{8, -126, 0x1.fep127};
constexpr Format kF16{11, -14, 65504.0};
Format format_of(DType d) { return d == DType::bf16 ? kBf16 : kF16; }

// The spacing of the format's values at |x| (x finite).
double ulp_of(DType d, double x) {
  const Format f = format_of(d);
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, f.emin) - (f.sig - 1));
}

// x rounded once to the format. x / q is exact (a power-of-two scaling) and
// below 2^sig, so nearbyint (ties to even in the default mode) is the rounding.
double round_to(DType d, double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double q = ulp_of(d, x);
  const double r = std::nearbyint(x / q) * q;
  return std::fabs(r) > format_of(d).max ? std::copysign(INFINITY, x) : r;
}

// The bits of a value the format holds exactly (sign, biased exponent, mantissa).
std::uint16_t bits_of(DType d, double v) {
  const Format f = format_of(d);
  const int mbits = f.sig - 1, bias = 1 - f.emin;
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  if (std::isinf(a)) return static_cast<std::uint16_t>(sign | (((1u << (15 - mbits)) - 1) << mbits));
  int e = 0;
  std::frexp(a, &e);
  const int ex = std::max(e - 1, f.emin);
  const auto m = static_cast<std::uint32_t>(a / std::ldexp(1.0, ex - mbits));  // exact
  if (double(m) * std::ldexp(1.0, ex - mbits) != a) throw std::logic_error("bits_of: a value the format does not hold");
  if (m < (1u << mbits)) return static_cast<std::uint16_t>(sign | m);  // subnormal
  return static_cast<std::uint16_t>(sign | (std::uint32_t(ex + bias) << mbits) | (m - (1u << mbits)));
}

double value_of(DType d, std::uint16_t b) {
  const Format f = format_of(d);
  const int mbits = f.sig - 1, bias = 1 - f.emin;
  const int ebits = 15 - mbits;
  const int be = (b >> mbits) & ((1 << ebits) - 1);
  const std::uint32_t m = b & ((1u << mbits) - 1);
  double a;
  if (be == (1 << ebits) - 1) a = m ? NAN : INFINITY;
  else if (be == 0) a = std::ldexp(double(m), f.emin - mbits);
  else a = std::ldexp(double(m | (1u << mbits)), be - bias - mbits);
  return (b & 0x8000) ? -a : a;
}

std::uint16_t to_bits(DType d, double x) { return bits_of(d, round_to(d, x)); }

// The next format value after v away from zero (v finite, representable).
double step_out(DType d, double v, double direction) {
  const double a = std::fabs(v);
  const double next = a + ulp_of(d, a == 0 ? std::ldexp(1.0, format_of(d).emin - format_of(d).sig) : a);
  return direction < 0 ? -next : next;
}

// ---------------------------------------------------------------------------
// SplitMix64 (Steele, Lea and Flood 2014; Vigna's splitmix64.c), written out
// again here: the state advances by the golden-ratio increment, then
// Stafford's Mix13 finalizer.
std::uint64_t my_splitmix64(std::uint64_t state) {
  std::uint64_t z = state + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// weights.hpp's value, written again: the linear index of (expert, row, col)
// in a [E, rows, cols] matrix hashed under the key splitmix64(2 seed + matrix),
// the top 24 bits centred, times sqrt(3 / inner) / 2^23 (one f32 multiply).
float my_weight(std::uint64_t seed, int matrix, std::int64_t e, std::int64_t row, std::int64_t col,
                std::int64_t rows, std::int64_t cols, std::int64_t inner) {
  const std::uint64_t index = (std::uint64_t(e) * std::uint64_t(rows) + std::uint64_t(row)) * std::uint64_t(cols) +
                              std::uint64_t(col);
  const std::uint64_t h = my_splitmix64(my_splitmix64(2 * seed + std::uint64_t(matrix)) ^ index);
  const std::int64_t v = std::int64_t(h >> 40) - (std::int64_t{1} << 23);
  const float scale = static_cast<float>(std::sqrt(3.0 / double(inner)) / double(1 << 23));
  return static_cast<float>(v) * scale;
}

// A deterministic stream of uniforms for the test's inputs.
struct Rng {
  std::uint64_t state;
  double uniform() { return double(my_splitmix64(state++) >> 11) * 0x1p-53; }                // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::int32_t below(std::int32_t n) { return static_cast<std::int32_t>(uniform() * n); }  // [0, n)
};

// ---------------------------------------------------------------------------
// A problem with its inputs. W1 and W2 are always held here; a generated case
// holds weight_value (weights.hpp) rounded here, and hands the reference only
// the seed.

struct Case {
  Problem p;
  std::vector<std::uint16_t> hidden, w1, w2;
  std::vector<std::int32_t> ids, map;
  std::vector<float> weights;
  bool generated = false;
  std::uint64_t seed = 0;

  Inputs inputs() const {
    Inputs in;
    in.hidden = hidden;
    in.ids = ids;
    in.weights = weights;
    in.expert_map = map;
    in.w.generated = generated;
    in.w.seed = seed;
    if (!generated) {
      in.w.w1 = w1;
      in.w.w2 = w2;
    }
    return in;
  }
  double hid(std::int64_t t, std::int64_t k) const { return value_of(p.dtype, hidden[t * p.hidden + k]); }
  double w1v(std::int64_t e, std::int64_t r, std::int64_t k) const {
    return value_of(p.dtype, w1[(e * 2 * p.inter + r) * p.hidden + k]);
  }
  double w2v(std::int64_t e, std::int64_t h, std::int64_t i) const {
    return value_of(p.dtype, w2[(e * p.hidden + h) * p.inter + i]);
  }
};

Problem problem(std::int64_t T, std::int32_t K, std::int32_t E, std::int64_t H, std::int64_t I, DType dt, Act act,
                W1Layout lay, float S, std::int32_t map_size = 0) {
  return make_problem(T, K, E, H, I, dt, act, lay, permute::Layout::compact, 16, S, map_size);
}

std::vector<std::uint16_t> bits(DType d, std::initializer_list<double> v) {
  std::vector<std::uint16_t> b;
  for (double x : v) b.push_back(bits_of(d, x));  // hand cases: values the format holds
  return b;
}

struct Spec {
  std::int64_t T;
  std::int32_t K, E;
  std::int64_t H, I;
  DType dt;
  Act act;
  W1Layout lay;
  float S;
  bool generated;
  std::int32_t map_size;  // 0: no map
  std::uint64_t seed;
  double amp = 2;  // hidden uniform in [-amp, amp]
};

Case make_case(const Spec& s) {
  Case c;
  c.p = problem(s.T, s.K, s.E, s.H, s.I, s.dt, s.act, s.lay, s.S, s.map_size);
  c.generated = s.generated;
  c.seed = s.seed;
  Rng rng{s.seed * 7919 + 1};
  const DType d = s.dt;
  for (std::int64_t i = 0; i < s.T * s.H; ++i) c.hidden.push_back(to_bits(d, rng.uniform(-s.amp, s.amp)));
  if (s.map_size > 0) {
    for (std::int32_t g = 0; g < s.map_size; ++g) c.map.push_back(rng.below(s.E + 1) - 1);  // [-1, E)
    c.map[0] = -1;
    c.map[s.map_size - 1] = s.E - 1;
  }
  const std::int32_t id_range = s.map_size > 0 ? s.map_size : s.E;
  for (std::int64_t i = 0; i < s.T * s.K; ++i) {
    const double r = rng.uniform();
    // Dropped slots: -1, and ids past the experts (or the map).
    c.ids.push_back(r < 0.1 ? -1 : r < 0.15 ? id_range + rng.below(3) : rng.below(id_range));
    c.weights.push_back(static_cast<float>(rng.uniform(0.05, 1.0)));
  }
  const std::int64_t E = s.E, H = s.H, I = s.I;
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t r = 0; r < 2 * I; ++r)
      for (std::int64_t k = 0; k < H; ++k)
        c.w1.push_back(to_bits(d, s.generated ? double(weight_value(s.seed, 0, e, r, k, 2 * I, H, weight_scale(H)))
                                              : rng.uniform(-1, 1) * std::sqrt(3.0 / double(H))));
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t i = 0; i < I; ++i)
        c.w2.push_back(to_bits(d, s.generated ? double(weight_value(s.seed, 1, e, h, i, H, I, weight_scale(I)))
                                              : rng.uniform(-1, 1) * std::sqrt(3.0 / double(I))));
  return c;
}

std::vector<std::int64_t> all_tokens(const Problem& p) {
  std::vector<std::int64_t> t(static_cast<std::size_t>(p.tokens));
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = std::int64_t(i);
  return t;
}

// ---------------------------------------------------------------------------
// The second formulation. Order::exact: sums in double, each intermediate
// rounded once where the GPU rounds it (h, a, y, out). The f32 orders are
// answers a correct GPU kernel may give: f32 products summed reversed,
// pairwise, as the naive kernel's warp does (32 strided lane sums, then a
// butterfly), or as tensor cores do (chunks of 16 added to the f32
// accumulator with truncation), the activation in f32, h, a and y rounded from f32, and the
// combine's f32 rule (fma over j ascending, times S, one rounding).

enum class Order { exact, f32_reversed, f32_pairwise, f32_warp, f32_mma_rz };

std::int32_t my_local(const Case& c, std::int32_t id) {
  if (c.map.empty()) return id >= 0 && id < c.p.experts ? id : -1;
  if (id < 0 || id >= std::int32_t(c.map.size())) return -1;
  const std::int32_t e = c.map[std::size_t(id)];
  return e >= 0 && e < c.p.experts ? e : -1;  // align's local map: outside [0, E) is dropped
}

double act_exact(Act act, double g, double u) {
  switch (act) {
    case Act::silu: return g / (1 + std::exp(-g)) * u;
    case Act::gelu: return 0.5 * g * (1 + std::erf(g / std::sqrt(2.0))) * u;
    case Act::gelu_tanh:
      return 0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g))) * u;
    case Act::swiglu_oai: {
      const double gc = std::min(g, 7.0), uc = std::clamp(u, -7.0, 7.0);
      return gc / (1 + std::exp(-1.702 * gc)) * (uc + 1);
    }
  }
  return NAN;
}

float act_f32(Act act, float g, float u) {
  switch (act) {
    case Act::silu: return g / (1.0f + std::exp(-g)) * u;
    case Act::gelu: return 0.5f * g * (1.0f + std::erf(g * 0.70710678f)) * u;
    case Act::gelu_tanh: return 0.5f * g * (1.0f + std::tanh(0.79788456f * (g + 0.044715f * g * g * g))) * u;
    case Act::swiglu_oai: {
      const float gc = std::min(g, 7.0f), uc = std::clamp(u, -7.0f, 7.0f);
      return gc / (1.0f + std::exp(-1.702f * gc)) * (uc + 1.0f);
    }
  }
  return NAN;
}

float pairwise(std::span<const float> v) {
  if (v.size() <= 2) return v.empty() ? 0.0f : v.size() == 1 ? v[0] : v[0] + v[1];
  const std::size_t m = v.size() / 2;
  return pairwise(v.first(m)) + pairwise(v.subspan(m));
}

double dot(Order o, const std::vector<double>& a, const std::vector<double>& b) {
  if (o == Order::exact) {
    double s = 0;
    for (std::size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
    return s;
  }
  std::vector<float> prod(a.size());  // a product of two 16-bit values is exact in f32
  for (std::size_t k = 0; k < a.size(); ++k) prod[k] = float(a[k]) * float(b[k]);
  if (o == Order::f32_pairwise) return pairwise(prod);
  if (o == Order::f32_mma_rz) {
    float acc = 0.0f;
    for (std::size_t k0 = 0; k0 < prod.size(); k0 += 16) {
      double chunk = 0;
      for (std::size_t k = k0; k < std::min(prod.size(), k0 + 16); ++k) chunk += prod[k];
      const double sum = double(acc) + chunk;
      float f = static_cast<float>(sum);
      if (std::fabs(double(f)) > std::fabs(sum)) f = std::nextafter(f, 0.0f);
      acc = f;
    }
    return acc;
  }
  if (o == Order::f32_warp) {
    float lane[32] = {};
    for (std::size_t k = 0; k < prod.size(); ++k) lane[k % 32] += prod[k];
    for (int off = 16; off > 0; off >>= 1) {
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ off];
      std::copy_n(next, 32, lane);
    }
    return lane[0];
  }
  float s = 0.0f;
  for (std::size_t k = a.size(); k-- > 0;) s += prod[k];
  return s;
}

struct Mine {
  std::vector<double> out_exact;   // [T, H] (Order::exact)
  std::vector<double> out_mag;     // [T, H] |S| sum_j |w y|: the size of out's terms
  std::vector<std::uint16_t> out;  // [T, H]
  std::vector<std::uint16_t> y;    // [T, K, H], 0 for a dropped slot
  std::vector<std::uint8_t> kept;  // [T, K]
  double max_gate = -INFINITY, max_abs_up = 0;  // h seen, to show a case reaches the clamps
};

Mine formulate(const Case& c, Order o) {
  const Problem& p = c.p;
  const DType d = p.dtype;
  const std::int64_t T = p.tokens, K = p.topk, H = p.hidden, I = p.inter;
  Mine m;
  m.out_exact.assign(std::size_t(T * H), 0.0);
  m.out_mag.assign(std::size_t(T * H), 0.0);
  m.out.assign(std::size_t(T * H), 0);
  m.y.assign(std::size_t(T * K * H), 0);
  m.kept.assign(std::size_t(T * K), 0);
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<double> x(static_cast<std::size_t>(H)), yv(static_cast<std::size_t>(K * H), 0.0);
    for (std::int64_t k = 0; k < H; ++k) x[std::size_t(k)] = c.hid(t, k);
    for (std::int64_t j = 0; j < K; ++j) {
      const std::int32_t e = my_local(c, c.ids[std::size_t(t * K + j)]);
      if (e < 0) continue;
      m.kept[std::size_t(t * K + j)] = 1;
      std::vector<double> a(static_cast<std::size_t>(I)), row(static_cast<std::size_t>(H));
      for (std::int64_t i = 0; i < I; ++i) {
        const std::int64_t gr = p.w1_layout == W1Layout::interleaved ? 2 * i : i;
        const std::int64_t ur = p.w1_layout == W1Layout::interleaved ? 2 * i + 1 : I + i;
        for (std::int64_t k = 0; k < H; ++k) row[std::size_t(k)] = c.w1v(e, gr, k);
        const double g = round_to(d, dot(o, x, row));
        for (std::int64_t k = 0; k < H; ++k) row[std::size_t(k)] = c.w1v(e, ur, k);
        const double u = round_to(d, dot(o, x, row));
        m.max_gate = std::max(m.max_gate, g);
        m.max_abs_up = std::max(m.max_abs_up, std::fabs(u));
        a[std::size_t(i)] = round_to(d, o == Order::exact ? act_exact(p.act, g, u) : act_f32(p.act, float(g), float(u)));
      }
      std::vector<double> w2row(static_cast<std::size_t>(I));
      for (std::int64_t h = 0; h < H; ++h) {
        for (std::int64_t i = 0; i < I; ++i) w2row[std::size_t(i)] = c.w2v(e, h, i);
        const double y = round_to(d, dot(o, a, w2row));
        yv[std::size_t(j * H + h)] = y;
        m.y[std::size_t((t * K + j) * H + h)] = bits_of(d, y);
      }
    }
    for (std::int64_t h = 0; h < H; ++h) {
      if (o == Order::exact) {
        double s = 0, mag = 0;
        for (std::int64_t j = 0; j < K; ++j)
          if (m.kept[std::size_t(t * K + j)]) {
            s += double(c.weights[std::size_t(t * K + j)]) * yv[std::size_t(j * H + h)];
            mag += std::fabs(double(c.weights[std::size_t(t * K + j)]) * yv[std::size_t(j * H + h)]);
          }
        m.out_mag[std::size_t(t * H + h)] = std::fabs(double(p.combine.scaling)) * mag;
        m.out_exact[std::size_t(t * H + h)] = double(p.combine.scaling) * s;
        m.out[std::size_t(t * H + h)] = to_bits(d, double(p.combine.scaling) * s);
      } else {
        float acc = 0.0f;
        for (std::int64_t j = 0; j < K; ++j)
          if (m.kept[std::size_t(t * K + j)])
            acc = std::fma(c.weights[std::size_t(t * K + j)], float(yv[std::size_t(j * H + h)]), acc);
        m.out[std::size_t(t * H + h)] = to_bits(d, double(acc * p.combine.scaling));
      }
    }
  }
  return m;
}

// The first way the reference on `tokens` differs from the formulation here,
// or "" when it agrees: out and y bit for bit, out_exact to double's rounding
// (1e-12 of its terms' size: sums in another order),
// kept, and the bounds non-negative and finite.
std::string disagreement(const Case& c, const Outputs& ref, const std::vector<std::int64_t>& tokens, const Mine& m) {
  const Problem& p = c.p;
  const std::int64_t K = p.topk, H = p.hidden;
  const auto n = tokens.size();
  if (ref.tokens != tokens) return "tokens differ";
  if (ref.out.size() != n * H || ref.out_exact.size() != n * H || ref.out_bound.size() != n * H ||
      ref.y.size() != n * K * H || ref.y_bound.size() != n * K * H || ref.kept.size() != n * K)
    return "output sizes differ";
  for (std::size_t ti = 0; ti < n; ++ti) {
    const std::int64_t t = tokens[ti];
    for (std::int64_t j = 0; j < K; ++j) {
      if (ref.kept[ti * K + j] != m.kept[std::size_t(t * K + j)])
        return "kept[" + std::to_string(t) + ", " + std::to_string(j) + "] differs";
      for (std::int64_t h = 0; h < H; ++h) {
        const std::size_t r = (ti * K + j) * H + h, q = std::size_t((t * K + j) * H + h);
        if (ref.y[r] != m.y[q])
          return "y[" + std::to_string(t) + ", " + std::to_string(j) + ", " + std::to_string(h) +
                 "] = " + std::to_string(value_of(p.dtype, ref.y[r])) + ", here " +
                 std::to_string(value_of(p.dtype, m.y[q]));
        if (!(ref.y_bound[r] >= 0 && std::isfinite(ref.y_bound[r]))) return "y_bound not finite and >= 0";
      }
    }
    for (std::int64_t h = 0; h < H; ++h) {
      const std::size_t r = ti * H + h, q = std::size_t(t * H + h);
      const std::string at = "out[" + std::to_string(t) + ", " + std::to_string(h) + "]";
      if (ref.out[r] != m.out[q])
        return at + " = " + std::to_string(value_of(p.dtype, ref.out[r])) + ", here " +
               std::to_string(value_of(p.dtype, m.out[q]));
      if (!(std::fabs(ref.out_exact[r] - m.out_exact[q]) <= 1e-12 * m.out_mag[q]))
        return at + " exact = " + std::to_string(ref.out_exact[r]) + ", here " + std::to_string(m.out_exact[q]);
      if (!(ref.out_bound[r] >= 0 && std::isfinite(ref.out_bound[r]))) return at + ": bound not finite and >= 0";
    }
  }
  return "";
}

// out [T, H] of the formulation as the checker takes it.
std::vector<std::uint16_t> gpu_like_out(const Case& c, Order o = Order::f32_pairwise) { return formulate(c, o).out; }

// y rows in an expert-grouped order (the compact layout's), with their inverse.
struct Rows {
  std::vector<std::uint16_t> y;
  std::vector<std::int32_t> inverse;
};
Rows layout_rows(const Case& c, const Mine& m) {
  const Problem& p = c.p;
  const std::int64_t T = p.tokens, K = p.topk, H = p.hidden;
  Rows r;
  r.y.assign(std::size_t(std::max<std::int64_t>(p.rows(), T * K) * H), 0);
  r.inverse.assign(std::size_t(T * K), -1);
  std::int32_t row = 0;
  for (std::int32_t e = 0; e < p.experts; ++e)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t j = 0; j < K; ++j) {
        if (!m.kept[std::size_t(t * K + j)] || my_local(c, c.ids[std::size_t(t * K + j)]) != e) continue;
        r.inverse[std::size_t(t * K + j)] = row;
        std::copy_n(m.y.begin() + (t * K + j) * H, H, r.y.begin() + std::int64_t(row) * H);
        ++row;
      }
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------

TEST_CASE("experts test helpers: this file's rounding is round-to-nearest-even with subnormals and overflow") {
  // bf16 keeps 8 significant bits: 1 + 2^-8 is a tie between 1 and 1 + 2^-7, to even (1).
  CHECK(round_to(DType::bf16, 1 + 0x1p-8) == 1.0);
  CHECK(round_to(DType::bf16, 1 + 3 * 0x1p-8) == 1 + 0x1p-6);     // tie, to even (mantissa ...10)
  CHECK(round_to(DType::bf16, 1 + 0x1p-8 + 0x1p-20) == 1 + 0x1p-7);  // past the tie
  CHECK(round_to(DType::f16, 65519.0) == 65504.0);
  CHECK(std::isinf(round_to(DType::f16, 65520.0)));
  CHECK(round_to(DType::f16, 0x1p-25) == 0.0);             // half the smallest subnormal, to even (0)
  CHECK(round_to(DType::f16, 3 * 0x1p-26) == 0x1p-24);    // above half of it
  CHECK(round_to(DType::f16, -0.1) == -0.0999755859375);  // 1638 * 2^-14
  CHECK(bits_of(DType::bf16, 1.0) == 0x3F80);
  CHECK(bits_of(DType::bf16, -2.5) == 0xC020);
  CHECK(bits_of(DType::f16, 1.0) == 0x3C00);
  CHECK(bits_of(DType::f16, -2.5) == 0xC100);
  CHECK(bits_of(DType::f16, 0x1p-24) == 0x0001);
  CHECK(bits_of(DType::f16, 65504.0) == 0x7BFF);
  for (DType d : {DType::bf16, DType::f16}) {  // every finite pattern round-trips
    int wrong = 0;
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
      const double v = value_of(d, std::uint16_t(b));
      if (std::isfinite(v)) wrong += bits_of(d, v) != b;
    }
    CHECK(wrong == 0);
  }
}

// One case per activation, small enough to write out by hand. Every value
// below is exact in the dtype unless a rounding is shown.
TEST_CASE("experts reference: hand-listed cases, one per activation") {
  SUBCASE("silu, bf16, gate/up rows, two experts, S = 2") {
    // hidden [1, 2]; expert 0: gate [1, .5], up [.5, .25] -> g = 2, u = 1,
    //   a = 2 / (1 + e^-2) = 1.76159... -> bf16 1.7578125 (225 * 2^-7);
    //   W2 [[1], [-2]] -> y0 = [1.7578125, -3.515625].
    // expert 1: gate [-1, 0], up [0, 1] -> g = -1, u = 2,
    //   a = -1 / (1 + e) * 2 = -0.537882... -> bf16 -0.5390625 (-138 * 2^-8);
    //   W2 [[2], [1]] -> y1 = [-1.078125, -0.5390625].
    // out = 2 (0.25 y0 + 0.5 y1) = 2 [0.439453125 - 0.5390625, -0.87890625 - 0.26953125]
    //     = [-0.19921875, -2.296875].
    Case c;
    const DType d = DType::bf16;
    c.p = problem(1, 2, 2, 2, 1, d, Act::silu, W1Layout::gate_up, 2.0f);
    c.hidden = bits(d, {1, 2});
    c.ids = {0, 1};
    c.weights = {0.25f, 0.5f};
    c.w1 = bits(d, {1, 0.5, 0.5, 0.25, /* expert 1 */ -1, 0, 0, 1});
    c.w2 = bits(d, {1, -2, /* expert 1 */ 2, 1});
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 1);
    CHECK(ref.y == bits(d, {1.7578125, -3.515625, -1.078125, -0.5390625}));
    CHECK(ref.out == bits(d, {-0.19921875, -2.296875}));
    CHECK(ref.out_exact == std::vector<double>{-0.19921875, -2.296875});
    CHECK(disagreement(c, ref, all_tokens(c.p), formulate(c, Order::exact)) == "");
  }
  SUBCASE("gelu, f16, gate/up rows, I = 2, y rounded") {
    // hidden [1.5]; gate rows [1], [-2], up rows [2], [.5] -> g = [1.5, -3], u = [3, .75].
    // a0 = 0.5 * 1.5 (1 + erf(1.5 / sqrt 2)) * 3 = 4.199367... -> f16 4.19921875 (2150 * 2^-9)
    // a1 = 0.5 * -3 (1 + erf(-3 / sqrt 2)) * .75 = -0.0030372... -> f16 -0.0030364990234375 (-1592 * 2^-19)
    // W2 [[1, 4]] -> y = a0 + 4 a1 = 4.187072... -> f16 4.1875; w = 1, S = 1: out = 4.1875.
    Case c;
    const DType d = DType::f16;
    c.p = problem(1, 1, 1, 1, 2, d, Act::gelu, W1Layout::gate_up, 1.0f);
    c.hidden = bits(d, {1.5});
    c.ids = {0};
    c.weights = {1.0f};
    c.w1 = bits(d, {1, -2, 2, 0.5});
    c.w2 = bits(d, {1, 4});
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 1);
    CHECK(ref.y == bits(d, {4.1875}));
    CHECK(ref.out == bits(d, {4.1875}));
    CHECK(disagreement(c, ref, all_tokens(c.p), formulate(c, Order::exact)) == "");
  }
  SUBCASE("gelu-tanh, bf16, interleaved rows, w = 0.75, a -1 slot") {
    // hidden [.5, -1]; row 0 (gate) [4, 1] -> g = 1; row 1 (up) [1, -1] -> u = 1.5.
    // a = 0.5 (1 + tanh(sqrt(2/pi) (1 + 0.044715))) * 1.5 = 1.261787... -> bf16 1.265625 (162 * 2^-7)
    // W2 [[1], [.5]] -> y = [1.265625, 0.6328125]; out = 0.75 y = [0.94921875, 0.474609375]
    // (slot 1, id -1, weight 9: nothing).
    Case c;
    const DType d = DType::bf16;
    c.p = problem(1, 2, 1, 2, 1, d, Act::gelu_tanh, W1Layout::interleaved, 1.0f);
    c.hidden = bits(d, {0.5, -1});
    c.ids = {0, -1};
    c.weights = {0.75f, 9.0f};
    c.w1 = bits(d, {4, 1, 1, -1});
    c.w2 = bits(d, {1, 0.5});
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 1);
    CHECK(ref.kept == std::vector<std::uint8_t>{1, 0});
    CHECK(ref.y == bits(d, {1.265625, 0.6328125, 0, 0}));
    CHECK(ref.out == bits(d, {0.94921875, 0.474609375}));
    CHECK(disagreement(c, ref, all_tokens(c.p), formulate(c, Order::exact)) == "");
  }
  SUBCASE("swiglu-oai, f16, interleaved: gate clamped above 7 only, up clamped to [-7, 7], then + 1; a map") {
    // hidden [1, .5]; interleaved rows gate 0 [8, 2], up 0 [-8, 0], gate 1 [1, 0], up 1 [6, 4],
    // gate 2 [-9, 0], up 2 [0, 1] -> (g, u) = (9, -8), (1, 8), (-9, .5).
    // i = 0: g' = min(9, 7) = 7, u' = clamp(-8) = -7: a = 7 sigmoid(1.702 * 7) (-7 + 1) = -41.99971... -> f16 -42
    //        (unclamped gate: -54; unclamped up or no + 1: -49)
    // i = 1: g' = 1, u' = clamp(8) = 7: a = sigmoid(1.702) (7 + 1) = 6.766366... -> f16 6.765625 (433 * 2^-6)
    // i = 2: g' = -9 (no lower clamp), u' = .5: a = -9 sigmoid(-15.318) 1.5 = -3.00477e-6 -> f16 subnormal
    //        -2.9802322387695312e-06 (-50 * 2^-24) (a gate clamped at -7 would give -7.0e-5)
    // W2 [[1, 1, 1], [0, 0, 4096]] -> y = [-35.234378 -> f16 -35.25 (-1128 * 2^-5), -0.01220703125 (exact)].
    // Expert map [-1, 0]: slot 0 (id 1) is local expert 0; slot 1 (id 0, weight 5) is not here.
    Case c;
    const DType d = DType::f16;
    c.p = problem(1, 2, 1, 2, 3, d, Act::swiglu_oai, W1Layout::interleaved, 1.0f, 2);
    c.hidden = bits(d, {1, 0.5});
    c.map = {-1, 0};
    c.ids = {1, 0};
    c.weights = {1.0f, 5.0f};
    c.w1 = bits(d, {8, 2, -8, 0, 1, 0, 6, 4, -9, 0, 0, 1});
    c.w2 = bits(d, {1, 1, 1, 0, 0, 4096});
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 1);
    CHECK(ref.kept == std::vector<std::uint8_t>{1, 0});
    CHECK(ref.y == bits(d, {-35.25, -0.01220703125, 0, 0}));
    CHECK(ref.out == bits(d, {-35.25, -0.01220703125}));
    CHECK(disagreement(c, ref, all_tokens(c.p), formulate(c, Order::exact)) == "");
  }
}

TEST_CASE("experts reference: local_expert drops -1, ids outside the experts or the map, and map entries -1") {
  const Problem p = problem(2, 2, 4, 3, 2, DType::bf16, Act::silu, W1Layout::gate_up, 1.0f);
  Inputs in;
  CHECK(local_expert(p, in, -1) == -1);
  CHECK(local_expert(p, in, 0) == 0);
  CHECK(local_expert(p, in, 3) == 3);
  CHECK(local_expert(p, in, 4) == -1);
  const Problem pm = problem(2, 2, 4, 3, 2, DType::bf16, Act::silu, W1Layout::gate_up, 1.0f, 6);
  const std::vector<std::int32_t> map = {3, -1, 0, 4, 1, 2};
  in.expert_map = map;
  CHECK(local_expert(pm, in, -1) == -1);
  CHECK(local_expert(pm, in, 0) == 3);
  CHECK(local_expert(pm, in, 1) == -1);
  CHECK(local_expert(pm, in, 2) == 0);
  CHECK(local_expert(pm, in, 3) == -1);  // mapped past the E local experts: align drops it
  CHECK(local_expert(pm, in, 5) == 2);
  CHECK(local_expert(pm, in, 6) == -1);  // past the map
}

// Every activation, both dtypes, both W1 layouts (swiglu-oai: interleaved
// only), generated and given weights, with and without an expert map, dropped
// slots, S != 1, small odd shapes.
TEST_CASE("experts reference = the formulation here, bit for bit, over activations, dtypes, layouts, weights") {
  const Act acts[] = {Act::silu, Act::gelu, Act::gelu_tanh, Act::swiglu_oai};
  struct Shape {
    std::int64_t T;
    std::int32_t K, E;
    std::int64_t H, I;
    std::int32_t map_size;
    float S;
  };
  const Shape shapes[] = {{5, 2, 4, 7, 5, 0, 1.0f},  {8, 3, 6, 13, 9, 9, 2.5f}, {1, 1, 1, 1, 1, 0, 0.5f},
                          {6, 3, 5, 11, 3, 7, -1.5f}, {7, 2, 3, 5, 7, 0, 1.0f},  {8, 3, 6, 3, 1, 4, 0.75f}};
  int n = 0, swiglu_clamps = 0, minus_one = 0, past_range = 0, map_dropped = 0;
  for (Act act : acts)
    for (DType dt : {DType::bf16, DType::f16})
      for (W1Layout lay : {W1Layout::gate_up, W1Layout::interleaved})
        for (bool generated : {true, false}) {
          if (act == Act::swiglu_oai && lay == W1Layout::gate_up) continue;
          const Shape& s = shapes[n % std::size(shapes)];
          // swiglu-oai's clamps at 7 need larger h: hidden in [-12, 12].
          const Spec spec{s.T,      s.K,       s.E, s.H, s.I, dt, act, lay, s.S, generated, s.map_size,
                          std::uint64_t(100 + n), act == Act::swiglu_oai ? 12.0 : 2.0};
          ++n;
          const Case c = make_case(spec);
          const Mine m = formulate(c, Order::exact);
          for (std::int32_t id : c.ids) {
            const std::int32_t range = c.map.empty() ? c.p.experts : std::int32_t(c.map.size());
            minus_one += id == -1;
            past_range += id >= range;
            map_dropped += !c.map.empty() && id >= 0 && id < range && c.map[std::size_t(id)] == -1;
          }
          if (act == Act::swiglu_oai && m.max_gate > 7 && m.max_abs_up > 7) ++swiglu_clamps;
          const int act_i = int(act), dt_i = int(dt), lay_i = int(lay);
          CAPTURE(n);
          CAPTURE(act_i);
          CAPTURE(dt_i);
          CAPTURE(lay_i);
          CAPTURE(generated);
          const auto tokens = all_tokens(c.p);
          const auto ref = reference(c.p, c.inputs(), tokens, 2);
          const std::string diff = disagreement(c, ref, tokens, m);
          CHECK_MESSAGE(diff.empty(), diff);
          // A subset of tokens gives those tokens' rows; the thread count changes nothing.
          if (c.p.tokens >= 3) {
            const std::vector<std::int64_t> some = {0, 2, c.p.tokens - 1};
            const auto part = reference(c.p, c.inputs(), some, 3);
            const std::string d2 = disagreement(c, part, some, m);
            CHECK_MESSAGE(d2.empty(), d2);
          }
        }
  CHECK(n == 28);
  CHECK(swiglu_clamps >= 2);  // the swiglu-oai cases reach both clamps
  CHECK(minus_one > 0);       // and slots are dropped each way
  CHECK(past_range > 0);
  CHECK(map_dropped > 0);
}

TEST_CASE("experts reference: T = 0 and all slots dropped") {
  Case c = make_case({0, 2, 3, 5, 3, DType::bf16, Act::silu, W1Layout::gate_up, 1.0f, true, 0, 7});
  const auto ref = reference(c.p, c.inputs(), {}, 2);
  CHECK(ref.tokens.empty());
  CHECK(ref.out.empty());
  CHECK(check(c.p, ref, {}).ok);

  Case d = make_case({3, 2, 3, 5, 3, DType::f16, Act::gelu, W1Layout::gate_up, 1.0f, false, 0, 8});
  std::fill(d.ids.begin(), d.ids.end(), -1);
  const auto tokens = all_tokens(d.p);
  const auto rd = reference(d.p, d.inputs(), tokens, 2);
  const std::string diff = disagreement(d, rd, tokens, formulate(d, Order::exact));
  CHECK_MESSAGE(diff.empty(), diff);
  CHECK(std::all_of(rd.out.begin(), rd.out.end(), [](std::uint16_t b) { return (b & 0x7fff) == 0; }));
  CHECK(check(d.p, rd, rd.out).ok);
}

// ---------------------------------------------------------------------------
// The checker: what a correct GPU may return passes, the kernel bugs of issue
// 32 fail. "got" is always the f32 formulation (pairwise sums) of a case, the
// bug being a change of the case's data.

namespace {

Spec reject_spec(DType dt) {
  return {6, 3, 5, 13, 7, dt, Act::silu, W1Layout::gate_up, 1.0f, true, 0, 41};
}

// A kept slot of token t (the first), so mutating it matters.
std::int32_t kept_slot(const Case& c, std::int64_t t) {
  for (std::int32_t j = 0; j < c.p.topk; ++j)
    if (my_local(c, c.ids[std::size_t(t * c.p.topk + j)]) >= 0) return j;
  return -1;
}

}  // namespace

TEST_CASE("experts check: correct answers from other f32 summation orders pass") {
  // The small shapes of the cases above and wider ones, where f32 sums in
  // different orders round h, a and y differently from the exact reference.
  std::vector<Spec> specs;
  for (DType dt : {DType::bf16, DType::f16}) {
    specs.push_back(reject_spec(dt));
    specs.push_back({4, 2, 3, 257, 131, dt, Act::silu, W1Layout::gate_up, 1.0f, true, 0, 5});
    specs.push_back({4, 2, 3, 129, 67, dt, Act::gelu_tanh, W1Layout::interleaved, 2.0f, false, 5, 6});
    specs.push_back({5, 3, 4, 65, 33, dt, Act::swiglu_oai, W1Layout::interleaved, 1.0f, true, 0, 9, 12.0});
    specs.push_back({5, 3, 4, 65, 33, dt, Act::gelu, W1Layout::gate_up, 0.5f, false, 0, 10});
    // DeepSeek-V3's H (gemm1's sums over 7168 products) and a long gemm2 (I = 2048).
    specs.push_back({2, 1, 1, 7168, 64, dt, Act::silu, W1Layout::gate_up, 1.0f, true, 0, 11});
    specs.push_back({2, 2, 2, 16, 2048, dt, Act::silu, W1Layout::interleaved, 1.0f, true, 0, 12});
  }
  for (const Spec& s : specs) {
    const Case c = make_case(s);
    const int dt_i = int(s.dt), act_i = int(s.act);
    CAPTURE(s.H);
    CAPTURE(dt_i);
    CAPTURE(act_i);
    const auto tokens = all_tokens(c.p);
    const auto ref = reference(c.p, c.inputs(), tokens, 2);
    for (Order o : {Order::f32_reversed, Order::f32_pairwise, Order::f32_warp, Order::f32_mma_rz}) {
      const int order_i = int(o);
      CAPTURE(order_i);
      const Mine m = formulate(c, o);
      const auto r = check(c.p, ref, m.out);
      CHECK_MESSAGE(r.ok, r.first_difference);
      CHECK(r.max_error <= 1.0);
      const Rows rows = layout_rows(c, m);
      const auto ry = check_y(c.p, ref, rows.y, rows.inverse);
      CHECK_MESSAGE(ry.ok, ry.first_difference);
    }
    // The exact formulation's rounded out passes too.
    CHECK(check(c.p, ref, formulate(c, Order::exact).out).ok);
  }
}

// A GPU's f32 sum may round h to the other side of a tie than the exact sum
// does; the bound must carry that ulp of h through the activation to a and y.
TEST_CASE("experts check: h rounded one ulp off by an f32 sum passes, through the activation") {
  for (DType dt : {DType::bf16, DType::f16}) {
    const int dt_i = int(dt);
    CAPTURE(dt_i);
    const double ulp1 = dt == DType::bf16 ? 0x1p-7 : 0x1p-10;  // the dtype's ulp at 1
    // Gate products 1, ulp/2, 2^-12 * 2^-20: exactly 1 + ulp/2 + 2^-32, just past
    // the tie, rounds up to 1 + ulp; in f32 (either order) the 2^-32 is lost, the
    // tie rounds to even: 1. Up = 64 makes a's step from that ulp of g several
    // ulps of a (silu'(1) * ulp * 64).
    Case c;
    c.p = problem(1, 1, 1, 3, 1, dt, Act::silu, W1Layout::gate_up, 1.0f);
    c.hidden = bits(dt, {1, 1, 0x1p-12});
    c.ids = {0};
    c.weights = {1.0f};
    c.w1 = bits(dt, {1, ulp1 / 2, 0x1p-20, 64, 0, 0});
    c.w2 = bits(dt, {1, 1, 1});
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 1);
    const Mine exact = formulate(c, Order::exact), f32 = formulate(c, Order::f32_reversed);
    CHECK(disagreement(c, ref, all_tokens(c.p), exact) == "");
    REQUIRE(f32.y != exact.y);  // the case does what it says: y differs
    CHECK(std::fabs(value_of(dt, f32.y[0]) - value_of(dt, exact.y[0])) > ulp_of(dt, value_of(dt, exact.y[0])));
    const auto r = check(c.p, ref, f32.out);
    CHECK_MESSAGE(r.ok, r.first_difference);
    const Rows rows = layout_rows(c, f32);
    const auto ry = check_y(c.p, ref, rows.y, rows.inverse);
    CHECK_MESSAGE(ry.ok, ry.first_difference);
  }
}

// The GPU evaluates act(g) * u in f32 (expf, erff, tanhf: a few f32 ulps);
// near a tie of the dtype that error alone rounds a to the other side.
TEST_CASE("experts check: a rounded the other way by a few f32 ulps of the activation passes") {
  for (DType dt : {DType::bf16, DType::f16}) {
    const int dt_i = int(dt);
    CAPTURE(dt_i);
    // Find (g, u), dtype values, with silu(g) u within 3 f32 ulps of a tie of the dtype.
    const double rel = 3 * 0x1p-24;
    double g = 0, u = 0, ax = 0, tie = 0;
    for (double gv = 0.25; gv < 8 && tie == 0; gv += ulp_of(dt, gv))
      for (double uv = 1; uv < 1.25 && tie == 0; uv += ulp_of(dt, uv)) {
        const double v = act_exact(Act::silu, gv, uv);
        const double lo = std::floor(v / ulp_of(dt, v)) * ulp_of(dt, v), t = lo + ulp_of(dt, v) / 2;
        if (std::fabs(v - t) < rel * v) g = gv, u = uv, ax = v, tie = t;
      }
    REQUIRE(tie != 0);
    CAPTURE(g);
    CAPTURE(u);
    Case c;
    c.p = problem(1, 1, 1, 1, 1, dt, Act::silu, W1Layout::gate_up, 1.0f);
    c.hidden = bits(dt, {1});
    c.ids = {0};
    c.weights = {1.0f};
    c.w1 = bits(dt, {g, u});
    c.w2 = bits(dt, {1});
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 1);
    CHECK(disagreement(c, ref, all_tokens(c.p), formulate(c, Order::exact)) == "");
    // The GPU's a: ax moved 3 f32 ulps across the tie, y = a, out = y.
    const double gpu_a = round_to(dt, ax > tie ? ax * (1 - rel) : ax * (1 + rel));
    REQUIRE(bits_of(dt, gpu_a) != ref.y[0]);
    const std::vector<std::uint16_t> got = {bits_of(dt, gpu_a)};
    const auto r = check(c.p, ref, got);
    CHECK_MESSAGE(r.ok, r.first_difference);
    const std::vector<std::int32_t> inverse = {0};
    std::vector<std::uint16_t> y(std::size_t(std::max<std::int64_t>(c.p.rows(), 1)), got[0]);
    const auto ry = check_y(c.p, ref, y, inverse);
    CHECK_MESSAGE(ry.ok, ry.first_difference);
  }
}

// The activations in f32 as kernels/experts/act.cuh writes them: for g well
// below 0, gelu's 1 + erff(..) and gelu-tanh's 1 + tanhf(..) cancel, so a
// keeps only an absolute accuracy of a few f32 ulps of |g u|, not a relative
// one (the reference's bound said relative until this test).
TEST_CASE("experts check: activations of a very negative gate, evaluated in f32, pass") {
  for (Act act : {Act::silu, Act::gelu, Act::gelu_tanh, Act::swiglu_oai})
    for (DType dt : {DType::bf16, DType::f16}) {
      const int dt_i = int(dt), act_i = int(act);
      CAPTURE(dt_i);
      CAPTURE(act_i);
      // I = 1, H = 1: y = a = act(g) u alone; (g, u) = (-5, 1.5) and (-4.375, 1.3125).
      Case c;
      c.p = problem(2, 1, 1, 1, 1, dt, act, W1Layout::interleaved, 1.0f);  // I = 1: rows gate, up either way
      c.hidden = bits(dt, {1, 0.875});
      c.ids = {0, 0};
      c.weights = {1.0f, 1.0f};
      c.w1 = bits(dt, {-5, 1.5});
      c.w2 = bits(dt, {1});
      const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 1);
      CHECK(disagreement(c, ref, all_tokens(c.p), formulate(c, Order::exact)) == "");
      const Mine f32 = formulate(c, Order::f32_reversed);
      const auto r = check(c.p, ref, f32.out);
      CHECK_MESSAGE(r.ok, r.first_difference);
      const Rows rows = layout_rows(c, f32);
      const auto ry = check_y(c.p, ref, rows.y, rows.inverse);
      CHECK_MESSAGE(ry.ok, ry.first_difference);
    }
}

TEST_CASE("experts check: the kernel bugs of issue 32 fail it") {
  for (DType dt : {DType::bf16, DType::f16}) {
    const int dt_i = int(dt);
    CAPTURE(dt_i);
    const Case c = make_case(reject_spec(dt));
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 2);
    REQUIRE(check(c.p, ref, gpu_like_out(c)).ok);
    auto expect_rejected = [&](const Case& wrong) {
      const auto r = check(c.p, ref, gpu_like_out(wrong));
      CHECK_FALSE(r.ok);
      CHECK(!r.first_difference.empty());
      CHECK(r.max_error > 1.0);
    };
    Case given = c;  // the same weights handed over (bugs below change them)
    given.generated = false;

    SUBCASE("one slot sent to the wrong expert") {
      Case w = given;
      const std::int32_t j = kept_slot(c, 2);
      REQUIRE(j >= 0);
      auto& id = w.ids[std::size_t(2 * c.p.topk + j)];
      id = (id + 1) % c.p.experts;
      expect_rejected(w);
      // A reference on a sample of tokens reads got's rows by token: found there too.
      const std::vector<std::int64_t> sample = {0, 2, c.p.tokens - 1};
      const auto part = reference(c.p, c.inputs(), sample, 2);
      CHECK(check(c.p, part, gpu_like_out(c)).ok);
      const auto r = check(c.p, part, gpu_like_out(w));
      CHECK_FALSE(r.ok);
      CHECK(r.first_difference.find("out[2, ") != std::string::npos);
    }
    SUBCASE("gate and up swapped") {
      Case w = given;
      const std::int64_t H = c.p.hidden, I = c.p.inter;
      for (std::int64_t e = 0; e < c.p.experts; ++e)
        for (std::int64_t i = 0; i < I; ++i)
          std::swap_ranges(w.w1.begin() + (e * 2 * I + i) * H, w.w1.begin() + (e * 2 * I + i + 1) * H,
                           w.w1.begin() + (e * 2 * I + I + i) * H);
      expect_rejected(w);
    }
    SUBCASE("one routing weight dropped") {
      Case w = given;
      const std::int32_t j = kept_slot(c, 3);
      REQUIRE(j >= 0);
      w.weights[std::size_t(3 * c.p.topk + j)] = 0.0f;
      expect_rejected(w);
    }
    SUBCASE("one W1 element of a used expert zeroed") {
      // The element with the largest |hidden[t, k] W1[e, r, k]| for token 1's
      // first kept slot: zeroing it moves that h by its largest term (h's
      // terms are O(1 / sqrt H) each, h itself O(1)), far past a rounding.
      Case w = given;
      const std::int32_t j = kept_slot(c, 1);
      REQUIRE(j >= 0);
      const std::int32_t e = my_local(c, c.ids[std::size_t(1 * c.p.topk + j)]);
      std::int64_t best_r = 0, best_k = 0;
      double best = -1;
      for (std::int64_t r = 0; r < 2 * c.p.inter; ++r)
        for (std::int64_t k = 0; k < c.p.hidden; ++k)
          if (std::fabs(c.hid(1, k) * c.w1v(e, r, k)) > best) {
            best = std::fabs(c.hid(1, k) * c.w1v(e, r, k));
            best_r = r;
            best_k = k;
          }
      w.w1[std::size_t((e * 2 * c.p.inter + best_r) * c.p.hidden + best_k)] = 0;
      expect_rejected(w);
    }
    SUBCASE("one output a few ulps past the bound fails; the last value inside it passes") {
      const std::size_t at = std::size_t(2 * c.p.hidden + 3);  // token 2, column 3
      const double exact = ref.out_exact[at], bound = ref.out_bound[at];
      REQUIRE(bound > 0);
      const double dir = exact >= 0 ? 1.0 : -1.0;
      // The last dtype value within the bound, away from zero, then past it.
      double inside = round_to(dt, exact);
      while (std::fabs(step_out(dt, inside, dir) - exact) <= bound) inside = step_out(dt, inside, dir);
      double outside = step_out(dt, inside, dir);
      outside = step_out(dt, step_out(dt, outside, dir), dir);  // 3 ulps past the last value inside
      auto got = ref.out;
      got[at] = bits_of(dt, inside);
      const auto ok = check(c.p, ref, got);
      CHECK_MESSAGE(ok.ok, ok.first_difference);
      got[at] = bits_of(dt, outside);
      const auto bad = check(c.p, ref, got);
      CHECK_FALSE(bad.ok);
      CHECK(bad.max_error > 1.0);
      // Bound sanity: the allowance is a few output ulps, not a blanket tolerance.
      CHECK(bound < 64 * ulp_of(dt, exact));
    }
  }
}

TEST_CASE("experts check_y: correct rows pass; a row in the wrong place or past its bound fails") {
  for (DType dt : {DType::bf16, DType::f16}) {
    const int dt_i = int(dt);
    CAPTURE(dt_i);
    const Case c = make_case(reject_spec(dt));
    const auto ref = reference(c.p, c.inputs(), all_tokens(c.p), 2);
    const Mine m = formulate(c, Order::f32_reversed);
    const Rows rows = layout_rows(c, m);
    const auto ok = check_y(c.p, ref, rows.y, rows.inverse);
    CHECK_MESSAGE(ok.ok, ok.first_difference);

    // Two kept slots of different experts, their rows exchanged in the inverse map.
    const std::int64_t K = c.p.topk;
    std::int64_t s0 = -1, s1 = -1;
    for (std::int64_t s = 0; s < c.p.tokens * K && s1 < 0; ++s) {
      if (!m.kept[std::size_t(s)]) continue;
      if (s0 < 0) s0 = s;
      else if (my_local(c, c.ids[std::size_t(s)]) != my_local(c, c.ids[std::size_t(s0)])) s1 = s;
    }
    REQUIRE(s1 >= 0);
    auto inverse = rows.inverse;
    std::swap(inverse[std::size_t(s0)], inverse[std::size_t(s1)]);
    const auto swapped = check_y(c.p, ref, rows.y, inverse);
    CHECK_FALSE(swapped.ok);
    CHECK(!swapped.first_difference.empty());

    // One element a few ulps past y_bound.
    const std::int64_t H = c.p.hidden;
    const std::size_t at = std::size_t(s0 * H + 2);  // slot s0, column 2 (ref's tokens are all T)
    const double yv = value_of(dt, ref.y[at]), bound = ref.y_bound[at];
    const double dir = yv >= 0 ? 1.0 : -1.0;
    double v = yv;
    while (std::fabs(v - yv) <= bound) v = step_out(dt, v, dir);
    v = step_out(dt, step_out(dt, v, dir), dir);
    auto y = rows.y;
    y[std::size_t(rows.inverse[std::size_t(s0)]) * H + 2] = bits_of(dt, v);
    const auto far = check_y(c.p, ref, y, rows.inverse);
    CHECK_FALSE(far.ok);
  }
}

// ---------------------------------------------------------------------------

TEST_CASE("experts sample_tokens: all within budget, else a seeded ascending sample with both ends") {
  const Problem p = problem(1000, 4, 8, 16, 8, DType::bf16, Act::silu, W1Layout::gate_up, 1.0f);
  const double per_token = 4.0 * 3 * 8 * 16;  // K * 3 I H multiply-adds
  // Within budget: every token.
  CHECK(sample_tokens(p, per_token * 1000, 1) == all_tokens(p));
  CHECK(sample_tokens(p, per_token * 5000, 1) == all_tokens(p));
  // A budget of 37 tokens.
  const auto a = sample_tokens(p, per_token * 37, 1);
  CHECK(a == sample_tokens(p, per_token * 37, 1));  // deterministic for the seed
  CHECK(a.size() == 37);
  CHECK(std::is_sorted(a.begin(), a.end()));
  CHECK(std::adjacent_find(a.begin(), a.end()) == a.end());  // no token twice
  CHECK(a.front() == 0);
  CHECK(a.back() == 999);
  CHECK(std::all_of(a.begin(), a.end(), [](std::int64_t t) { return t >= 0 && t < 1000; }));
  bool other_seed_differs = false;
  for (std::uint64_t seed = 2; seed < 6; ++seed) other_seed_differs |= sample_tokens(p, per_token * 37, seed) != a;
  CHECK(other_seed_differs);
  // Below one token's cost: still one token.
  const auto one = sample_tokens(p, per_token / 2, 1);
  CHECK(one.size() >= 1);
  CHECK(one.size() <= 2);
  CHECK(sample_tokens(p, 0, 3).size() >= 1);
  // One token, no tokens.
  CHECK(sample_tokens(problem(1, 2, 4, 8, 8, DType::f16, Act::silu, W1Layout::gate_up, 1.0f), 0, 1) ==
        std::vector<std::int64_t>{0});
  CHECK(sample_tokens(problem(0, 2, 4, 8, 8, DType::f16, Act::silu, W1Layout::gate_up, 1.0f), 1e9, 1).empty());
}

// ---------------------------------------------------------------------------

TEST_CASE("experts generated weights: SplitMix64 and weight_value as documented") {
  // Vigna's splitmix64.c seeded with 0 gives 0xE220A8397B1DCDAF first (the published first output).
  CHECK(my_splitmix64(0) == 0xE220A8397B1DCDAFull);
  CHECK(splitmix64(0) == 0xE220A8397B1DCDAFull);
  for (std::uint64_t z : {1ull, 42ull, 0xDEADBEEFull, ~0ull}) CHECK(splitmix64(z) == my_splitmix64(z));

  struct At {
    std::uint64_t seed;
    int matrix;
    std::int64_t e, row, col, rows, cols, inner;
  };
  const At ats[] = {{0, 0, 0, 0, 0, 2 * 7, 13, 13},          {1, 0, 3, 5, 11, 2 * 7, 13, 13},
                    {1, 1, 3, 5, 6, 13, 7, 7},               {123456789, 0, 255, 4095, 7167, 4096, 7168, 7168},
                    {123456789, 1, 255, 7167, 2047, 7168, 2048, 2048}};
  for (const At& a : ats) {
    const float want = my_weight(a.seed, a.matrix, a.e, a.row, a.col, a.rows, a.cols, a.inner);
    CHECK(weight_value(a.seed, a.matrix, a.e, a.row, a.col, a.rows, a.cols, weight_scale(a.inner)) == want);
  }

  // Any one of (seed, matrix, expert, row, col) changed changes the value.
  const std::int64_t rows = 2 * 5, cols = 9;
  const float s = weight_scale(cols);
  const float base = weight_value(7, 0, 1, 2, 3, rows, cols, s);
  CHECK(weight_value(8, 0, 1, 2, 3, rows, cols, s) != base);
  CHECK(weight_value(7, 1, 1, 2, 3, rows, cols, s) != base);
  CHECK(weight_value(7, 0, 2, 2, 3, rows, cols, s) != base);
  CHECK(weight_value(7, 0, 1, 3, 3, rows, cols, s) != base);
  CHECK(weight_value(7, 0, 1, 2, 4, rows, cols, s) != base);
  std::set<float> seen;
  for (std::int64_t e = 0; e < 3; ++e)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t k = 0; k < cols; ++k) seen.insert(weight_value(7, 0, e, r, k, rows, cols, s));
  CHECK(seen.size() == std::size_t(3 * rows * cols));  // 270 draws of 2^24 values: no repeat expected

  // Uniform on [-sqrt(3/n), sqrt(3/n)]: mean 0, variance 1/n (loosely, on 8192 draws).
  for (std::int64_t n : {std::int64_t{64}, std::int64_t{1536}}) {
    const double lim = std::sqrt(3.0 / double(n));
    double sum = 0, sq = 0, lo = 0, hi = 0;
    const int N = 8192;
    for (int i = 0; i < N; ++i) {
      const double v = weight_value(11, 1, i / 512, i % 512 / 16, i % 16, 32, n, weight_scale(n));
      sum += v;
      sq += v * v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double mean = sum / N, var = sq / N - mean * mean;
    CHECK(std::fabs(lo) <= lim);
    CHECK(hi <= lim);
    CHECK(lo < -0.99 * lim);  // the range is used to its ends
    CHECK(hi > 0.99 * lim);
    CHECK(std::fabs(mean) < 5 * lim / std::sqrt(3.0 * N));  // 5 standard errors
    CHECK(var * double(n) == doctest::Approx(1.0).epsilon(0.05));
  }
}

// The `grouped` variant's planning (kernels/experts/grouped.hpp), hand-listed:
// where it applies, why not elsewhere, and a workspace that holds h and a.
namespace {
// The planning tests' problem: 16 tokens, K 2, E 8, bf16 silu, B 64.
experts::Problem plan16(std::int64_t H, std::int64_t I, permute::Layout layout) {
  return experts::make_problem(16, 2, 8, H, I, experts::DType::bf16, experts::Act::silu, experts::W1Layout::gate_up,
                               layout, 64, 1.0f);
}
using test::fake_caps;
}  // namespace

TEST_CASE("experts grouped: applies to the compact layout with H, I multiples of 8 on sm_90 only; workspace holds h and a") {
  const experts::Variant* v = experts::registry().find("grouped");
  REQUIRE(v != nullptr);
  const auto plan = plan16;
  const DeviceCaps none;
  const DeviceCaps sm90 = fake_caps(9, 0, 132), sm80 = fake_caps(8, 0, 108);
  const experts::Problem ok = plan(4096, 1024, permute::Layout::compact);
  const char* not_built = v->not_applicable(ok, none);
  if (not_built != nullptr) {  // a build without CUTLASS or sm_90: says so, everywhere
    CHECK(std::string(not_built).starts_with("not built"));
    CHECK(v->limits(none).starts_with("not built"));
    return;
  }
  CHECK(v->not_applicable(ok, sm90) == nullptr);
  CHECK(v->not_applicable(ok, sm80) != nullptr);
  CHECK(v->not_applicable(plan(4096, 1024, permute::Layout::padded), none) != nullptr);
  CHECK(v->not_applicable(plan(4100, 1024, permute::Layout::compact), none) != nullptr);
  CHECK(v->not_applicable(plan(4096, 1028, permute::Layout::compact), none) != nullptr);
  CHECK(v->not_applicable(plan(4104, 1032, permute::Layout::compact), none) == nullptr);
  // h [rows, 2I] and a [rows, I] of the dtype, at least, besides the stages'.
  for (const DeviceCaps* c : {&none, static_cast<const DeviceCaps*>(&sm90)})
    CHECK(v->workspace_bytes(ok, *c) >= std::size_t(ok.rows()) * 3 * 1024 * 2);
}

// From T*K = 32768 on, permute's auto pick on an sm_90 device keeps its
// workspace zero (align's counters). Every experts variant was refused there
// ("a stage's auto pick keeps a zeroed workspace"), so `moekit experts` ran no
// prefill shape at all on the GPU; now the zeroed slice comes first and the
// variant promises just that prefix.
TEST_CASE("experts: prefill shapes apply where permute keeps a zeroed workspace (fake sm_90)") {
  using namespace moekit;
  const DeviceCaps c = test::fake_sm90();
  for (const permute::Layout layout : {permute::Layout::compact, permute::Layout::padded}) {
    const bool compact = layout == permute::Layout::compact;
    const std::string layout_name = compact ? "compact" : "padded";
    INFO(layout_name);
    const experts::Problem p = experts::make_problem(4096, 8, 128, 4096, 1536, experts::DType::bf16,
                                                     experts::Act::silu, experts::W1Layout::gate_up, layout, 64, 1.0f);
    const permute::Variant& pv = permute::registry().pick_auto(p.permute, c, false);
    REQUIRE(needs_zeroed_workspace(pv, p.permute, c));  // the case this test is about
    for (const auto& v : experts::registry().variants()) {
      const std::string_view name = v.info.name;
      if (name == "grouped" || name == "cublas") continue;  // build- and library-dependent
      if (name == "gather" && compact) continue;              // padded only (its own test)
      if (name == "fused") continue;                          // no layout stage, T * K <= 256 (its own test)
      INFO(v.info.name);
      CHECK(v.not_applicable(p, c) == nullptr);
      CHECK(needs_zeroed_workspace(v, p, c));
      const std::size_t zeroed = experts::zeroed_workspace_bytes(v, p, c);
      CHECK(zeroed == pv.workspace_bytes(p.permute, c));
      // The variant's own layout stage (gather's: permute::index_only()) keeps that same prefix zero.
      REQUIRE(experts::layout_of(v, p, c) != nullptr);
      const permute::Variant& lv = *experts::layout_of(v, p, c);
      CHECK(needs_zeroed_workspace(lv, p.permute, c));
      CHECK(zeroed == lv.workspace_bytes(p.permute, c));
      CHECK(zeroed <= v.workspace_bytes(p, c));
    }
  }
}

// The `gather` variant's planning, hand-listed: the padded layout only (its
// gemm1 reads hidden through sorted_token_ids), mma's limits, and a layout
// stage that is align and the inverse map without the row copy.
TEST_CASE("experts gather: padded layout only, mma's limits, layout without the row copy") {
  const experts::Variant* v = experts::registry().find("gather");
  REQUIRE(v != nullptr);
  const auto plan = plan16;
  const DeviceCaps none;
  DeviceCaps sm90 = fake_caps(9, 0, 132), sm80 = fake_caps(8, 0, 108), sm75 = fake_caps(7, 5, 68);
  sm90.smem_optin = sm80.smem_optin = 160 * 1024;
  sm75.smem_optin = 64 * 1024;
  const experts::Problem padded = plan(4096, 1024, permute::Layout::padded);
  const experts::Problem compact = plan(4096, 1024, permute::Layout::compact);
  // Refused on the compact layout with the same words on every machine (the CLI's `moekit:` line).
  for (const DeviceCaps* c : {&none, static_cast<const DeviceCaps*>(&sm90)}) {
    const char* why = v->not_applicable(compact, *c);
    REQUIRE(why != nullptr);
    CHECK(std::string(why) == "needs --layout padded (it gathers through sorted_token_ids)");
    CHECK(v->not_applicable(padded, *c) == nullptr);
  }
  CHECK(v->not_applicable(padded, sm80) == nullptr);
  const char* old = v->not_applicable(padded, sm75);
  REQUIRE(old != nullptr);
  CHECK(std::string(old).find("sm_80") != std::string::npos);
  for (const auto& [H, I] : {std::pair<std::int64_t, std::int64_t>{4100, 1024}, {4096, 1028}}) {
    const char* why = v->not_applicable(plan(H, I, permute::Layout::padded), none);
    REQUIRE(why != nullptr);
    CHECK(std::string(why).find("multiples of 8") != std::string::npos);
  }
  CHECK(v->not_applicable(plan(4104, 1032, permute::Layout::padded), none) == nullptr);
  CHECK(v->limits(none).starts_with("--layout padded; sm_80+; H and I multiples of 8"));
  CHECK(v->info.description.find("sorted_token_ids") != std::string_view::npos);

  // The layout stage: permute's index-only pass, which the permute registry
  // does not list (`moekit permute` never runs it: it copies no rows); every
  // other variant's is permute's auto pick.
  for (const DeviceCaps* c : {&none, static_cast<const DeviceCaps*>(&sm90)}) {
    CHECK(experts::layout_of(*v, padded, *c) == &permute::index_only());
    const experts::Variant* mma = experts::registry().find("mma");
    REQUIRE(mma != nullptr);
    CHECK(experts::layout_of(*mma, padded, *c) == &permute::registry().pick_auto(padded.permute, *c, false));
    // a [rows, I] of the dtype at least, besides the stages'.
    CHECK(v->workspace_bytes(padded, *c) >= std::size_t(padded.rows()) * 1024 * 2);
  }
  CHECK(permute::index_only().info.name == "index");
  CHECK(permute::registry().find("index") == nullptr);
  // Its kernels: align's pick and the rows pass, never a row copy.
  const std::string_view k = permute::index_only().info.kernels;
  CHECK(k.find("rows_pass_kernel") != std::string_view::npos);
  CHECK(k.find("gather_rows_kernel") == std::string_view::npos);
  CHECK(k.find("scatter_tokens_kernel") == std::string_view::npos);
}

// The slices a composed launch (experts, moe_path) cuts its workspace into,
// hand-listed: each on a 256-byte boundary, in index order, none for a stage
// that needs no workspace.
TEST_CASE("workspace slices: offsets, total, and no pointer for an empty slice") {
  moekit::WorkspaceSlices<3> s;
  s.bytes[0] = 0;
  s.bytes[1] = 300;
  s.bytes[2] = 5;
  s.place();
  CHECK(s.offset[0] == 0);
  CHECK(s.offset[1] == 0);
  CHECK(s.offset[2] == 512);
  CHECK(s.total == 768);
  char ws[768];
  CHECK(s.at(ws, 0) == nullptr);
  CHECK(s.at(ws, 1) == ws);
  CHECK(s.at(ws, 2) == ws + 512);
  CHECK(s.at(nullptr, 1) == nullptr);
}

// auto's boundaries, hand-listed from the rules' fits (registry.cu): on
// sm_90 fused while T*K <= 32 (rows few; past 32 slots by the part's DRAM peak,
// the next case), decode below 16 rows an expert on
// average (T*K < 16 * min(E, T*K)), then grouped on sm_90 where it is built,
// mma otherwise. Mixtral's shape (E 8, K 2) leaves fused after T 16 and
// crosses to the GEMMs at T 64, Qwen3-235B's (E 128, K 8) leaves fused after
// T 4 and crosses at T 256.
TEST_CASE("experts auto: fused to 32 slots, decode below 16 rows an expert, the GEMM tiles from 16") {
  const DeviceCaps sm90 = test::fake_sm90();
  const bool grouped_built = experts::registry().find("grouped")->not_applicable(
                                 experts::make_problem(64, 2, 8, 4096, 14336, experts::DType::bf16, experts::Act::silu,
                                                       experts::W1Layout::gate_up, permute::Layout::compact, 64, 1.0f),
                                 sm90) == nullptr;
  const std::string gemm = grouped_built ? "grouped" : "mma";
  struct Row {
    std::int64_t T;
    std::int32_t K, E;
    std::int64_t H, I;
    std::string want;
  };
  const Row rows[] = {
      {1, 2, 8, 4096, 14336, "fused"},      {16, 2, 8, 4096, 14336, "fused"},   // 32 slots
      {17, 2, 8, 4096, 14336, "decode"},    {32, 2, 8, 4096, 14336, "decode"},  // 34 slots; 8 rows an expert
      {63, 2, 8, 4096, 14336, "decode"},    {64, 2, 8, 4096, 14336, gemm},      // 15.75, 16
      {1024, 2, 8, 4096, 14336, gemm},      {1, 8, 128, 4096, 1536, "fused"},
      {4, 8, 128, 4096, 1536, "fused"},     {5, 8, 128, 4096, 1536, "decode"},  // 32, 40 slots
      {255, 8, 128, 4096, 1536, "decode"},  {256, 8, 128, 4096, 1536, gemm},  // 15.94, 16
      {1, 8, 256, 7168, 256, "fused"},      {4, 8, 256, 7168, 256, "fused"},  // the TP8 shard
      {5, 8, 256, 7168, 256, "decode"},     {256, 8, 256, 7168, 256, "decode"},  // 40 slots; 8 rows
      {512, 8, 256, 7168, 256, gemm},                                             // 16
      {16, 2, 2, 4096, 1024, gemm},  // 32 slots, but 16 rows an expert: fused needs few rows too
  };
  for (const Row& r : rows) {
    const experts::Problem p = experts::make_problem(r.T, r.K, r.E, r.H, r.I, experts::DType::bf16, experts::Act::silu,
                                                     experts::W1Layout::gate_up, permute::Layout::compact, 64, 1.0f);
    INFO("T " << r.T << ", K " << r.K << ", E " << r.E);
    CHECK(std::string(experts::registry().pick_auto(p, sm90, true).info.name) == r.want);
  }
  // Not fitted below sm_90: decode keeps the decode rows there.
  DeviceCaps sm80 = sm90;
  sm80.cc_major = 8;
  for (const std::int64_t T : {1, 4}) {
    const experts::Problem p = experts::make_problem(T, 8, 256, 7168, 256, experts::DType::bf16, experts::Act::silu,
                                                     experts::W1Layout::gate_up, permute::Layout::compact, 64, 1.0f);
    CHECK(std::string(experts::registry().pick_auto(p, sm80, true).info.name) == "decode");
  }
}

// Past 32 slots the pick depends on the DRAM peak an SM shares (registry.cu
// fused_fits, fitted on an H100 and an H200): hand-listed with those parts'
// peaks (2 x 2619 MHz x 5120 bits, 2 x 3201 MHz x 6144 bits, 132 SMs).
TEST_CASE("experts auto: fused to 256 slots at one row group where the DRAM peak an SM shares is low") {
  DeviceCaps h100 = test::fake_sm90(), h200 = test::fake_sm90();
  h100.dram_peak_gbps = 2.0 * 2619e6 * 640 / 1e9;  // 3352 GB/s: 25.4 an SM
  h200.dram_peak_gbps = 2.0 * 3201e6 * 768 / 1e9;  // 4917 GB/s: 37.2 an SM
  struct Row {
    std::int64_t T;
    std::int32_t K, E;
    std::int64_t H, I;
    std::string h100, h200;
  };
  const Row rows[] = {
      {4, 8, 256, 7168, 256, "fused", "fused"},     // 32 slots: either part
      {5, 8, 256, 7168, 256, "fused", "decode"},    // 40
      {16, 8, 256, 7168, 2048, "fused", "decode"},  // DeepSeek-V3 T 16: 128 slots, about a row an expert
      {32, 8, 256, 7168, 256, "fused", "decode"},   // 256 slots
      {33, 8, 256, 7168, 256, "decode", "decode"},  // 264: past the slot list
      {32, 8, 128, 4096, 1536, "fused", "decode"},  // Qwen3-235B T 32: two rows an expert on average
      {17, 2, 8, 4096, 14336, "decode", "decode"},  // Mixtral T 17: 34 slots, 4.25 rows an expert (two groups)
      {32, 2, 8, 4096, 14336, "decode", "decode"},  // 64 slots, 8 rows an expert
  };
  for (const Row& r : rows) {
    const experts::Problem p = experts::make_problem(r.T, r.K, r.E, r.H, r.I, experts::DType::bf16, experts::Act::silu,
                                                     experts::W1Layout::gate_up, permute::Layout::compact, 64, 1.0f);
    INFO("T " << r.T << ", K " << r.K << ", E " << r.E);
    CHECK(std::string(experts::registry().pick_auto(p, h100, true).info.name) == r.h100);
    CHECK(std::string(experts::registry().pick_auto(p, h200, true).info.name) == r.h200);
  }
  // Fitted on sm_90 parts only: an sm_80 or an sm_100 part with the H100's
  // peak keeps decode at 40 slots (sm_100 keeps fused to 32).
  const experts::Problem p40 = experts::make_problem(5, 8, 256, 7168, 256, experts::DType::bf16, experts::Act::silu,
                                                     experts::W1Layout::gate_up, permute::Layout::compact, 64, 1.0f);
  DeviceCaps sm80 = h100, sm100 = h100;
  sm80.cc_major = 8;
  sm100.cc_major = 10;
  CHECK(std::string(experts::registry().pick_auto(p40, sm80, true).info.name) == "decode");
  CHECK(std::string(experts::registry().pick_auto(p40, sm100, true).info.name) == "decode");
}

// The `fused` variant's planning, hand-listed: T*K up to 256 (a slot a thread
// when it lists them), one stage (no layout, no combine), a workspace whose
// zeroed prefix is its counters with a [T*K, I] after them.
TEST_CASE("experts fused: T*K <= 256, the ffn stage alone, its counters kept zero") {
  const experts::Variant* v = experts::registry().find("fused");
  REQUIRE(v != nullptr);
  const DeviceCaps sm90 = test::fake_sm90();
  const auto plan = [](std::int64_t T, std::int32_t K, permute::Layout l) {
    return experts::make_problem(T, K, 256, 7168, 256, experts::DType::bf16, experts::Act::silu,
                                 experts::W1Layout::gate_up, l, 64, 1.0f);
  };
  for (const permute::Layout l : {permute::Layout::compact, permute::Layout::padded}) {
    CHECK(v->not_applicable(plan(32, 8, l), sm90) == nullptr);   // 256 slots
    CHECK(v->not_applicable(plan(256, 1, l), sm90) == nullptr);  // 256 slots
    const char* why = v->not_applicable(plan(33, 8, l), sm90);  // 264
    REQUIRE(why != nullptr);
    CHECK(std::string(why) == "needs T * K <= 256 (a slot a thread when listing)");
    CHECK(v->not_applicable(plan(257, 1, l), sm90) != nullptr);
  }
  DeviceCaps sm75 = sm90;
  sm75.cc_major = 7;
  sm75.cc_minor = 5;
  CHECK(v->not_applicable(plan(1, 8, permute::Layout::compact), sm75) != nullptr);

  const experts::Problem p = plan(4, 8, permute::Layout::compact);
  const auto st = experts::stages(*v);
  REQUIRE(st.size() == 1);
  CHECK(st[0] == experts::Stage::ffn);
  CHECK(experts::layout_of(*v, p, sm90) == nullptr);
  CHECK(experts::stages(*experts::registry().find("decode")).size() == 3);
  // A stage launched past not_applicable with more slots than the list holds
  // is refused before any CUDA call (no device needed).
  const experts::Problem big = plan(33, 8, permute::Layout::compact);
  CHECK(experts::launch_stage(*v, big, experts::Buffers{}, experts::Stage::ffn, nullptr, false) ==
        LaunchStatus{1});  // cudaErrorInvalidValue
  CHECK(needs_zeroed_workspace(*v, p, sm90));
  // Counters: one a slot of the list (256), one a gemm2 tile (H 7168 in tiles of 256 columns: 28), one more.
  CHECK(experts::zeroed_workspace_bytes(*v, p, sm90) == (256 + 28 + 1) * 4);
  // Then a [T*K, I] bf16, 256-byte aligned after the counters.
  CHECK(v->workspace_bytes(p, sm90) == 1280 + 32 * 256 * 2);
}

// grouped's tile policy (grouped.hpp wide_tiles), hand-listed: the wide tiles
// from 1024 rows an expert on average (T*K/E), the short ones below.
TEST_CASE("experts grouped: wide tiles from 1024 rows an expert on average") {
  struct Row {
    std::int64_t T;
    std::int32_t K, E;
    bool wide;
  };
  const Row rows[] = {
      {4095, 2, 8, false}, {4096, 2, 8, true},      // Mixtral: 1023.75, 1024 rows
      {16383, 8, 128, false}, {16384, 8, 128, true},  // Qwen3-235B: 1023.94, 1024
      {16384, 8, 256, false}, {1, 1, 1, false},       // DeepSeek-V3: 512; one row
      {1024, 1, 1, true},
  };
  for (const Row& r : rows) {
    const experts::Problem p = experts::make_problem(r.T, r.K, r.E, 512, 256, experts::DType::bf16, experts::Act::silu,
                                                     experts::W1Layout::gate_up, permute::Layout::compact, 64, 1.0f);
    INFO("T " << r.T << ", K " << r.K << ", E " << r.E);
    CHECK(experts::grouped::wide_tiles(p) == r.wide);
  }
}

TEST_CASE("experts: the command line's --act and --w1-layout names, hand-listed") {
  CHECK(experts::act_named("silu") == experts::Act::silu);
  CHECK(experts::act_named("gelu") == experts::Act::gelu);
  CHECK(experts::act_named("gelu-tanh") == experts::Act::gelu_tanh);
  CHECK(experts::act_named("swiglu-oai") == experts::Act::swiglu_oai);
  CHECK(experts::w1_layout_named("gate-up") == experts::W1Layout::gate_up);
  CHECK(experts::w1_layout_named("interleaved") == experts::W1Layout::interleaved);
}
