// A family's registry as one type: its variant table, lookup by name, the
// `auto` rows, the pick they make and the rule text they print. A family
// declares its table and auto rows once (kernels/<f>/registry.cu) and exposes
// `registry()`; callers ask it (`<f>::registry().find(name)`). Host-visible:
// no CUDA headers.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/auto_rule.hpp"
#include "common/device.hpp"
#include "common/variant.hpp"

namespace moekit {

template <class Problem_, class Buffers_>
class Registry {
 public:
  using Problem = Problem_;
  using Buffers = Buffers_;
  using Variant = moekit::Variant<Problem, Buffers>;
  using Row = AutoRow<Problem>;

  // Both tables outlive the registry (namespace-scope arrays of registry.cu).
  constexpr Registry(std::span<const Variant> variants, std::span<const Row> auto_rows)
      : variants_(variants), auto_rows_(auto_rows) {}

  std::span<const Variant> variants() const { return variants_; }  // in `moekit variants` order
  const Variant* find(std::string_view name) const {             // nullptr if unknown (no fallback)
    return find_variant(variants_, name);
  }
  // The `auto` choice for p on `caps` / on the current device, for launches
  // with `pdl` (Variant::launch's argument): from auto_rows().
  const Variant& pick_auto(const Problem& p, const DeviceCaps& caps, bool pdl) const {
    return pick_from_rows<Variant, Problem>(auto_rows_, variants_, p, caps, pdl);
  }
  const Variant& pick_auto(const Problem& p, bool pdl) const { return pick_auto(p, device_caps(), pdl); }
  // The `auto` choice with the row of variant `skip` left out: for a caller
  // whose problems differ from the ones the rows were fitted on in a way the
  // Problem does not say (ep's receive layout, mostly dropped slots).
  const Variant& pick_auto_except(const Problem& p, const DeviceCaps& caps, bool pdl, std::string_view skip) const {
    return pick_from_rows<Variant, Problem>(auto_rows_, variants_, p, caps, pdl, skip);
  }
  // Whether some auto row depends on PDL (AutoRow::pdl_only): where none
  // does, the pick is the same for both and a caller that has no `pdl` (a
  // workspace size, an applicability check) may ask for either.
  bool auto_reads_pdl() const {
    for (const Row& r : auto_rows_)
      if (r.pdl_only) return true;
    return false;
  }
  std::span<const Row> auto_rows() const { return auto_rows_; }  // the table itself (docs, tests)
  std::string auto_rule() const { return auto_rule_text<Problem>(auto_rows_); }

 private:
  std::span<const Variant> variants_;
  std::span<const Row> auto_rows_;
};

}  // namespace moekit
