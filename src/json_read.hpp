// Parsing untrusted JSON (records, routing dumps) with nlohmann-json, nested
// at most kMaxJsonDepth deep: the parser itself is iterative, but dump() and
// the walks over the parsed value recurse, so a hostile "[[[[..." must be
// refused before it reaches them.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace moekit {

constexpr int kMaxJsonDepth = 64;

struct JsonTooDeep {};  // thrown out of the parser; callers turn it into their own message

inline nlohmann::json parse_json(std::string_view text) {
  return nlohmann::json::parse(text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > kMaxJsonDepth) throw JsonTooDeep{};
    return true;
  });
}

}  // namespace moekit
