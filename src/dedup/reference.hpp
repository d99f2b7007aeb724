// CPU reference and checker for per-batch top-k de-duplication.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "check.hpp"
#include "dedup/dedup.hpp"

namespace moekit::dedup {

// indices: [batch*mtp_step, k]; returns [batch, mtp_step*k].
std::vector<std::int32_t> reference(const Problem& p, std::span<const std::int32_t> indices);

// Exact equality; the first difference names batch, column and both values.
CheckResult check(const Problem& p, std::span<const std::int32_t> ref,
                  std::span<const std::int32_t> got);

}  // namespace moekit::dedup
