//! @file
//! Programmatic dependent launch (PDL, sm_90+): a kernel launched with the
//! attribute may start while the previous kernel in its stream finishes.
//! Device side: where it waits for that kernel and when it lets its own
//! dependents start; host side: the launch attribute (launch.cuh's launch_ex
//! with LaunchAttrs{.pdl = true} is the one place launches set it). Before
//! sm_90 the device calls compile to nothing and launches ignore the attribute;
//! without the attribute both calls return at once, so a kernel calls them
//! whether or not its launch asked for PDL.
//!
//! The rule every moekit kernel follows:
//!  1. pdl_wait() before its first global memory access that another kernel
//!     may be part of: reading its inputs (the previous kernel may still be
//!     writing them) and writing its outputs or workspace (the previous kernel,
//!     e.g. the previous launch of the same op in a timing graph, may still be
//!     reading them). Only work on registers, shared memory and kernel
//!     arguments goes before it, and reads of data no launch writes (an
//!     expert's weights: the experts decode kernel starts its W2 stream there).
//!  2. pdl_launch_dependents() as early as is safe, which for memory is
//!     anywhere: the dependent's own pdl_wait() waits for this whole grid to
//!     complete and flush, so the trigger only decides when the next grid is
//!     scheduled (it fires once every block has triggered or exited). moekit
//!     triggers right after pdl_wait() in every kernel whose grid fits one
//!     wave (a fixed or device-sized grid: the decode kernels, the count
//!     blocks, grid-stride copies sized per SM, cooperative grids): the next
//!     launch's blocks then get resident while this one runs, and their own
//!     pdl_wait() holds them. Except the shortest launches: one-block decode
//!     kernels at small sizes may trigger after their layout, before their
//!     stores, which measured 0.04-0.17 us faster there (and slower for
//!     longer launches; the family's policy table says where). A kernel
//!     whose grid can exceed one wave (one block per token or batch row, or
//!     per 256 elements) triggers at the end of each block instead:
//!     triggered early, the next grid's waiting blocks take SM slots this
//!     grid's later blocks still need (measured: the
//!     spread-pdl variant fell to ~43% of the copy bandwidth past one wave;
//!     flat-pdl, which triggers after its stores, was never slower than
//!     without PDL). The same holds for a one-wave grid whose blocks loop
//!     over many rows of data (row gathers): the next grid's resident
//!     waiting blocks take the shared memory and slots the copy needs
//!     (measured: a TMA row gather of 4096 tokens x 8 at H 4096, 143 us
//!     triggered early against 130 without PDL), so those trigger at the end.
//!     So does experts' fused kernel (a persistent grid streaming weights,
//!     waiting on its own blocks): 2-4 % faster at the TP8 shard's T 1.
//!     Never before pdl_wait(): that keeps one more promise, that when a grid
//!     launches the grid two launches back has completed, so a kernel may
//!     read data older than its direct predecessor before its own pdl_wait()
//!     (twopass's `place` kernel counts the ids while `count` runs).
//!
//! A memset (or memcpy) node cannot be a programmatic predecessor: a launch
//! sequence with a cudaMemsetAsync launches the kernel right after it without
//! the attribute (it waits for the memset as usual).
//! Comments here keep µs figures: 2 lines (why alternative designs lost; not thresholds).
#pragma once

#include <cuda_runtime.h>

namespace moekit::prim {

//! Blocks until every grid this one depends on has completed and its memory
//! operations are visible. Required before reading what the previous kernel
//! wrote, when launched with pdl_attribute().
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

//! Lets the next grid of the stream (if launched with PDL) start launching as
//! soon as every block of this grid has called it or exited.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

//! The launch attribute that lets a kernel overlap its predecessor's tail.
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

}  // namespace moekit::prim
