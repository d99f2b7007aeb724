// CPU reference and checker for router top-k (docs/route.md).
//
// Scores in double: s = softmax over the row (max subtracted) or the logistic
// function; selection values c = s + bias. Every comparison breaks ties by the
// lower index, for groups and experts alike.
#include "route/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace moekit::route {
namespace {

struct Row {
  std::vector<double> s, c, gscore;
  std::vector<char> kept;            // per group
  std::vector<std::int32_t> order;   // candidate experts, the best K first (in order)
  double bias_scale = 0;             // max |bias|: the f32 sum's rounding is relative to it
};

// a before b: larger value, then lower index.
bool better(double va, std::int32_t ia, double vb, std::int32_t ib) { return va > vb || (va == vb && ia < ib); }

void score_row(const Problem& p, const float* x, const float* bias, Row& r) {
  const std::int32_t E = p.experts;
  r.s.resize(E);
  r.c.resize(E);
  if (p.scoring == Scoring::softmax) {
    double m = -INFINITY;
    for (std::int32_t i = 0; i < E; ++i) m = std::max(m, double(x[i]));
    double sum = 0;
    for (std::int32_t i = 0; i < E; ++i) sum += (r.s[i] = std::exp(double(x[i]) - m));
    for (std::int32_t i = 0; i < E; ++i) r.s[i] /= sum;
  } else {
    for (std::int32_t i = 0; i < E; ++i) r.s[i] = 1.0 / (1.0 + std::exp(-double(x[i])));
  }
  r.bias_scale = 0;
  for (std::int32_t i = 0; i < E; ++i) {
    r.c[i] = r.s[i] + (bias ? double(bias[i]) : 0.0);
    if (bias) r.bias_scale = std::max(r.bias_scale, std::fabs(double(bias[i])));
  }
  // Group scores: top-2 sum with a bias, else the max.
  const std::int32_t G = p.groups, gs = E / G;
  r.gscore.assign(G, 0);
  r.kept.assign(G, 1);
  if (G > 1) {
    for (std::int32_t g = 0; g < G; ++g) {
      double a = -INFINITY, b = -INFINITY;
      for (std::int32_t i = g * gs; i < (g + 1) * gs; ++i) {
        if (r.c[i] > a) b = a, a = r.c[i];
        else if (r.c[i] > b) b = r.c[i];
      }
      r.gscore[g] = p.bias ? (gs >= 2 ? a + b : a) : a;
    }
    std::vector<std::int32_t> go(G);
    std::iota(go.begin(), go.end(), 0);
    std::stable_sort(go.begin(), go.end(), [&](auto a, auto b) { return better(r.gscore[a], a, r.gscore[b], b); });
    std::fill(r.kept.begin(), r.kept.end(), 0);
    for (std::int32_t j = 0; j < p.topk_groups; ++j) r.kept[go[j]] = 1;
  }
  r.order.clear();
  for (std::int32_t i = 0; i < E; ++i)
    if (r.kept[i / gs]) r.order.push_back(i);
  // Only the best K are ever read (better() is a strict total order, so the
  // partial sort is deterministic).
  const std::size_t k = std::min<std::size_t>(p.topk, r.order.size());
  std::partial_sort(r.order.begin(), r.order.begin() + k, r.order.end(),
                    [&](auto a, auto b) { return better(r.c[a], a, r.c[b], b); });
}

// Weights of the chosen ids, in double. Renormalizing divides by the sum of
// the chosen scores only when it is > 0: sigmoid scores of logits near -1000
// are all 0, and 0/0 would make every weight NaN; they stay 0 instead (the
// kernels' weight_scale() does the same; docs/route.md "Weights").
void weights_of(const Problem& p, const Row& r, const std::int32_t* ids, double* w) {
  double sum = 0;
  for (std::int32_t j = 0; j < p.topk; ++j) sum += (w[j] = r.s[ids[j]]);
  for (std::int32_t j = 0; j < p.topk; ++j) {
    if (p.renormalize && sum > 0) w[j] /= sum;
    w[j] *= double(p.scaling);
  }
}

}  // namespace

Outputs reference(const Problem& p, const float* logits, const float* bias) {
  const std::int32_t E = p.experts, K = p.topk;
  Outputs o;
  o.ids.resize(std::size_t(p.tokens) * K);
  o.weights.resize(o.ids.size());
  Row r;
  std::vector<double> w(K);
  for (std::int64_t t = 0; t < p.tokens; ++t) {
    score_row(p, logits + t * E, bias, r);
    std::int32_t* ids = o.ids.data() + t * K;
    for (std::int32_t j = 0; j < K; ++j) ids[j] = r.order[j];
    weights_of(p, r, ids, w.data());
    for (std::int32_t j = 0; j < K; ++j) o.weights[t * K + j] = static_cast<float>(w[j]);
  }
  return o;
}

CheckReport check(const Problem& p, const float* logits, const float* bias, const Outputs& ref,
                  const Outputs& got) {
  const std::int32_t E = p.experts, K = p.topk, G = p.groups, gs = E / G;
  CheckReport rep;
  auto fail = [&](std::int64_t t, std::string what) {
    rep.result.ok = false;
    rep.result.first_difference = fmt::format("token {}: {}", t, what);
    rep.result.max_error = std::max(rep.result.max_error, 1.0);
  };
  rep.result.error_unit = "rel";
  Row r;
  std::vector<double> w(K);
  std::vector<char> seen(E);
  for (std::int64_t t = 0; t < p.tokens && rep.result.ok; ++t) {
    const std::int32_t* gi = got.ids.data() + t * K;
    const std::int32_t* ri = ref.ids.data() + t * K;
    // In range and distinct: no tolerance excuses these.
    std::fill(seen.begin(), seen.end(), 0);
    for (std::int32_t j = 0; j < K && rep.result.ok; ++j) {
      if (gi[j] < 0 || gi[j] >= E) fail(t, fmt::format("topk_ids[{}] = {} is outside [0, {})", j, gi[j], E));
      else if (seen[gi[j]]++) fail(t, fmt::format("expert {} chosen twice (topk_ids[{}])", gi[j], j));
    }
    if (!rep.result.ok) break;
    score_row(p, logits + t * E, bias, r);
    if (!std::equal(gi, gi + K, ri)) {
      // A difference passes only where the reference itself is ambiguous.
      auto tied = [&](double a, double b) {
        return std::fabs(a - b) <= kTieRel * std::max({std::fabs(a), std::fabs(b), r.bias_scale}) + 0x1p-100;
      };
      bool group_tie = false;
      if (G > 1 && p.topk_groups < G) {
        std::vector<double> gsorted(r.gscore);
        std::sort(gsorted.begin(), gsorted.end(), std::greater<>());
        group_tie = tied(gsorted[p.topk_groups - 1], gsorted[p.topk_groups]);
      }
      bool ok = true;
      std::string why;
      if (!group_tie) {
        // Same multiset of values (within the tolerance), in kept groups, best first.
        std::vector<double> gv(K), rv(K);
        for (std::int32_t j = 0; j < K; ++j) {
          gv[j] = r.c[gi[j]];
          rv[j] = r.c[ri[j]];
          if (!r.kept[gi[j] / gs]) {
            ok = false;
            why = fmt::format("topk_ids[{}] = {} is in group {}, which is not among the {} best", j, gi[j],
                              gi[j] / gs, p.topk_groups);
            break;
          }
          if (j > 0 && gv[j] > gv[j - 1] && !tied(gv[j], gv[j - 1])) {
            ok = false;
            why = fmt::format("topk_ids[{}] = {} (value {:.9g}) ranks above topk_ids[{}] = {} (value {:.9g})", j,
                              gi[j], gv[j], j - 1, gi[j - 1], gv[j - 1]);
            break;
          }
        }
        if (ok) {
          std::vector<double> gs_sorted(gv);
          std::sort(gs_sorted.begin(), gs_sorted.end(), std::greater<>());
          for (std::int32_t j = 0; j < K && ok; ++j)
            if (!tied(gs_sorted[j], rv[j])) {
              ok = false;
              why = fmt::format("topk_ids[{}] is {}, expected {} (selection values {:.9g} vs {:.9g}, not a near-tie)",
                                j, gi[j], ri[j], gv[j], rv[j]);
            }
        }
      }
      if (!ok) {
        fail(t, why);
        break;
      }
      if (rep.near_tie_rows++ == 0) rep.first_near_tie_row = t;
      // Weights are checked below against got's own ids.
    }
    // Weights of got's ids, in double.
    weights_of(p, r, gi, w.data());
    for (std::int32_t j = 0; j < K; ++j) {
      const double g = got.weights[t * K + j];
      const double err = std::fabs(g - w[j]) / std::max(std::fabs(w[j]), 0x1p-126);
      rep.result.max_error = std::max(rep.result.max_error, std::isnan(g) ? INFINITY : err);
      if (!(err <= kWeightRel)) {
        fail(t, fmt::format("topk_weights[{}] = {:.9g}, expected {:.9g} (relative error {:.3g} > {:g})", j, g,
                            w[j], err, kWeightRel));
        break;
      }
    }
  }
  return rep;
}

}  // namespace moekit::route
