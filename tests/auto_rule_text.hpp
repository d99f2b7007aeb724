// Reads a family's `auto` rule text back (the sentence `moekit variants`
// prints) and checks it against the rows it claims to state. The text is
// split by its own grammar here, not rebuilt from the rows, so a row whose
// condition is missing from the text, or out of order, or a condition that
// holds() tests but `when` does not name, fails.
#pragma once

#include <doctest/doctest.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/auto_rule.hpp"

namespace moekit::testing {

struct RuleItem {
  std::string variant, when;  // when: "" for an unconditional item
};

// "first that applies of: a if X; b; c if Y (p; q)" -> {a, X}, {b, ""}, {c, Y (p; q)}:
// items end at "; " outside parentheses.
inline std::vector<RuleItem> parse_rule_text(std::string_view text) {
  constexpr std::string_view head = "first that applies of: ";
  REQUIRE(text.substr(0, head.size()) == head);
  text.remove_prefix(head.size());
  std::vector<RuleItem> items;
  while (!text.empty()) {
    std::size_t end = std::string_view::npos;  // the next "; " outside parentheses
    for (std::size_t i = 0, depth = 0; i + 1 < text.size() && end == std::string_view::npos; ++i) {
      if (text[i] == '(') ++depth;
      if (text[i] == ')' && depth > 0) --depth;
      if (depth == 0 && text[i] == ';' && text[i + 1] == ' ') end = i;
    }
    const std::string_view item = text.substr(0, end);
    const std::size_t cond = item.find(" if ");
    items.push_back({std::string(item.substr(0, cond)),
                     cond == std::string_view::npos ? std::string() : std::string(item.substr(cond + 4))});
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 2);
  }
  return items;
}

// Every row in order, each with its condition's text exactly when it has a
// condition (a predicate, or PDL: pdl_only) (an unconditional row still needs
// its variant to apply).
template <class Problem>
void check_rule_text(std::string_view text, std::span<const AutoRow<Problem>> rows) {
  const std::vector<RuleItem> items = parse_rule_text(text);
  REQUIRE(items.size() == rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CAPTURE(i);
    CHECK(items[i].variant == rows[i].variant);
    CHECK(items[i].when == rows[i].when);
    const bool conditional = rows[i].holds != nullptr || rows[i].pdl_only;
    CHECK(rows[i].when.empty() == !conditional);
  }
}

}  // namespace moekit::testing
