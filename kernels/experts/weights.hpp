// Generated expert weights as a pure function of (seed, matrix, expert, row,
// column), callable on the host (the CPU reference recomputes only the rows
// it reads) and on the device (generate_weights fills 22 GB of DeepSeek-V3
// weights without a file). Includable from plain C++.
//
// Value: a 24-bit integer from a SplitMix64 hash, centred, times a scale that
// makes the element uniform on [-sqrt(3/n), sqrt(3/n)] (variance 1/n, n the
// matrix's inner dimension: H for W1, I for W2), so h and y stay O(1) for
// O(1) inputs; then rounded to the weights' dtype by the caller. Every step
// is an exact integer operation or one IEEE f32 multiply, so host and device
// give the same bits.
#pragma once

#include <cmath>
#include <cstdint>

#include "primitives/fast_div.hpp"  // MOEKIT_HD

namespace moekit::experts {

MOEKIT_HD std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The f32 scale of matrix `inner` (H for W1, I for W2): sqrt(3 / inner) / 2^23.
inline float weight_scale(std::int64_t inner) {
  return static_cast<float>(std::sqrt(3.0 / static_cast<double>(inner)) / 8388608.0);
}

// matrix 0 = W1 [E, 2I, H], 1 = W2 [E, H, I]; `cols` is the matrix's row
// length (H or I). The value before rounding to the dtype.
MOEKIT_HD float weight_value(std::uint64_t seed, int matrix, std::int64_t expert, std::int64_t row,
                             std::int64_t col, std::int64_t rows, std::int64_t cols, float scale) {
  const std::uint64_t key =
      ((static_cast<std::uint64_t>(expert) * static_cast<std::uint64_t>(rows) + static_cast<std::uint64_t>(row)) *
           static_cast<std::uint64_t>(cols) +
       static_cast<std::uint64_t>(col));
  const std::uint64_t h = splitmix64(splitmix64(seed * 2 + static_cast<std::uint64_t>(matrix)) ^ key);
  const std::int32_t v = static_cast<std::int32_t>(h >> 40) - 8388608;  // [-2^23, 2^23)
  return static_cast<float>(v) * scale;
}

}  // namespace moekit::experts
