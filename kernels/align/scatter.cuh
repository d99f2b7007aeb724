// The second kernel of the count-then-scatter variants (baseline to
// fill-overlap): every slot takes
// its row with a global atomic on its expert's cursor. Row order inside an
// expert therefore depends on scheduling (not stable).
#pragma once

#include "align/common.cuh"
#include "primitives/launch.cuh"

namespace moekit::align::detail {

// cursor[e] holds expert e's first row on entry (written by the count kernel).
template <class IdT>
__global__ void scatter_atomic_kernel(Args a, int* __restrict__ cursor) {
  prim::pdl_wait();  // the count kernel's cursors
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < a.numel; i += stride) {
    const int e = expert_at<IdT>(a, i);
    if (e < 0) continue;
    const int row = atomicAdd(cursor + e, 1);
    if (row < a.max_padded) a.sorted[row] = static_cast<int>(i);
  }
  prim::pdl_launch_dependents();  // up to 2048 blocks: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

template <class IdT>
inline cudaError_t launch_scatter_atomic(const Args& a, int* cursor, cudaStream_t s, prim::LaunchAttrs at) {
  constexpr int kThreads = 256;
  const unsigned grid = clamp_grid(ceil_div<long long>(a.numel, kThreads), 2048);
  return prim::launch_ex(scatter_atomic_kernel<IdT>, grid, kThreads, 0, s, at, a, cursor);
}

}  // namespace moekit::align::detail
