// CPU reference and checker of the MoE path (semantics: docs/moe-path.md):
// route's, permute's and combine's references chained, with identity experts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "check.hpp"
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
};

struct Outputs {
  route::Outputs routed;         // the ids and weights the path used (the inputs when not routed)
  permute::Outputs permuted;     // permute's outputs (align's, the rows, the inverse map, offsets)
  std::vector<std::byte> out;    // T x H elements of combine.dtype
};

// The path on the CPU: route's reference (or the inputs), permute's, then
// combine's on permute's rows with the path's weights and S.
Outputs reference(const Problem& p, const Inputs& in);

// What check() found beyond pass/fail.
struct CheckReport {
  CheckResult result;
  std::int64_t near_tie_rows = 0;  // route: rows whose selection is ambiguous within route's tolerance
  std::int64_t first_near_tie_row = -1;
};

// got against the semantics, stage by stage; the first failure names its
// stage ("route stage: ...") and its first difference:
//  (a) routed: route's checker (near-tie rows pass with any selection the
//      tolerance allows);
//  (b) permute's checker on got's own ids;
//  (c) got.out bit for bit against combine's reference applied to got's own
//      permuted rows, inverse map and weights;
//  (d) check_identity on got's weights.
// The result carries (d)'s largest error.
CheckReport check(const Problem& p, const Inputs& in, const Outputs& ref, const Outputs& got);

// The identity experts' formula: out[t, c] against S * (sum_j w[t, j]) *
// hidden[t, c] computed in double, within 1 ULP of the output dtype for
// bf16/f16 (plus the f32 accumulation's own bound, (K + 1) * 2^-24 *
// S * sum_j |w[t, j]| * |hidden[t, c]|, which only matters when weights of
// both signs cancel) and 1e-5 relative to S * sum_j |w[t, j]| * |hidden[t, c]|
// for f32. max_error: ULPs (bf16/f16) or relative error (f32).
CheckResult check_identity(const Problem& p, const std::byte* hidden, const float* weights, const std::byte* out);

}  // namespace moekit::moe_path
