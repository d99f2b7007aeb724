//! @file
//! cp.async (sm_80+): 16-byte copies global -> shared that a thread issues and
//! later waits for, grouped per thread (commit_group / wait_group). The copies
//! a thread issued are visible to that thread after its wait; other threads
//! need a barrier as well. Below sm_80 the calls compile to nothing: callers
//! refuse those devices in their launchers.
#pragma once

#include <cstdint>

namespace moekit::prim {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define MOEKIT_CP_ASYNC 1
#else
#define MOEKIT_CP_ASYNC 0
#endif

//! Copies `src_bytes` (0 or 16) from `src` to shared address `dst` and fills
//! the rest of the 16 bytes with zeros (src is not read when src_bytes is 0,
//! but must still be a global address). Cached in L2 only: streamed data.
__device__ __forceinline__ void cp_async16(std::uint32_t dst, const void* src, int src_bytes) {
#if MOEKIT_CP_ASYNC
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#endif
}
//! Closes this thread's current group of copies (an empty group is allowed).
__device__ __forceinline__ void cp_async_commit() {
#if MOEKIT_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
//! Waits until at most kPending of this thread's groups are in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if MOEKIT_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}
}  // namespace moekit::prim
