//! @file
//! Integer arguments of the bench and probe command lines (each program
//! words its own error line from the item these name).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace moekit::bench {

//! `s` as a whole decimal number in [lo, hi]; std::invalid_argument naming
//! `s` otherwise (an empty item included).
inline std::int64_t int_arg(std::string_view s, std::int64_t lo, std::int64_t hi) {
  const std::string item(s);
  char* end = nullptr;
  const long long v = std::strtoll(item.c_str(), &end, 10);
  if (item.empty() || *end != '\0' || v < lo || v > hi) throw std::invalid_argument(item);
  return v;
}

//! A comma list of int_arg items ("2,4"); the first bad item is named.
inline std::vector<std::int64_t> int_list(std::string_view s, std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> v;
  for (std::size_t at = 0; at <= s.size();) {
    std::size_t comma = s.find(',', at);
    if (comma == std::string_view::npos) comma = s.size();
    v.push_back(int_arg(s.substr(at, comma - at), lo, hi));
    at = comma + 1;
  }
  return v;
}

}  // namespace moekit::bench
