// CPU reference and checker of the MoE path (docs/moe-path.md).
#include "moe_path/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "combine/reference.hpp"
#include "half.hpp"

namespace moekit::moe_path {
namespace {

std::size_t esize(combine::DType d) { return d == combine::DType::f32 ? 4 : 2; }

double load(combine::DType d, const std::byte* base, std::int64_t i) {
  switch (d) {
    case combine::DType::f32: {
      float v;
      std::memcpy(&v, base + i * 4, 4);
      return v;
    }
    case combine::DType::bf16:
    case combine::DType::f16: {
      std::uint16_t h;
      std::memcpy(&h, base + i * 2, 2);
      return d == combine::DType::bf16 ? bf16_bits_to_f64(h) : f16_bits_to_f64(h);
    }
  }
  return 0;
}

std::uint16_t bits16(const std::byte* base, std::int64_t i) {
  std::uint16_t h;
  std::memcpy(&h, base + i * 2, 2);
  return h;
}

CheckResult with_stage(CheckResult c, const char* stage) {
  if (!c.ok) c.first_difference = std::string(stage) + ": " + c.first_difference;
  return c;
}

// The experts reference's inputs: the path's rows and weights, `routed`'s
// ids and weights (the run's own in a check).
experts::Inputs ffn_inputs(const Problem& p, const Inputs& in, const route::Outputs& routed) {
  experts::Inputs e;
  const std::size_t n = static_cast<std::size_t>(p.experts.tokens * p.experts.hidden);
  e.hidden = {reinterpret_cast<const std::uint16_t*>(in.hidden), in.hidden != nullptr ? n : 0};
  e.ids = routed.ids;
  e.weights = routed.weights;
  e.w = in.w;
  return e;
}

// The experts reference's y ([tokens, K, H]) at permute's rows ([rows, H]).
std::vector<std::uint16_t> place_y(const Problem& p, const experts::Outputs& r, std::span<const std::int32_t> inverse) {
  const std::int64_t K = p.experts.topk, H = p.experts.hidden;
  std::vector<std::uint16_t> y(static_cast<std::size_t>(p.experts.rows() * H), 0);
  for (std::size_t s = 0; s < r.tokens.size(); ++s)
    for (std::int64_t j = 0; j < K; ++j) {
      const std::int32_t row = inverse[static_cast<std::size_t>(r.tokens[s] * K + j)];
      if (!r.kept[s * K + j] || row < 0) continue;
      std::copy_n(r.y.begin() + static_cast<std::ptrdiff_t>((s * K + j) * H), H,
                  y.begin() + static_cast<std::ptrdiff_t>(row * H));
    }
  return y;
}

}  // namespace

double ffn_reference_macs(const Problem& p, bool generated) {
  const double per = 3.0 * double(p.experts.inter) * double(p.experts.hidden);
  const double slots = double(p.experts.tokens) * double(p.experts.topk);
  return per * (slots + (generated ? std::min(double(p.experts.experts), slots) : 0.0));
}

Outputs reference(const Problem& p, const Inputs& in, bool with_ffn) {
  Outputs o;
  if (p.routed) {
    o.routed = route::reference(p.route, in.logits, in.bias);
  } else {
    o.routed.ids.assign(in.ids.begin(), in.ids.end());
    o.routed.weights.assign(in.weights.begin(), in.weights.end());
  }
  const std::vector<std::int64_t> wide(o.routed.ids.begin(), o.routed.ids.end());
  o.permuted = permute::reference(p.permute, in.hidden, wide);
  if (p.ffn) {
    if (!with_ffn) return o;
    std::vector<std::int64_t> all(static_cast<std::size_t>(p.experts.tokens));
    std::iota(all.begin(), all.end(), std::int64_t{0});
    const experts::Outputs e = experts::reference(p.experts, ffn_inputs(p, in, o.routed), all);
    o.y = place_y(p, e, o.permuted.inverse);
  }
  o.out.resize(static_cast<std::size_t>(p.combine.tokens * p.combine.hidden) * esize(p.combine.dtype));
  const void* expert_out = p.ffn ? static_cast<const void*>(o.y.data()) : o.permuted.permuted.data();
  combine::reference(p.combine, expert_out, o.permuted.inverse.data(), o.routed.weights.data(), o.out.data());
  return o;
}

CheckResult check_identity(const Problem& p, const std::byte* hidden, const float* weights, const std::byte* out) {
  const combine::Problem& c = p.combine;
  const std::int64_t T = c.tokens, H = c.hidden, K = c.topk;
  const double S = c.scaling;
  CheckResult r;
  r.error_unit = c.dtype == combine::DType::f32 ? "rel" : "ulp";
  for (std::int64_t t = 0; t < T; ++t) {
    double sum = 0, sum_abs = 0;
    for (std::int64_t j = 0; j < K; ++j) {
      sum += weights[t * K + j];
      sum_abs += std::fabs(weights[t * K + j]);
    }
    for (std::int64_t col = 0; col < H; ++col) {
      const std::int64_t i = t * H + col;
      const double x = load(c.dtype, hidden, i);
      const double want = S * sum * x, got = load(c.dtype, out, i);
      const double mag = std::fabs(S) * sum_abs * std::fabs(x);  // no cancellation: |want|
      double err = 0;
      bool ok = true;
      if (c.dtype == combine::DType::f32) {
        if (std::isnan(got)) ok = false;
        else if (std::isinf(got)) ok = std::fabs(want) > std::numeric_limits<float>::max() && (got > 0) == (want > 0);
        else {
          err = got == want ? 0 : mag > 0 ? std::fabs(got - want) / mag : std::numeric_limits<double>::infinity();
          ok = err <= 1e-5;
        }
      } else {
        const bool bf = c.dtype == combine::DType::bf16;
        const std::uint16_t gb = bits16(out, i), wb = bf ? f64_to_bf16_bits(want) : f64_to_f16_bits(want);
        if (bf ? bf16_is_nan(gb) : f16_is_nan(gb)) {
          ok = false;
          err = std::numeric_limits<double>::infinity();
        } else {
          // ULPs from the correctly rounded formula; a cancellation of weights
          // of both signs may leave the f32 sum's own rounding visible.
          err = static_cast<double>(ulp_distance16(gb, wb));
          const double acc_bound = double(K + 1) * 0x1p-24 * mag;
          ok = err <= 1 || (std::isfinite(got) &&
                            std::fabs(got - want) <= (bf ? bf16_spacing(want) : f16_spacing(want)) + acc_bound);
        }
      }
      if (std::isfinite(err)) r.max_error = std::max(r.max_error, err);
      if (!ok) {
        r.ok = false;
        r.max_error = std::max(r.max_error, err);
        r.first_difference = fmt::format(
            "out[{}, {}] = {:.9g}, expected S * (sum_j w[{}, j]) * hidden[{}, {}] = {:g} * {:.9g} * {:.9g} = {:.9g} "
            "({} {})",
            t, col, got, t, t, col, S, sum, x, want, err, r.error_unit);
        return r;
      }
    }
  }
  return r;
}

CheckReport check(const Problem& p, const Inputs& in, const Outputs& ref, const Outputs& got) {
  CheckReport rep;
  auto fail = [&](std::string what) {
    rep.result.ok = false;
    rep.result.max_error = 1;
    rep.result.first_difference = std::move(what);
    return rep;
  };
  const std::size_t slots = static_cast<std::size_t>(p.permute.tokens) * static_cast<std::size_t>(p.permute.topk);
  if (got.routed.ids.size() != slots || got.routed.weights.size() != slots)
    return fail(fmt::format("the path holds {} ids and {} weights, expected {}", got.routed.ids.size(),
                            got.routed.weights.size(), slots));
  // (a) route
  if (p.routed) {
    const route::CheckReport rr = route::check(p.route, in.logits, in.bias, ref.routed, got.routed);
    rep.near_tie_rows = rr.near_tie_rows;
    rep.first_near_tie_row = rr.first_near_tie_row;
    if (!rr.result.ok) {
      rep.result = with_stage(rr.result, "route stage");
      return rep;
    }
  }
  // (b) permute, on the ids this run used; where the FFN listed the slots
  // itself, its inverse map instead: the identity on the slots a layout keeps
  // (an expert of this rank), -1 on the others
  const std::vector<std::int64_t> wide(got.routed.ids.begin(), got.routed.ids.end());
  CheckResult c;
  if (got.slot_rows) {
    if (!p.ffn) return fail("slot rows without the FFN");
    if (got.permuted.inverse.size() != slots)
      return fail(fmt::format("the inverse map holds {} entries, expected {}", got.permuted.inverse.size(), slots));
    for (std::size_t s = 0; s < slots; ++s) {
      const std::int64_t id = wide[s];
      const std::int32_t want = id >= 0 && id < p.experts.experts ? static_cast<std::int32_t>(s) : -1;
      if (got.permuted.inverse[s] != want)
        return fail(fmt::format("ffn stage: inverse[{}, {}] = {}, expected {} (its slot's own row, or -1 when dropped)",
                                s / std::size_t(p.permute.topk), s % std::size_t(p.permute.topk),
                                got.permuted.inverse[s], want));
    }
  } else {
    permute::Outputs own;
    const bool same_ids = got.routed.ids == ref.routed.ids;
    if (!same_ids) own = permute::reference(p.permute, in.hidden, wide);
    c = permute::check(p.permute, in.hidden, wide, same_ids ? ref.permuted : own, got.permuted);
    if (!c.ok) {
      rep.result = with_stage(c, "permute stage");
      return rep;
    }
  }
  // (c) combine, bit for bit on the run's own rows (ffn: its y rows), inverse map and weights
  const std::size_t out_bytes = static_cast<std::size_t>(p.combine.tokens * p.combine.hidden) * esize(p.combine.dtype);
  if (got.out.size() != out_bytes) return fail(fmt::format("out holds {} bytes, expected {}", got.out.size(), out_bytes));
  const std::size_t y_elements = p.ffn ? static_cast<std::size_t>(p.experts.rows() * p.experts.hidden) : 0;
  if (p.ffn && got.y.size() != y_elements)
    return fail(fmt::format("y holds {} elements, expected {} ({} rows of {})", got.y.size(), y_elements,
                            p.experts.rows(), p.experts.hidden));
  std::vector<std::byte> want(out_bytes);
  const void* expert_out = p.ffn ? static_cast<const void*>(got.y.data()) : got.permuted.permuted.data();
  combine::reference(p.combine, expert_out, got.permuted.inverse.data(), got.routed.weights.data(), want.data());
  c = combine::check(p.combine, want.data(), got.out.data());
  if (!c.ok) {
    rep.result = with_stage(c, "combine stage");
    return rep;
  }
  // (d) the experts
  if (p.ffn) {
    const std::vector<std::int64_t> tokens = experts::sample_tokens(p.experts, kFfnCheckMacs, in.sample_seed);
    const experts::Outputs er = experts::reference(p.experts, ffn_inputs(p, in, got.routed), tokens);
    rep.ffn_tokens = static_cast<std::int64_t>(tokens.size());
    rep.result = with_stage(experts::check_y(p.experts, er, got.y, got.permuted.inverse), "ffn stage");
    return rep;
  }
  rep.result = with_stage(check_identity(p, in.hidden, got.routed.weights.data(), got.out.data()), "identity experts");
  return rep;
}

}  // namespace moekit::moe_path
