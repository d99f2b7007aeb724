// Counts from untrusted input (a .npy shape) on their way to the int32 the
// kernels index with: narrowed only when they fit, never truncated. Throws
// InputError (exit 2) naming where the count came from. (Products of counts
// are checked where they are formed: npy's data_bytes, the families' limits.)
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <string_view>

#include "errors.hpp"

namespace moekit {

// A dimension as int32, or an InputError "WHAT = N does not fit int32".
inline std::int32_t narrow_to_int32(std::int64_t v, std::string_view what) {
  if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
    throw InputError(fmt::format("{} = {} does not fit int32 (at most {})", what, v,
                                 std::numeric_limits<std::int32_t>::max()));
  return static_cast<std::int32_t>(v);
}

}  // namespace moekit
