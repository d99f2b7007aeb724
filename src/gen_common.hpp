// What the families' input generators share (`moekit gen <family>`, and kernel
// commands run without an input file). Each family's generator lives in
// src/<family>/gen.*; all are deterministic for a given seed on one platform.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "errors.hpp"

namespace moekit::gen {

inline constexpr double kInt32Max = double(std::numeric_limits<std::int32_t>::max());

// Guards against asking for more memory than a sane input needs. `limit` is the
// most elements the family can take at all (index math in int32, say).
inline void check_size(double elements, std::string_view what, double limit = kInt32Max * 4) {
  if (elements > limit)
    throw InputError(fmt::format("{:.0f} elements of {} is too large (at most {:.0f})", elements, what, limit));
}

// A finite number, the whole of `s`; `what` names the option in the error.
inline double parse_number(const std::string& s, std::string_view what) {
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (...) {
  }
  throw InputError(fmt::format("{}: bad number '{}'", what, s));
}

}  // namespace moekit::gen
