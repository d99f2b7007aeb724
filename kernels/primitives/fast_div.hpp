// Division of 32-bit numerators by a divisor fixed at launch time, as one
// multiply-high, an add and a shift (Granlund & Montgomery, "Division by
// invariant integers using multiplication", 1994). Host- and device-callable;
// includable from plain C++ (the CPU tests check it against '/').
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MOEKIT_HD __host__ __device__ __forceinline__
#else
#define MOEKIT_HD inline
#endif

namespace moekit::prim {

// Exact n / divisor and n % divisor for every n < 2^32, divisor >= 1.
struct FastDivU32 {
  std::uint32_t divisor = 1;
  std::uint32_t multiplier = 1;  // ceil(2^(32+shift) / divisor) - 2^32
  std::uint32_t shift = 0;       // ceil(log2(divisor))

  FastDivU32() = default;
  explicit FastDivU32(std::uint32_t d) : divisor(d) {
    while ((std::uint64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<std::uint32_t>(
        ((std::uint64_t{1} << 32) * ((std::uint64_t{1} << shift) - d)) / d + 1);
  }

  MOEKIT_HD std::uint32_t div(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t hi = __umulhi(n, multiplier);
#else
    const std::uint32_t hi = static_cast<std::uint32_t>((std::uint64_t{n} * multiplier) >> 32);
#endif
    // hi + n can carry past 32 bits: add in 64.
    return static_cast<std::uint32_t>((std::uint64_t{hi} + n) >> shift);
  }
};

}  // namespace moekit::prim
