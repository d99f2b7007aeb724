// Counts from untrusted input (a .npy shape, an option, a dump's length) on
// their way to becoming sizes: products checked for overflow before use, and
// int64 dimensions narrowed to the int32 the kernels index with only when they
// fit. Both throw InputError (exit 2) naming where the count came from.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

#include "errors.hpp"

namespace moekit {

// The product of non-negative counts, or an InputError "WHAT: a x b x ...
// overflows int64" (a zero factor makes the product 0 whatever the others).
inline std::int64_t checked_product(std::initializer_list<std::int64_t> counts, std::string_view what) {
  std::int64_t p = 1;
  bool zero = false, overflow = false;
  for (const std::int64_t c : counts) {
    if (c < 0) throw InputError(fmt::format("{}: negative count {}", what, c));
    if (c == 0) zero = true;
    else if (!overflow && __builtin_mul_overflow(p, c, &p)) overflow = true;
  }
  if (zero) return 0;
  if (overflow) {
    std::string f;
    for (const std::int64_t c : counts) f += (f.empty() ? "" : " x ") + std::to_string(c);
    throw InputError(fmt::format("{}: {} overflows int64", what, f));
  }
  return p;
}

// A dimension as int32, or an InputError "WHAT = N does not fit int32".
inline std::int32_t narrow_to_int32(std::int64_t v, std::string_view what) {
  if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
    throw InputError(fmt::format("{} = {} does not fit int32 (at most {})", what, v,
                                 std::numeric_limits<std::int32_t>::max()));
  return static_cast<std::int32_t>(v);
}

}  // namespace moekit
