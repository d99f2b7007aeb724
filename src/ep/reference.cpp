// ep's CPU reference and checker (reference.hpp).
#include "ep/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>

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
std::vector<std::int32_t> own_inverse(const Problem& p, std::span<const std::int32_t> ids) {
  std::vector<std::int32_t> inv(ids.size(), -1);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= 0 && ids[i] < p.experts) inv[i] = static_cast<std::int32_t>(i / std::size_t(p.topk));
  return inv;
}

CheckResult fail(std::string what) { return CheckResult{false, std::move(what), 1.0}; }

// Return::partials' out of one token rank: combine's reference per
// destination rank (S = 1, the slots that rank owns), then over the partials.
void partial_sums(const Problem& p, const RankInputs& in, std::byte* out) {
  const std::size_t rb = std::size_t(p.row_bytes()), T = std::size_t(p.tokens), K = std::size_t(p.topk);
  const std::size_t R = std::size_t(p.ranks);
  combine::Problem one = own_rows(p);
  one.scaling = 1.0f;
  std::vector<std::byte> partials(R * T * rb);
  std::vector<std::int32_t> sum_inv(T * R, -1);
  for (std::size_t d = 0; d < R; ++d) {
    std::vector<std::int32_t> inv(T * K, -1);
    for (std::size_t i = 0; i < T * K; ++i) {
      const std::int32_t e = in.ids[i];
      if (e >= 0 && e < p.experts && std::size_t(p.placement[std::size_t(e)]) == d) {
        inv[i] = static_cast<std::int32_t>(i / K);
        sum_inv[(i / K) * R + d] = static_cast<std::int32_t>(d * T + i / K);
      }
    }
    combine::reference(one, in.hidden.data(), inv.data(), in.weights.data(), partials.data() + d * T * rb);
  }
  combine::Problem sum = p.combine_partials();
  const std::vector<float> ones(T * R, 1.0f);
  combine::reference(sum, partials.data(), sum_inv.data(), ones.data(), out);
}

}  // namespace

std::vector<RankOutputs> reference(const Problem& p, std::span<const RankInputs> in, Return how) {
  const std::size_t rb = std::size_t(p.row_bytes());
  // Every global expert's slots, (s, t, j) ascending.
  std::vector<std::vector<const std::byte*>> sent(std::size_t(p.experts));
  for (int s = 0; s < p.ranks; ++s)
    for (std::int64_t t = 0; t < p.tokens; ++t)
      for (std::int32_t j = 0; j < p.topk; ++j) {
        const std::int32_t e = in[std::size_t(s)].ids[std::size_t(t * p.topk + j)];
        if (e >= 0 && e < p.experts) sent[std::size_t(e)].push_back(in[std::size_t(s)].hidden.data() + std::size_t(t) * rb);
      }
  std::vector<RankOutputs> o(std::size_t(p.ranks));
  for (int r = 0; r < p.ranks; ++r) {
    RankOutputs& ro = o[std::size_t(r)];
    ro.offsets.push_back(0);
    for (std::int32_t e = 0; e < p.experts; ++e) {
      if (p.placement[std::size_t(e)] != r) continue;  // local experts in ascending global order
      for (const std::byte* row : sent[std::size_t(e)]) ro.rows.insert(ro.rows.end(), row, row + rb);
      ro.offsets.push_back(ro.offsets.back() + std::int64_t(sent[std::size_t(e)].size()));
    }
    ro.out.resize(std::size_t(p.tokens) * rb);
    if (how == Return::partials) {
      partial_sums(p, in[std::size_t(r)], ro.out.data());
      continue;
    }
    const combine::Problem c = own_rows(p);
    const std::vector<std::int32_t> inv = own_inverse(p, in[std::size_t(r)].ids);
    combine::reference(c, in[std::size_t(r)].hidden.data(), inv.data(), in[std::size_t(r)].weights.data(),
                       ro.out.data());
  }
  return o;
}

CheckResult check(const Problem& p, const std::vector<RankOutputs>& ref, const std::vector<RankOutputs>& got) {
  const std::size_t rb = std::size_t(p.row_bytes());
  if (got.size() != ref.size())
    return fail(fmt::format("{} ranks' outputs, expected {}", got.size(), ref.size()));
  for (std::size_t r = 0; r < ref.size(); ++r) {
    const RankOutputs &a = ref[r], &b = got[r];
    const std::vector<std::int32_t> map = expert_map(p, int(r));
    std::vector<std::int32_t> global(a.offsets.size() - 1);  // local id -> global id
    for (std::size_t e = 0; e < map.size(); ++e)
      if (map[e] >= 0) global[std::size_t(map[e])] = std::int32_t(e);
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
    }
    if (b.out.size() != a.out.size())
      return fail(fmt::format("rank {}: out has {} bytes, expected {}", r, b.out.size(), a.out.size()));
    const CheckResult c = combine::check(p.combine(), a.out.data(), b.out.data());
    if (!c.ok) return fail(fmt::format("rank {}: out: {}", r, c.first_difference));
  }
  return CheckResult{};
}

}  // namespace moekit::ep
