// Per-batch top-k index de-duplication: public interface of the dedup family.
// Host-visible: no CUDA headers. Semantics: docs/dedup.md and issue #3.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"

namespace moekit::dedup {

struct Problem {
  std::int32_t batch = 0;     // bs
  std::int32_t mtp_step = 0;  // M: rows per batch
  std::int32_t k = 0;         // values per row
  // Exclusive upper bound on all values when known (checked by the host), else
  // -1: values are any non-negative int32. Negative inputs are always ignored.
  std::int64_t max_index = -1;
  std::int64_t row_len() const { return std::int64_t(mtp_step) * k; }
};

struct Buffers {
  const std::int32_t* indices = nullptr;  // [batch * mtp_step, k]
  std::int32_t* out = nullptr;            // [batch, mtp_step * k]
  void* workspace = nullptr;
};

using Variant = moekit::Variant<Problem, Buffers>;

using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)

}  // namespace moekit::dedup
