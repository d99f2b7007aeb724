// ep's planning (ep.hpp): the placement, the receive side's layout problem
// and the combine problem.
#include <fmt/format.h>

#include <algorithm>

#include "common/problem_error.hpp"
#include "ep/ep.hpp"

namespace moekit::ep {

combine::Problem Problem::combine() const {
  combine::Problem c;
  c.tokens = tokens;
  c.topk = topk;
  c.rows = slot_capacity();
  c.hidden = hidden;
  c.dtype = dtype;
  c.scaling = scaling;
  return c;
}

combine::Problem Problem::combine_partials() const {
  combine::Problem c = combine();
  c.topk = ranks;
  c.rows = recv_capacity();
  return c;
}

Problem make_problem(std::int32_t ranks, std::int64_t tokens, std::int32_t topk, std::int32_t experts,
                     std::int64_t hidden, combine::DType dtype, float scaling, std::vector<std::int32_t> placement,
                     const experts::FfnArgs* ffn) {
  if (ranks < 1 || ranks > kMaxRanks)
    throw ProblemError(fmt::format("--ranks {}: ep drives 1 to {} GPUs of one host", ranks, kMaxRanks));
  if (tokens < 0) throw ProblemError(fmt::format("tokens per rank must be >= 0, got {}", tokens));
  if (topk < 1) throw ProblemError(fmt::format("K must be >= 1, got {}", topk));
  // The plan counts a token's slots to a rank in one byte (plan.cuh).
  if (topk > kMaxTopk)
    throw ProblemError(fmt::format("K {}: ep takes at most {} slots a token", topk, kMaxTopk));
  if (experts < 1) throw ProblemError(fmt::format("E must be >= 1, got {}", experts));
  if (hidden < 1) throw ProblemError(fmt::format("H must be >= 1, got {}", hidden));
  Problem p;
  p.ranks = ranks;
  p.tokens = tokens;
  p.topk = topk;
  p.experts = experts;
  p.hidden = hidden;
  p.dtype = dtype;
  p.scaling = scaling;
  if (placement.empty()) {
    if (experts % ranks != 0)
      throw ProblemError(fmt::format("{} experts do not divide over {} ranks: give --expert-placement FILE", experts,
                                     ranks));
    placement.resize(std::size_t(experts));
    for (std::int32_t e = 0; e < experts; ++e) placement[std::size_t(e)] = e / (experts / ranks);
  }
  if (placement.size() != std::size_t(experts))
    throw ProblemError(fmt::format("the placement has {} entries for {} experts", placement.size(), experts));
  for (std::size_t e = 0; e < placement.size(); ++e) {
    const std::int32_t r = placement[e];
    if (r < 0 || r >= ranks)
      throw ProblemError(fmt::format("the placement puts expert {} on rank {}, outside [0, {})", e, r, ranks));
    ++p.local[std::size_t(r)];
  }
  p.placement = std::move(placement);
  // The slot capacity is the combine's row count and the receive side's
  // layout is planned at its capacity: both must fit the kernels' int32 row
  // indices (align::make_problem refuses past them).
  if (double(p.slot_capacity()) > 2147483647.0)
    throw ProblemError(fmt::format("R * T * K = {} slots exceed the int32 row indices of the combine",
                                   p.slot_capacity()));
  // Ids outside a rank's map (other ranks' experts, -1) are dropped slots:
  // align's local map semantics with Invalid::drop.
  for (int r = 0; r < ranks; ++r)
    p.layouts[std::size_t(r)] =
        permute::make_problem(p.recv_capacity(), topk, std::max(p.local[std::size_t(r)], 1), 1, p.row_bytes(),
                              permute::Layout::compact, experts, align::Invalid::drop, align::MapSemantics::local);
  if (ffn != nullptr) {
    if (dtype == combine::DType::f32) throw ProblemError("the expert FFN takes bf16 or f16 rows, not f32");
    p.ffn = true;
    // The FFN's own layout is the one planned above (a CPU test ties them):
    // the same receive capacity, local experts, expert map and drop rule.
    for (int r = 0; r < ranks; ++r)
      p.ffns[std::size_t(r)] =
          experts::make_problem(p.recv_capacity(), topk, std::max(p.local[std::size_t(r)], 1), hidden, ffn->inter,
                                dtype == combine::DType::bf16 ? experts::DType::bf16 : experts::DType::f16, ffn->act,
                                ffn->w1_layout, permute::Layout::compact, 1, scaling, experts);
  }
  return p;
}

// A rank's local experts are the ones it owns in ascending global order.
std::vector<std::int32_t> local_experts(const Problem& p, int rank) {
  std::vector<std::int32_t> g;
  for (std::size_t e = 0; e < p.placement.size(); ++e)
    if (p.placement[e] == rank) g.push_back(std::int32_t(e));
  return g;
}

std::vector<std::int32_t> expert_map(const Problem& p, int rank) {
  std::vector<std::int32_t> m(std::size_t(p.experts), -1);
  const std::vector<std::int32_t> g = local_experts(p, rank);
  for (std::size_t l = 0; l < g.size(); ++l) m[std::size_t(g[l])] = std::int32_t(l);
  return m;
}

Traffic traffic(const Problem& p, const std::vector<std::vector<std::int32_t>>& ids) {
  Traffic t;
  for (int r = 0; r < p.ranks && std::size_t(r) < ids.size(); ++r)
    for (std::int64_t i = 0; i < p.tokens; ++i) {
      std::array<bool, kMaxRanks> to{};
      for (std::int32_t j = 0; j < p.topk; ++j) {
        const std::int32_t e = ids[std::size_t(r)][std::size_t(i * p.topk + j)];
        if (e < 0 || e >= p.experts) continue;
        const std::int32_t d = p.placement[std::size_t(e)];
        to[std::size_t(d)] = true;
        ++t.combine_rows;
        t.combine_remote += d != r;
      }
      for (int d = 0; d < p.ranks; ++d)
        if (to[std::size_t(d)]) {
          ++t.dispatch_rows;
          t.dispatch_remote += d != r;
        }
    }
  return t;
}

}  // namespace moekit::ep
