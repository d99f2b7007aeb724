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
#include "experts/reference.hpp"

namespace moekit::ep {

// One rank's host inputs.
struct RankInputs {
  std::span<const std::byte> hidden;   // T x H elements of p.dtype
  std::span<const std::int32_t> ids;   // T x K
  std::span<const float> weights;      // T x K
};

// A slot: token `token` of rank `rank`, its j-th expert.
struct Slot {
  std::int32_t rank = 0, j = 0;
  std::int64_t token = 0;
};

// One rank's outputs.
struct RankOutputs {
  // Its local experts' rows (compact: rows contiguous per local expert):
  // offsets[i]..offsets[i + 1] the rows of local expert i; local + 1 entries.
  std::vector<std::int64_t> offsets;
  std::vector<std::byte> rows;  // offsets.back() rows of p.row_bytes()
  std::vector<std::byte> y;     // p.ffn: the FFN's output of each of those rows, the same order
  std::vector<std::byte> out;   // T x H elements of p.dtype
  // The reference's only:
  std::vector<Slot> slots;  // the slot each of `rows` was sent for
  experts::Outputs ffn;     // p.ffn: the experts reference of this rank's own tokens (all, or a sample)
};

// The expert FFN's reference (p.ffn): the weights given (global expert
// order) or generated from `weight_seed` and keyed by the global expert id
// (experts::weight_value), so each rank's local expert computes what the
// one-GPU FFN computes for that global expert; a seeded sample of each rank's tokens within a budget
// of multiply-adds, or every token (a CPU run, whose y and out are then the
// reference's).
struct FfnInputs {
  // Given weights (the dtype's bits, global expert order): W1 [E, 2I, H] and
  // W2 [E, H, I]; empty: generated from weight_seed.
  std::span<const std::uint16_t> w1, w2;
  std::uint64_t weight_seed = 0;
  std::uint64_t sample_seed = 0;
  double budget_macs = 2e9;  // over all ranks
  bool all_tokens = false;
};

// The experts family's Problem of one rank's own T tokens over the E global
// experts (no expert map): what the FFN reference computes per source rank.
experts::Problem global_ffn(const Problem& p);

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
//
// p.ffn (`ffn` required): the rows and slots as above; each rank's `ffn`
// holds experts::reference of its own tokens (global_ffn(p)); with
// ffn->all_tokens also y (the reference's y of each row's slot) and out
// (the rules above over those y rows: each slot reads its own y row), else
// y and out empty (check() forms out from the run's own y).
std::vector<RankOutputs> reference(const Problem& p, std::span<const RankInputs> in, Return how = Return::slots,
                                   const FfnInputs* ffn = nullptr);

// got against ref: rank by rank, each local expert's offsets exactly, its
// rows as a multiset bit for bit, then out bit for bit. The first difference
// names the rank and the expert or element.
//
// p.ffn (`in` required): the rows matched as above also pair each of got's
// y rows with its slot; each sampled slot's y within the experts reference's
// bound (experts::check_y), then out bit for bit against the rule of `how`
// applied to got's own y rows. max_error: the largest y error in bound units.
CheckResult check(const Problem& p, const std::vector<RankOutputs>& ref, const std::vector<RankOutputs>& got,
                  Return how = Return::slots, std::span<const RankInputs> in = {});

}  // namespace moekit::ep
