// CPU reference and checker for router top-k (semantics: docs/route.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "check.hpp"
#include "route/route.hpp"

namespace moekit::route {

struct Outputs {
  std::vector<std::int32_t> ids;   // [T, K]
  std::vector<float> weights;      // [T, K]
};

// logits: T x E values already widened to f32 (finite); bias: E values or
// nullptr. Scores in double; weights rounded once to f32.
Outputs reference(const Problem& p, const float* logits, const float* bias);

// What check() found beyond pass/fail.
struct CheckReport {
  CheckResult result;
  std::int64_t near_tie_rows = 0;  // rows whose selection is ambiguous within the tolerance
  std::int64_t first_near_tie_row = -1;
};

// Relative tolerance that makes two selection values a near-tie (issue #14).
inline constexpr double kTieRel = 1e-6;
// Relative tolerance of the weights.
inline constexpr double kWeightRel = 1e-5;

// got against the reference, row by row: ids equal (order included) unless the
// row has a near-tie, where any selection the tolerance allows passes and the
// row is counted; weights against the float64 weights of got's own ids.
CheckReport check(const Problem& p, const float* logits, const float* bias, const Outputs& ref,
                  const Outputs& got);

}  // namespace moekit::route
