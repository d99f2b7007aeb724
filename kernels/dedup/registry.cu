// Placeholder registry: variants are added by the dedup work item.
#include <cstdlib>

#include "dedup/dedup.hpp"

namespace moekit::dedup {

std::span<const Variant> variants() { return {}; }
const Variant* find(std::string_view) { return nullptr; }
const Variant& pick_auto(const Problem&) { std::abort(); }
std::string_view auto_rule() { return "none yet"; }

}  // namespace moekit::dedup
