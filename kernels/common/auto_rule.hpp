// The `auto` choice of a family as ONE table: the pick and its text
// (`moekit variants`, docs) both come from it. Host-visible: no CUDA headers.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "common/device.hpp"
#include "common/variant.hpp"

namespace moekit {

template <class Problem>
struct AutoRow {
  std::string_view variant;  // registry name
  std::string_view when;     // text of the condition, e.g. "numel <= 32"; "" = always
  bool (*holds)(const Problem&, const DeviceCaps&) = nullptr;  // nullptr = always
  // The row holds only for launches with PDL (the `pdl` a pick is asked for,
  // which Variant::launch will be given); its `when` text says so.
  bool pdl_only = false;
};

// The variant of the first row whose condition holds and whose variant applies
// to p on caps, for launches with `pdl`, rows of variant `skip` left out;
// without one, the last row's variant (the table's "else"; the last other
// one where that is `skip`). Rows must name registered variants (the family's tests
// check that).
template <class V, class Problem>
const V& pick_from_rows(std::span<const AutoRow<Problem>> rows, std::span<const V> registry,
                        const Problem& p, const DeviceCaps& caps, bool pdl, std::string_view skip = {}) {
  for (const AutoRow<Problem>& r : rows) {
    if (r.pdl_only && !pdl) continue;
    if (!skip.empty() && r.variant == skip) continue;
    if (r.holds != nullptr && !r.holds(p, caps)) continue;
    const V* v = find_variant(registry, r.variant);
    if (v != nullptr && v->not_applicable(p, caps) == nullptr) return *v;
  }
  for (auto r = rows.rbegin(); r != rows.rend(); ++r)  // the last row that is not `skip`
    if (skip.empty() || r->variant != skip) return *find_variant(registry, r->variant);
  return *find_variant(registry, rows.back().variant);
}

// "first that applies of: micro; tiny if numel <= ...; ...; warpscan".
template <class Problem>
std::string auto_rule_text(std::span<const AutoRow<Problem>> rows) {
  std::string o = "first that applies of: ";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) o += "; ";
    o += rows[i].variant;
    if (!rows[i].when.empty()) {
      o += " if ";
      o += rows[i].when;
    }
  }
  return o;
}

}  // namespace moekit
