// CPU reference and checker of the MoE path (semantics: docs/moe-path.md):
// route's, permute's and combine's references chained, with identity experts
// or the experts family's reference of the expert FFN between permute and
// combine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "check.hpp"
#include "experts/reference.hpp"
#include "moe_path/moe_path.hpp"
#include "permute/reference.hpp"
#include "route/reference.hpp"

namespace moekit::moe_path {

// Host inputs.
struct Inputs {
  const float* logits = nullptr;       // routed: T x E, widened to f32 (finite)
  const float* bias = nullptr;         // routed: E values or nullptr
  const std::byte* hidden = nullptr;   // T x H elements of combine.dtype
  std::span<const std::int32_t> ids;   // not routed: T x K, each in [0, E)
  std::span<const float> weights;      // not routed: T x K
  experts::WeightSource w;             // ffn: W1 and W2, given or generated (seed)
  std::uint64_t sample_seed = 0;       // ffn: check()'s sample of tokens
};

struct Outputs {
  route::Outputs routed;         // the ids and weights the path used (the inputs when not routed)
  permute::Outputs permuted;     // permute's outputs (align's, the rows, the inverse map, offsets)
  std::vector<std::uint16_t> y;  // ffn: [p.experts.rows(), H] dtype bits, the row of slot (t, j) at
                                 // inverse[t * K + j] (rows no slot uses: 0 in the reference)
  std::vector<std::byte> out;    // T x H elements of combine.dtype
  // The FFN listed the slots itself (ffn_lists_slots): no permute stage ran,
  // permuted holds only the inverse map (the identity on kept slots, -1 on
  // dropped ones), and y's rows are the slots.
  bool slot_rows = false;
};

// The path on the CPU: route's reference (or the inputs), permute's, then
// (ffn) experts::reference over every token on the path's ids and weights,
// its y placed in permute's row order, then combine's reference on
// permute's rows (identity) or those y rows, with the path's weights and S.
// With ffn and `with_ffn` false the FFN and combine are left out (y and out
// empty): what check() reads of `ref` (a GPU run's FFN is checked on a
// sample of tokens there instead).
Outputs reference(const Problem& p, const Inputs& in, bool with_ffn = true);

// The multiply-adds of the ffn reference over every token: each slot's
// 3 I H, and, for generated weights, as many again per expert used (its
// weights recomputed; at most min(E, T K) experts).
double ffn_reference_macs(const Problem& p, bool generated);
// The sample of check()'s FFN stage: as many tokens as fit this budget.
inline constexpr double kFfnCheckMacs = 2e9;

// What check() found beyond pass/fail.
struct CheckReport {
  CheckResult result;
  std::int64_t near_tie_rows = 0;  // route: rows whose selection is ambiguous within route's tolerance
  std::int64_t first_near_tie_row = -1;
  std::int64_t ffn_tokens = 0;  // ffn: the tokens whose y the FFN stage checked (of T)
};

// got against the semantics, stage by stage; the first failure names its
// stage ("route stage: ...") and its first difference:
//  (a) routed: route's checker (near-tie rows pass with any selection the
//      tolerance allows);
//  (b) permute's checker on got's own ids;
//  (c) got.out bit for bit against combine's reference applied to got's own
//      permuted rows (ffn: got's y rows), inverse map and weights;
//  (d) identity: check_identity on got's weights. ffn ("ffn stage"):
//      experts::reference on a seeded sample of tokens (experts::sample_tokens,
//      kFfnCheckMacs, in.sample_seed) with got's ids and weights, then
//      experts::check_y on got's y rows and inverse map.
// The result carries (d)'s largest error (ffn: in units of the derived bound).
CheckReport check(const Problem& p, const Inputs& in, const Outputs& ref, const Outputs& got);

// The identity experts' formula: out[t, c] against S * (sum_j w[t, j]) *
// hidden[t, c] computed in double, within 1 ULP of the output dtype for
// bf16/f16 (plus the f32 accumulation's own bound, (K + 1) * 2^-24 *
// S * sum_j |w[t, j]| * |hidden[t, c]|, which only matters when weights of
// both signs cancel) and 1e-5 relative to S * sum_j |w[t, j]| * |hidden[t, c]|
// for f32. max_error: ULPs (bf16/f16) or relative error (f32).
CheckResult check_identity(const Problem& p, const std::byte* hidden, const float* weights, const std::byte* out);

}  // namespace moekit::moe_path
