// CPU reference and checker of ep (semantics: docs/ep.md): the global
// dispatch (which rows reach which rank's experts) and the combine on each
// token's rank, written from the definitions, not from the kernels' plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "check.hpp"
#include "ep/ep.hpp"

namespace moekit::ep {

// One rank's host inputs.
struct RankInputs {
  std::span<const std::byte> hidden;   // T x H elements of p.dtype
  std::span<const std::int32_t> ids;   // T x K
  std::span<const float> weights;      // T x K
};

// One rank's outputs.
struct RankOutputs {
  // Its local experts' rows (compact: rows contiguous per local expert):
  // offsets[i]..offsets[i + 1] the rows of local expert i; local + 1 entries.
  std::vector<std::int64_t> offsets;
  std::vector<std::byte> rows;  // offsets.back() rows of p.row_bytes()
  std::vector<std::byte> out;   // T x H elements of p.dtype
};

// Every rank's outputs. Rank r's local expert i receives hidden[s][t] once
// for every slot (s, t, j) with ids[s][t, j] its global id, for s ascending,
// t ascending, j ascending (the checker accepts any order within an expert);
// out[s][t] = S * sum_j w[s][t, j] * hidden[s][t] over the kept slots (ids in
// [0, E)), j ascending: combine's rule (f32 fused multiply-adds, one f32
// multiply by S, one rounding), identity experts.
//
// Return::partials (p2p-reduce): out[s][t] is instead, for each rank d that
// owns one of the token's slots (d ascending), the partial P_d = that
// rule with S = 1 over the token's slots on d, rounded to the dtype, then
// out = S * sum_d P_d by the same rule (weight 1 each): combine's reference
// applied twice, so the two roundings are where the kernels have them.
std::vector<RankOutputs> reference(const Problem& p, std::span<const RankInputs> in, Return how = Return::slots);

// got against ref: rank by rank, each local expert's offsets exactly, its
// rows as a multiset bit for bit, then out bit for bit. The first difference
// names the rank and the expert or element.
CheckResult check(const Problem& p, const std::vector<RankOutputs>& ref, const std::vector<RankOutputs>& got);

}  // namespace moekit::ep
