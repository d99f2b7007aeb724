// Placeholder registry: variants are added by the act_and_mul work item.
#include <cstdlib>

#include "act_and_mul/act_and_mul.hpp"

namespace moekit::act {

std::span<const Variant> variants() { return {}; }
const Variant* find(std::string_view) { return nullptr; }
const Variant& pick_auto(const Problem&) { std::abort(); }
std::string_view auto_rule() { return "none yet"; }

}  // namespace moekit::act
