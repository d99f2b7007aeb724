// CPU reference and checker of the experts family (reference.hpp). The
// tolerance is derived in docs/experts.md, "Check and tolerance": every
// intermediate the GPU rounds (h, a, y, out) gets an interval around the exact
// value of the reference's own rounded inputs, and the check accepts every
// rounding that interval allows.
#include "experts/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

#include "experts/weights.hpp"
#include "half.hpp"

namespace moekit::experts {
namespace {

// f32 unit roundoff and the factor of the statistical accumulation bound
// (docs/experts.md): |f32 sum - exact| <= kC * u32 * sqrt(n) * ||products||_2.
constexpr double kU32 = 1.0 / 16777216.0;
constexpr double kC = 8.0;
// The activations' derivatives in g are below this (silu 1.0998, gelu and
// gelu-tanh 1.129, swiglu-oai's g * sigmoid(1.702 g) 1.0998); the clamps and
// the up factor are 1-Lipschitz.
constexpr double kActLipschitz = 1.15;
// Error of the GPU's f32 evaluation of act(g) * u (expf/erff/tanhf within a
// few ulps, a handful of multiplies), in f32 ulps of |a| + |g m(u)|: relative
// to a where act(g) is O(g), but only absolute, in ulps of g m(u), in the
// negative tail, where 0.5 g (1 + erff(g / sqrt 2)) and 1 + tanhf cancel and
// expf of a rounded argument loses |argument| ulps.
constexpr double kActEval = 16.0 * kU32;

double to_d(DType dt, std::uint16_t b) { return dt == DType::bf16 ? bf16_bits_to_f64(b) : f16_bits_to_f64(b); }
std::uint16_t to_bits(DType dt, double v) { return dt == DType::bf16 ? f64_to_bf16_bits(v) : f64_to_f16_bits(v); }
double rnd(DType dt, double v) { return to_d(dt, to_bits(dt, v)); }
// The most a rounding of any value within `err` of `exact` can differ from
// the rounding of `exact` (rounding is monotone: the ends decide).
double spread(DType dt, double exact, double err) {
  const double r = rnd(dt, exact);
  return std::max(std::fabs(rnd(dt, exact - err) - r), std::fabs(rnd(dt, exact + err) - r));
}
// One unit in the last place of the dtype at |v|.
double ulp_at(DType dt, double v) { return dt == DType::bf16 ? bf16_spacing(v) : f16_spacing(v); }

double act_d(Act act, double g, double u) {
  switch (act) {
    case Act::silu: return g / (1.0 + std::exp(-g)) * u;
    case Act::gelu: return 0.5 * g * (1.0 + std::erf(g / std::sqrt(2.0))) * u;
    case Act::gelu_tanh: {
      const double c = std::sqrt(2.0 / 3.14159265358979323846);
      return 0.5 * g * (1.0 + std::tanh(c * (g + 0.044715 * g * g * g))) * u;
    }
    case Act::swiglu_oai: {
      const double lim = kSwigluLimit, alpha = kSwigluAlpha;
      const double gc = std::min(g, lim), uc = std::clamp(u, -lim, lim);
      return gc / (1.0 + std::exp(-alpha * gc)) * (uc + 1.0);
    }
  }
  return 0.0;
}
// |act(g) part| bound for the error propagation: act(g)*u = f(g) * m(u) with
// m(u) = u (or clamp(u) + 1); f(g) and m(u) apart.
double act_f(Act act, double g) { return act_d(act, g, act == Act::swiglu_oai ? 0.0 : 1.0); }
double act_m(Act act, double u) {
  return act == Act::swiglu_oai ? std::clamp(u, -double(kSwigluLimit), double(kSwigluLimit)) + 1.0 : u;
}

// Runs fn(begin, end) over [0, n) on up to `threads` threads.
template <class F>
void parallel_for(std::int64_t n, int threads, F fn) {
  const std::int64_t chunks = std::min<std::int64_t>(threads, std::max<std::int64_t>(1, n / 64));
  if (chunks <= 1) {
    fn(std::int64_t{0}, n);
    return;
  }
  std::vector<std::thread> ts;
  for (std::int64_t c = 0; c < chunks; ++c)
    ts.emplace_back([&, c] { fn(n * c / chunks, n * (c + 1) / chunks); });
  for (auto& t : ts) t.join();
}

}  // namespace

std::int32_t local_expert(const Problem& p, const Inputs& in, std::int32_t id) {
  if (!in.expert_map.empty()) {
    if (id < 0 || std::size_t(id) >= in.expert_map.size()) return -1;
    const std::int32_t e = in.expert_map[std::size_t(id)];
    return e >= 0 && e < p.experts ? e : -1;
  }
  return id >= 0 && id < p.experts ? id : -1;
}

std::vector<std::int64_t> sample_tokens(const Problem& p, double budget_macs, std::uint64_t seed) {
  const double per_token = double(p.topk) * 3.0 * double(p.inter) * double(p.hidden);
  std::vector<std::int64_t> all;
  if (p.tokens <= 0) return all;
  if (per_token * double(p.tokens) <= budget_macs) {
    all.resize(std::size_t(p.tokens));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    return all;
  }
  const std::int64_t n = std::clamp<std::int64_t>(std::int64_t(budget_macs / std::max(per_token, 1.0)), 1, p.tokens);
  std::vector<std::int64_t> picked{0};
  if (n >= 2) picked.push_back(p.tokens - 1);
  std::mt19937_64 rng(seed ^ 0x5EEDull);
  std::uniform_int_distribution<std::int64_t> d(0, p.tokens - 1);
  while (std::int64_t(picked.size()) < n) {
    const std::int64_t t = d(rng);
    if (std::find(picked.begin(), picked.end(), t) == picked.end()) picked.push_back(t);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

Outputs reference(const Problem& p, const Inputs& in, std::span<const std::int64_t> tokens, int threads) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  const DType dt = p.dtype;
  const std::int64_t K = p.topk, H = p.hidden, I = p.inter, E = p.experts;
  const std::size_t n = tokens.size();
  Outputs o;
  o.tokens.assign(tokens.begin(), tokens.end());
  o.y.assign(n * K * H, 0);
  o.y_bound.assign(n * K * H, 0.0);
  o.kept.assign(n * K, 0);
  std::vector<double> dy(n * K * H, 0.0);  // |GPU y - y| allowed, per slot element

  // Slots by expert, so each expert's weights are read (or generated) once.
  std::vector<std::vector<std::int64_t>> by_expert(std::size_t(std::max<std::int64_t>(E, 0)));
  for (std::size_t s = 0; s < n; ++s)
    for (std::int64_t j = 0; j < K; ++j) {
      const std::int32_t e = local_expert(p, in, in.ids[std::size_t(tokens[s] * K + j)]);
      if (e < 0) continue;
      o.kept[s * K + j] = 1;
      by_expert[std::size_t(e)].push_back(std::int64_t(s) * K + j);
    }

  std::vector<std::uint16_t> w1e, w2e;
  const float scale1 = weight_scale(H), scale2 = weight_scale(I);
  for (std::int64_t e = 0; e < E; ++e) {
    const auto& slots = by_expert[std::size_t(e)];
    if (slots.empty()) continue;
    const std::uint16_t *w1, *w2;
    if (in.w.generated) {
      w1e.resize(std::size_t(2 * I * H));
      w2e.resize(std::size_t(H * I));
      parallel_for(2 * I, threads, [&](std::int64_t b, std::int64_t end) {
        for (std::int64_t r = b; r < end; ++r)
          for (std::int64_t c = 0; c < H; ++c)
            w1e[std::size_t(r * H + c)] =
                to_bits(dt, double(weight_value(in.w.seed, 0, e, r, c, 2 * I, H, scale1)));
      });
      parallel_for(H, threads, [&](std::int64_t b, std::int64_t end) {
        for (std::int64_t r = b; r < end; ++r)
          for (std::int64_t c = 0; c < I; ++c)
            w2e[std::size_t(r * I + c)] = to_bits(dt, double(weight_value(in.w.seed, 1, e, r, c, H, I, scale2)));
      });
      w1 = w1e.data();
      w2 = w2e.data();
    } else {
      w1 = in.w.w1.data() + std::size_t(e) * std::size_t(2 * I * H);
      w2 = in.w.w2.data() + std::size_t(e) * std::size_t(H * I);
    }
    for (const std::int64_t slot : slots) {
      const std::int64_t s = slot / K, t = tokens[std::size_t(s)];
      std::vector<double> x(static_cast<std::size_t>(H)), a(static_cast<std::size_t>(I)), da(static_cast<std::size_t>(I));
      for (std::int64_t c = 0; c < H; ++c) x[std::size_t(c)] = to_d(dt, in.hidden[std::size_t(t * H + c)]);
      // gemm1 and the activation: h rounded, a from the rounded h, rounded.
      parallel_for(I, threads, [&](std::int64_t b, std::int64_t end) {
        for (std::int64_t i = b; i < end; ++i) {
          const std::uint16_t* gr = w1 + (p.w1_layout == W1Layout::interleaved ? 2 * i : i) * H;
          const std::uint16_t* ur = w1 + (p.w1_layout == W1Layout::interleaved ? 2 * i + 1 : I + i) * H;
          double g = 0, u = 0, g2 = 0, u2 = 0;
          for (std::int64_t c = 0; c < H; ++c) {
            const double pg = x[std::size_t(c)] * to_d(dt, gr[c]), pu = x[std::size_t(c)] * to_d(dt, ur[c]);
            g += pg;
            u += pu;
            g2 += pg * pg;
            u2 += pu * pu;
          }
          const double rootn = std::sqrt(double(H));
          const double eg = kC * kU32 * rootn * std::sqrt(g2), eu = kC * kU32 * rootn * std::sqrt(u2);
          const double gr_ = rnd(dt, g), ur_ = rnd(dt, u);
          const double dg = spread(dt, g, eg), du = spread(dt, u, eu);
          const double ax = act_d(p.act, gr_, ur_);
          // |act(g') m(u') - act(g) m(u)| for |g' - g| <= dg, |u' - u| <= du.
          const double f = std::fabs(act_f(p.act, gr_)), m = std::fabs(act_m(p.act, ur_));
          const double ea = kActLipschitz * dg * (m + du) + f * du + kActEval * (std::fabs(ax) + std::fabs(gr_) * m + 1e-30);
          a[std::size_t(i)] = rnd(dt, ax);
          da[std::size_t(i)] = spread(dt, ax, ea);
        }
      });
      // gemm2: y from the rounded a; its bound carries a's.
      parallel_for(H, threads, [&](std::int64_t b, std::int64_t end) {
        for (std::int64_t h = b; h < end; ++h) {
          const std::uint16_t* wr = w2 + h * I;
          double y = 0, y2 = 0, carry = 0;
          for (std::int64_t i = 0; i < I; ++i) {
            const double w = to_d(dt, wr[i]);
            const double pr = a[std::size_t(i)] * w;
            y += pr;
            y2 += pr * pr;
            carry += da[std::size_t(i)] * std::fabs(w);
          }
          const double ey = kC * kU32 * std::sqrt(double(I)) * std::sqrt(y2) + carry * (1.0 + 1e-6);
          const std::size_t k = std::size_t(slot * H + h);
          o.y[k] = to_bits(dt, y);
          dy[k] = spread(dt, y, ey);
        }
      });
    }
  }
  o.y_bound = dy;

  // Combine: out = S * sum_j w y in f32 on the GPU (j ascending), one rounding.
  o.out.assign(n * H, 0);
  o.out_exact.assign(n * H, 0.0);
  o.out_bound.assign(n * H, 0.0);
  const double S = p.combine.scaling;
  for (std::size_t s = 0; s < n; ++s) {
    const std::int64_t t = tokens[s];
    for (std::int64_t h = 0; h < H; ++h) {
      double acc = 0, mag = 0, carry = 0;
      for (std::int64_t j = 0; j < K; ++j) {
        if (!o.kept[s * K + j]) continue;
        const double w = in.weights[std::size_t(t * K + j)];
        const std::size_t k = (s * K + j) * H + h;
        const double y = to_d(dt, o.y[k]);
        acc += w * y;
        mag += std::fabs(w * y);
        carry += std::fabs(w) * dy[k];
      }
      const double exact = S * acc;
      // f32: K products and K - 1 sums, then the multiply by S (worst case, K small).
      const double e = std::fabs(S) * (carry * (1.0 + 1e-6) + 2.0 * double(K + 1) * kU32 * mag);
      const std::size_t k = s * H + h;
      o.out_exact[k] = exact;
      o.out[k] = to_bits(dt, exact);
      o.out_bound[k] = e + ulp_at(dt, std::fabs(exact) + e);
    }
  }
  return o;
}

CheckResult check(const Problem& p, const Outputs& ref, std::span<const std::uint16_t> got_out) {
  CheckResult r;
  r.error_unit = "bound";
  const DType dt = p.dtype;
  const std::int64_t H = p.hidden;
  for (std::size_t s = 0; s < ref.tokens.size(); ++s) {
    const std::int64_t t = ref.tokens[s];
    for (std::int64_t h = 0; h < H; ++h) {
      const std::size_t k = s * H + h;
      const std::uint16_t gb = got_out[std::size_t(t * H + h)];
      const double g = to_d(dt, gb), want = ref.out_exact[k], bound = ref.out_bound[k];
      const double err = std::fabs(g - want);
      const double rel = bound > 0 ? err / bound : (err == 0 ? 0.0 : INFINITY);
      if (std::isnan(g) || !(err <= bound)) {
        if (r.ok)
          r.first_difference = fmt::format("out[{}, {}] = {:g}, reference {:g} (allowed +-{:.3g}, the derived bound)", t, h,
                                           g, want, bound);
        r.ok = false;
      }
      if (std::isfinite(rel)) r.max_error = std::max(r.max_error, rel);
      else r.max_error = INFINITY;
    }
  }
  return r;
}

CheckResult check_y(const Problem& p, const Outputs& ref, std::span<const std::uint16_t> got_y,
                    std::span<const std::int32_t> inverse) {
  CheckResult r;
  r.error_unit = "bound";
  const DType dt = p.dtype;
  const std::int64_t H = p.hidden, K = p.topk;
  for (std::size_t s = 0; s < ref.tokens.size(); ++s) {
    const std::int64_t t = ref.tokens[s];
    for (std::int64_t j = 0; j < K; ++j) {
      if (!ref.kept[s * K + j]) continue;
      const std::int32_t row = inverse[std::size_t(t * K + j)];
      if (row < 0 || row >= p.rows()) {
        if (r.ok) r.first_difference = fmt::format("slot ({}, {}) is kept but its row is {}", t, j, row);
        r.ok = false;
        continue;
      }
      for (std::int64_t h = 0; h < H; ++h) {
        const std::size_t k = (s * K + j) * H + h;
        const double g = to_d(dt, got_y[std::size_t(row) * H + h]), want = to_d(dt, ref.y[k]);
        const double err = std::fabs(g - want), bound = ref.y_bound[k];
        if (std::isnan(g) || !(err <= bound)) {
          if (r.ok)
            r.first_difference = fmt::format("y of slot ({}, {}) (row {})[{}] = {:g}, reference {:g} (allowed +-{:.3g})", t,
                                             j, row, h, g, want, bound);
          r.ok = false;
        }
        if (bound > 0) r.max_error = std::max(r.max_error, err / bound);
      }
    }
  }
  return r;
}

}  // namespace moekit::experts
