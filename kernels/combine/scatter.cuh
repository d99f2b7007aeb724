// Variant `scatter` (from the experts' side): every expert row is read once
// and added, weighted, into its token's f32 accumulator with atomics; a last
// pass multiplies by S and rounds. The row -> slot map comes from inverse
// (one pass over the slots). The additions happen in whatever order the
// rows arrive and each product is rounded before it is added, so the result
// is not the reference's bit for bit: the variant says so (not stable) and
// is checked to a tolerance (docs/combine.md).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "combine/gather.cuh"

namespace moekit::combine::detail {

// row_slot[inverse[s]] = s for every kept slot (row_slot starts at -1).
__global__ void row_slots_kernel(const std::int32_t* __restrict__ inverse, std::int64_t slots,
                                 std::int32_t* __restrict__ row_slot) {
  prim::pdl_wait();  // launched after a memset, without the attribute: no-op then (pdl.cuh)
  prim::pdl_launch_dependents();
  for (std::int64_t s = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; s < slots;
       s += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int32_t r = inverse[s];
    if (r >= 0) row_slot[r] = static_cast<std::int32_t>(s);
  }
}

// One block per expert row (grid-stride); kVec = 4 adds float4 atomics
// (sm_90 has them for global memory), else scalar ones.
template <class T, int kVec>
__global__ void scatter_rows_kernel(const T* __restrict__ x, const std::int32_t* __restrict__ row_slot,
                                    const float* __restrict__ w, float* __restrict__ acc, std::int64_t rows,
                                    int topk, std::int64_t hidden) {
  prim::pdl_wait();  // row_slot from row_slots_kernel
  prim::pdl_launch_dependents();
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int32_t s = row_slot[r];
    if (s < 0) continue;
    const float wt = w[s];
    const T* src = x + r * hidden;
    float* dst = acc + std::int64_t(s / topk) * hidden;
    for (std::int64_t c = std::int64_t(threadIdx.x) * kVec; c < hidden; c += std::int64_t(blockDim.x) * kVec) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      constexpr bool kVector = kVec == 4;
#else
      constexpr bool kVector = false;
#endif
      if constexpr (kVector) {
        atomicAdd(reinterpret_cast<float4*>(dst + c),
                  make_float4(wt * load_f32(src + c), wt * load_f32(src + c + 1), wt * load_f32(src + c + 2),
                              wt * load_f32(src + c + 3)));
      } else {
#pragma unroll
        for (int v = 0; v < kVec; ++v) atomicAdd(dst + c + v, wt * load_f32(src + c + v));
      }
    }
  }
}

template <class T>
__global__ void finish_kernel(const float* __restrict__ acc, T* __restrict__ out, std::int64_t n, float scaling) {
  prim::pdl_wait();  // the accumulators
  prim::pdl_launch_dependents();
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    store(out + i, __fmul_rn(acc[i], scaling));
}

}  // namespace moekit::combine::detail
