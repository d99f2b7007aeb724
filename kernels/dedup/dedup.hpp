// Per-batch top-k index de-duplication: public interface of the dedup family.
// Host-visible: no CUDA headers. Semantics: docs/dedup.md and issue #3.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/auto_rule.hpp"
#include "common/device.hpp"
#include "common/variant.hpp"

namespace moekit::dedup {

struct Problem {
  std::int32_t batch = 0;     // bs
  std::int32_t mtp_step = 0;  // M: rows per batch
  std::int32_t k = 0;         // values per row
  // Exclusive upper bound on all values when known (checked by the host), else
  // -1: values are any non-negative int32. Negative inputs are always ignored.
  std::int64_t max_index = -1;
  // Launch with programmatic dependent launch (sm_90+; primitives/pdl.cuh):
  // set only where the device has it (DeviceCaps::pdl).
  bool pdl = false;
  std::int64_t row_len() const { return std::int64_t(mtp_step) * k; }
};

struct Buffers {
  const std::int32_t* indices = nullptr;  // [batch * mtp_step, k]
  std::int32_t* out = nullptr;            // [batch, mtp_step * k]
  void* workspace = nullptr;
};

using Variant = moekit::Variant<Problem, Buffers>;

std::span<const Variant> variants();            // registered product variants
const Variant* find(std::string_view name);     // nullptr if unknown (no fallback)
// The `auto` choice for p on the current device / on `caps`: from auto_rows().
const Variant& pick_auto(const Problem& p);
const Variant& pick_auto(const Problem& p, const DeviceCaps& caps);
std::span<const AutoRow<Problem>> auto_rows();  // the table itself (docs, tests)
std::string auto_rule();                        // generated from auto_rows()

}  // namespace moekit::dedup
