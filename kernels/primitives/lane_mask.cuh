//! @file
//! Masks of the lanes below the calling lane, for ranking inside a warp
//! (`__popc(peers & lanemask_lt())`).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace moekit::prim {

//! Bits of the lanes below this one, read from the %lanemask_lt register:
//! no thread index needed.
__device__ __forceinline__ std::uint32_t lanemask_lt() {
  std::uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}

//! The same mask from a lane index the caller already holds (two integer
//! operations, no special-register read): where `lane` is in a register anyway.
__device__ __forceinline__ unsigned lanemask_lt(unsigned lane) { return (1u << lane) - 1u; }

}  // namespace moekit::prim
