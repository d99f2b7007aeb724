//! @file
//! A counter in global memory that blocks of one grid raise and one thread
//! waits on: the arrive side (release reduction) and the wait side (acquire
//! load). A grid barrier, or one block waiting for the others. The _sys
//! forms reach across GPUs (peer memory over NVLink): a release at system
//! scope waits for the thread's stores to peers, not only to its own GPU.
#pragma once

#include <cuda_runtime.h>

namespace moekit::prim {

//! Adds v to *p with gpu-scope release semantics: the stores this thread made,
//! and those of its block ordered before a __syncthreads() it passed, are
//! visible to a thread whose acquire load reads the sum. No return value, so
//! the thread does not wait for the round trip (a __threadfence() before a
//! plain atomicAdd waits for every prior store of the thread to complete).
__device__ __forceinline__ void red_release_gpu(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

//! Loads *p with gpu-scope acquire semantics: the stores that the raising
//! blocks ordered before their release (or fence) are visible to this thread
//! after it, and to its block after a following __syncthreads().
__device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

//! A release (and acquire) fence at system scope: followed by relaxed
//! reductions (red_relaxed_sys), one fence releases to several counters,
//! which may lie on other GPUs. A release reduction per counter
//! (red.release.sys) is a fence of its own each, and waits for the thread's
//! earlier reductions to peers to complete: a round trip over NVLink each.
__device__ __forceinline__ void fence_acq_rel_sys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

//! Adds v to *p at system scope with no ordering of its own: after
//! fence_acq_rel_sys, a release (PTX's release pattern: fence, then a
//! strong write).
__device__ __forceinline__ void red_relaxed_sys(unsigned* p, unsigned v) {
  asm volatile("red.relaxed.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

//! ld_acquire_gpu at system scope: sees the stores other GPUs released.
__device__ __forceinline__ unsigned ld_acquire_sys(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

//! Adds v to *p and returns the old value, acquire and release at gpu scope:
//! the last of a grid's raisers (the one that reads the sum less one) sees
//! every earlier raiser's stores, those to peers' memory included, and a
//! following release at system scope passes them on (causality is
//! transitive), so each block pays a gpu-scope fence, not a system one.
__device__ __forceinline__ unsigned atom_add_acq_rel_gpu(unsigned* p, unsigned v) {
  unsigned old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

}  // namespace moekit::prim
