// Device-side helpers shared by all kernel families.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace moekit {

template <class T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Grid x is limited to 2^31-1 blocks and y/z to 65535: clamp and let kernels
// grid-stride, so token counts above 65535 never produce an invalid launch.
inline unsigned clamp_grid(long long blocks, long long max_blocks = 0x7fffffffLL) {
  if (blocks < 1) return 1;
  return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

}  // namespace moekit
