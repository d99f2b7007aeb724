// The grouped GEMMs' argument lists, built on the device from the compact
// layout's expert_offsets [E + 1]: group e is expert e, rows offsets[e] ..
// offsets[e+1]-1. Nothing about the counts reaches the host, so a launch
// needs no sync and captures into a graph. An expert with no rows is a group
// of M = 0: the grouped tile scheduler gives it no tile (it scans the group
// list 32 entries per warp step), so it costs no GEMM work.
#pragma once

#include <cstdint>

#include "primitives/pdl.cuh"

namespace moekit::experts::grouped {

constexpr int kGroupThreads = 128;

// One thread per expert: sink(e, row0, rows) writes group e's entries (the
// GEMM's translation unit knows their types: problem shapes, pointer and
// stride arrays). rows is clamped at 0 and row0 + rows at `row_capacity`
// (offsets come from permute, but a bad one must not send a GEMM past its
// buffers).
// @tparam Sink a trivially copyable functor, __device__ void(int, int64_t, int64_t) const
template <class Sink>
__global__ void __launch_bounds__(kGroupThreads)
    group_args_kernel(const std::int64_t* __restrict__ offsets, int experts, std::int64_t row_capacity, Sink sink) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  for (int e = blockIdx.x * kGroupThreads + threadIdx.x; e < experts; e += gridDim.x * kGroupThreads) {
    std::int64_t r0 = offsets[e], r1 = offsets[e + 1];
    r0 = r0 < 0 ? 0 : (r0 > row_capacity ? row_capacity : r0);
    r1 = r1 < r0 ? r0 : (r1 > row_capacity ? row_capacity : r1);
    sink(e, r0, r1 - r0);
  }
}

}  // namespace moekit::experts::grouped
