//! @file
//! The sm_90 bulk-copy engine (the non-tensor part of TMA): one thread hands
//! a whole contiguous range to the copy engine instead of every thread moving
//! 16 bytes. Loads (global -> shared) complete on a shared-memory mbarrier
//! that counts bytes; stores (shared -> global) are tracked by bulk groups.
//! Sizes and addresses must be multiples of 16 bytes. Before sm_90 the
//! functions compile to nothing: callers check DeviceCaps first (a variant's
//! not_applicable) and never launch such code there.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace moekit::prim {

//! A byte-counting barrier in shared memory (one phase per completed load set).
struct alignas(8) BulkBarrier {
  std::uint64_t word;
};

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

//! One thread: the barrier expects one arrival per phase.
__device__ __forceinline__ void bulk_barrier_init(BulkBarrier* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(bar)) : "memory");
  // Make the initialised barrier visible to the copy engine (async proxy).
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

//! One thread: arrive and announce `bytes` of loads that complete this phase.
__device__ __forceinline__ void bulk_barrier_expect(BulkBarrier* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
#endif
}

//! Waits until phase `parity` (0, 1, 0, ...) of the barrier has completed.
__device__ __forceinline__ void bulk_barrier_wait(BulkBarrier* bar, unsigned parity) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
#endif
}

//! One thread: copy `bytes` from global `src` into shared `dst`; completes on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, BulkBarrier* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
#endif
}

//! One thread: copy `bytes` from shared `src` to global `dst` in the current bulk group.
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_u32(src)),
               "r"(bytes)
               : "memory");
#endif
}

//! Closes the current bulk group of stores.
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}

//! Waits until at most `kPending` committed groups still READ shared memory
//! (their source buffers may be overwritten after this).
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
#endif
}

//! Waits until every committed group has completed (writes visible to the grid
//! once the kernel ends).
__device__ __forceinline__ void bulk_wait_all() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#endif
}

//! Asks the copy engine to bring [src, src + bytes) into L2 (no destination,
//! nothing to wait for): a CTA that must wait for other blocks can start the
//! DRAM reads it will need. Before sm_90 it does nothing (a hint, not a copy).
__device__ __forceinline__ void bulk_prefetch_l2(const void* src, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
#else
  (void)src;
  (void)bytes;
#endif
}

}  // namespace moekit::prim
