//! @file
//! Programmatic dependent launch (PDL, sm_90+): a kernel launched with the
//! attribute may start while the previous kernel in its stream finishes.
//! Device side: where it waits for that kernel and when it lets its own
//! dependents start; host side: the launch attribute. Before sm_90 the
//! device calls compile to nothing and launches ignore the attribute.
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
