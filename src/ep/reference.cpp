// ep's CPU reference and checker (reference.hpp).
#include "ep/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "combine/reference.hpp"

namespace moekit::ep {
namespace {

// The combine on a token's rank with identity experts: combine's reference
// over the rank's own hidden rows, slot (t, j) reading row t where kept.
combine::Problem own_rows(const Problem& p) {
  combine::Problem c = p.combine();
  c.rows = p.tokens;
  return c;
}
// `per_slot`: slot (t, j) reads row t * K + j of one row per slot instead.
std::vector<std::int32_t> own_inverse(const Problem& p, std::span<const std::int32_t> ids, bool per_slot = false) {
  std::vector<std::int32_t> inv(ids.size(), -1);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= 0 && ids[i] < p.experts) inv[i] = static_cast<std::int32_t>(per_slot ? i : i / std::size_t(p.topk));
  return inv;
}

CheckResult fail(std::string what) { return CheckResult{false, std::move(what), 1.0}; }

// Return::partials' out of one token rank: combine's reference per
// destination rank (S = 1, the slots that rank owns), then over the partials.
// `rows`: the token's own rows (identity experts, slot (t, j) reads row t),
// or with `per_slot` one row per slot (slot (t, j) reads row t * K + j).
void partial_sums(const Problem& p, const RankInputs& in, const std::byte* rows, bool per_slot, std::byte* out) {
  const std::size_t rb = std::size_t(p.row_bytes()), T = std::size_t(p.tokens), K = std::size_t(p.topk);
  const std::size_t R = std::size_t(p.ranks);
  combine::Problem one = own_rows(p);
  if (per_slot) one.rows = p.tokens * p.topk;
  one.scaling = 1.0f;
  std::vector<std::byte> partials(R * T * rb);
  std::vector<std::int32_t> sum_inv(T * R, -1);
  for (std::size_t d = 0; d < R; ++d) {
    std::vector<std::int32_t> inv(T * K, -1);
    for (std::size_t i = 0; i < T * K; ++i) {
      const std::int32_t e = in.ids[i];
      if (e >= 0 && e < p.experts && std::size_t(p.placement[std::size_t(e)]) == d) {
        inv[i] = static_cast<std::int32_t>(per_slot ? i : i / K);
        sum_inv[(i / K) * R + d] = static_cast<std::int32_t>(d * T + i / K);
      }
    }
    combine::reference(one, rows, inv.data(), in.weights.data(), partials.data() + d * T * rb);
  }
  combine::Problem sum = p.combine_partials();
  const std::vector<float> ones(T * R, 1.0f);
  combine::reference(sum, partials.data(), sum_inv.data(), ones.data(), out);
}

// One token rank's out by the rule of `how` over `rows`: the rank's own
// rows (identity experts: slot (t, j) reads row t) or, with `per_slot`, one
// row per slot (row t * K + j: the expert outputs of the rank's slots).
void combine_rows(const Problem& p, const RankInputs& in, const std::byte* rows, bool per_slot, Return how,
                  std::byte* out) {
  if (how == Return::partials) return partial_sums(p, in, rows, per_slot, out);
  combine::Problem c = own_rows(p);
  if (per_slot) c.rows = p.tokens * p.topk;
  combine::reference(c, rows, own_inverse(p, in.ids, per_slot).data(), in.weights.data(), out);
}

experts::Inputs ffn_inputs(const RankInputs& in, const FfnInputs& f) {
  experts::Inputs x;
  x.hidden = {reinterpret_cast<const std::uint16_t*>(in.hidden.data()), in.hidden.size() / 2};
  x.ids = in.ids;
  x.weights = in.weights;
  x.w = experts::WeightSource::of(f.w1, f.w2, f.weight_seed);
  return x;
}

}  // namespace

experts::Problem global_ffn(const Problem& p) {
  const experts::Problem& f = p.ffn_problem(0);
  return experts::make_problem(p.tokens, p.topk, p.experts, p.hidden, f.inter, f.dtype, f.act, f.w1_layout,
                               permute::Layout::compact, 1, p.scaling);
}

std::vector<RankOutputs> reference(const Problem& p, std::span<const RankInputs> in, Return how,
                                   const FfnInputs* ffn) {
  const std::size_t rb = std::size_t(p.row_bytes());
  // Every global expert's slots, (s, t, j) ascending.
  std::vector<std::vector<Slot>> sent(std::size_t(p.experts));
  for (int s = 0; s < p.ranks; ++s)
    for (std::int64_t t = 0; t < p.tokens; ++t)
      for (std::int32_t j = 0; j < p.topk; ++j) {
        const std::int32_t e = in[std::size_t(s)].ids[std::size_t(t * p.topk + j)];
        if (e >= 0 && e < p.experts) sent[std::size_t(e)].push_back({s, j, t});
      }
  std::vector<RankOutputs> o(std::size_t(p.ranks));
  if (p.ffn) {
    if (ffn == nullptr) throw std::invalid_argument("ep::reference: p.ffn needs FfnInputs");
    const experts::Problem gp = global_ffn(p);
    for (int s = 0; s < p.ranks; ++s) {
      std::vector<std::int64_t> tokens;
      if (ffn->all_tokens) {
        tokens.resize(std::size_t(p.tokens));
        std::iota(tokens.begin(), tokens.end(), 0);
      } else if (p.tokens > 0) {
        tokens = experts::sample_tokens(gp, ffn->budget_macs / p.ranks, ffn->sample_seed + std::uint64_t(s));
      }
      o[std::size_t(s)].ffn = experts::reference(gp, ffn_inputs(in[std::size_t(s)], *ffn), tokens);
    }
  }
  // Every source rank's FFN is computed above: a rank's rows may read any's y.
  const std::size_t K = std::size_t(p.topk);
  const auto y_of = [&](const Slot& sl) {  // a slot's y (every token computed: tokens = 0 .. T-1)
    return reinterpret_cast<const std::byte*>(o[std::size_t(sl.rank)].ffn.y.data()) +
           (std::size_t(sl.token) * K + std::size_t(sl.j)) * rb;
  };
  for (int r = 0; r < p.ranks; ++r) {
    RankOutputs& ro = o[std::size_t(r)];
    ro.offsets.push_back(0);
    for (const std::int32_t e : local_experts(p, r)) {
      for (const Slot& sl : sent[std::size_t(e)]) {
        const std::byte* row = in[std::size_t(sl.rank)].hidden.data() + std::size_t(sl.token) * rb;
        ro.rows.insert(ro.rows.end(), row, row + rb);
        ro.slots.push_back(sl);
        if (p.ffn && ffn->all_tokens) ro.y.insert(ro.y.end(), y_of(sl), y_of(sl) + rb);
      }
      ro.offsets.push_back(ro.offsets.back() + std::int64_t(sent[std::size_t(e)].size()));
    }
    if (p.ffn && !ffn->all_tokens) continue;  // out from the run's own y (check)
    ro.out.resize(std::size_t(p.tokens) * rb);
    if (p.ffn)
      combine_rows(p, in[std::size_t(r)], reinterpret_cast<const std::byte*>(ro.ffn.y.data()), true, how,
                   ro.out.data());
    else
      combine_rows(p, in[std::size_t(r)], in[std::size_t(r)].hidden.data(), false, how, ro.out.data());
  }
  return o;
}

CheckResult check(const Problem& p, const std::vector<RankOutputs>& ref, const std::vector<RankOutputs>& got,
                  Return how, std::span<const RankInputs> in) {
  const std::size_t rb = std::size_t(p.row_bytes());
  if (got.size() != ref.size())
    return fail(fmt::format("{} ranks' outputs, expected {}", got.size(), ref.size()));
  if (p.ffn && in.size() != ref.size()) throw std::invalid_argument("ep::check: p.ffn needs the inputs");
  // p.ffn: where got has each source rank's slots' y rows ([T * K] places:
  // the rank that computed it and the row there; -1: none), gathered one
  // source rank at a time below.
  const std::size_t TK = std::size_t(p.tokens) * std::size_t(p.topk);
  struct Place {
    std::int32_t rank = -1;
    std::int64_t row = 0;
  };
  std::vector<std::vector<Place>> y_at(p.ffn ? ref.size() : 0, std::vector<Place>(TK));
  for (std::size_t r = 0; r < ref.size(); ++r) {
    const RankOutputs &a = ref[r], &b = got[r];
    const std::vector<std::int32_t> global = local_experts(p, int(r));  // local id -> global id
    if (b.offsets.size() != a.offsets.size())
      return fail(
          fmt::format("rank {}: {} expert offsets, expected {}", r, b.offsets.size(), a.offsets.size()));
    for (std::size_t i = 0; i + 1 < a.offsets.size(); ++i) {
      const std::int64_t n = a.offsets[i + 1] - a.offsets[i];
      if (b.offsets[i] != a.offsets[i] || b.offsets[i + 1] - b.offsets[i] != n)
        return fail(fmt::format("rank {}, local expert {} (global {}): {} rows at offset {}, expected {} "
                                             "at {}",
                                             r, i, global[i], b.offsets[i + 1] - b.offsets[i], b.offsets[i], n,
                                             a.offsets[i]));
      if (b.rows.size() < std::size_t(a.offsets[i + 1]) * rb)
        return fail(fmt::format("rank {}: fewer rows than its offsets say", r));
      // The rows of one expert as a multiset: both sides sorted by their bytes.
      auto sorted = [&](const RankOutputs& x) {
        std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
        std::iota(idx.begin(), idx.end(), x.offsets[i]);
        std::sort(idx.begin(), idx.end(), [&](std::int64_t u, std::int64_t v) {
          return std::memcmp(x.rows.data() + std::size_t(u) * rb, x.rows.data() + std::size_t(v) * rb, rb) < 0;
        });
        return idx;
      };
      const std::vector<std::int64_t> ia = sorted(a), ib = sorted(b);
      for (std::size_t k = 0; k < ia.size(); ++k)
        if (std::memcmp(a.rows.data() + std::size_t(ia[k]) * rb, b.rows.data() + std::size_t(ib[k]) * rb, rb) != 0)
          return fail(fmt::format(
              "rank {}, local expert {} (global {}): its rows differ from the rows sent to it as a set (got row {} "
              "where the sorted reference has row {})",
              r, i, global[i], ib[k], ia[k]));
      if (!p.ffn) continue;
      // Equal rows sent for one expert pair in either order: the FFN of a
      // row is a function of the row (the same bits in, the same y out).
      if (b.y.size() < std::size_t(b.offsets.back()) * rb)
        return fail(fmt::format("rank {}: fewer y rows than its offsets say", r));
      for (std::size_t k = 0; k < ia.size(); ++k) {
        const Slot& sl = a.slots[std::size_t(ia[k])];
        y_at[std::size_t(sl.rank)][std::size_t(sl.token) * std::size_t(p.topk) + std::size_t(sl.j)] = {std::int32_t(r),
                                                                                                   ib[k]};
      }
    }
    if (p.ffn) continue;  // out once every rank's y rows are paired
    if (b.out.size() != a.out.size())
      return fail(fmt::format("rank {}: out has {} bytes, expected {}", r, b.out.size(), a.out.size()));
    const CheckResult c = combine::check(p.combine(), a.out.data(), b.out.data());
    if (!c.ok) return fail(fmt::format("rank {}: out: {}", r, c.first_difference));
  }
  if (!p.ffn) return CheckResult{};
  const experts::Problem gp = global_ffn(p);
  CheckResult all;
  all.error_unit = "bound";
  for (std::size_t s = 0; s < ref.size(); ++s) {
    std::vector<std::byte> slot_y(TK * rb);  // this rank's slots' y rows, as got has them
    for (std::size_t i = 0; i < TK; ++i)
      if (const Place& at = y_at[s][i]; at.rank >= 0)
        std::memcpy(slot_y.data() + i * rb, got[std::size_t(at.rank)].y.data() + std::size_t(at.row) * rb, rb);
    const std::span<const std::uint16_t> y16(reinterpret_cast<const std::uint16_t*>(slot_y.data()), TK * rb / 2);
    const CheckResult cy = experts::check_y(gp, ref[s].ffn, y16, own_inverse(p, in[s].ids, true));
    if (!cy.ok) return fail(fmt::format("rank {}'s tokens: y: {}", s, cy.first_difference));
    all.max_error = std::max(all.max_error, cy.max_error);
    if (got[s].out.size() != std::size_t(p.tokens) * rb)
      return fail(fmt::format("rank {}: out has {} bytes, expected {}", s, got[s].out.size(), std::size_t(p.tokens) * rb));
    std::vector<std::byte> want(std::size_t(p.tokens) * rb);
    combine_rows(p, in[s], slot_y.data(), true, how, want.data());
    const CheckResult c = combine::check(p.combine(), want.data(), got[s].out.data());
    if (!c.ok) return fail(fmt::format("rank {}: out (from its slots' y rows): {}", s, c.first_difference));
  }
  return all;
}

}  // namespace moekit::ep
