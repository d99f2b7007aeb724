// Result of comparing a kernel's output with the CPU reference.
#pragma once

#include <string>

namespace moekit {

struct CheckResult {
  bool ok = true;
  // One line naming the first differing index and both values; empty when ok.
  std::string first_difference;
  // Largest error seen: ULPs for f16/bf16, relative error for f32, 0 or 1 for
  // exact checks.
  double max_error = 0.0;
  std::string error_unit = "exact";  // "exact", "ulp" or "rel"
};

}  // namespace moekit
