//! @file
//! Row elements to and from f32: loads widen exactly, stores round once to
//! nearest even (the rounding every moekit reference models). The row types
//! are float, __nv_bfloat16 and __half.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace moekit::prim {

__device__ __forceinline__ float load_f32(const float* p) { return *p; }
__device__ __forceinline__ float load_f32(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ float load_f32(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }

}  // namespace moekit::prim
