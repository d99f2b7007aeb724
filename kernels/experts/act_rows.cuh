// act-and-mul between two GEMMs that leave h [rows, 2I] in memory (grouped's
// CUTLASS GEMMs, cublas's): a[r, i] = act(h[r, gate i]) * h[r, up i] for the
// rows in use, r < offsets[E] of the compact layout (read on the device, so no
// host count is needed), from h as gemm1 rounded it to the dtype
// (experts.hpp), either W1 row layout. A separate pass; fusing it into gemm1's
// epilogue is the next step issue 32 measures for `grouped`.
#pragma once

#include <cstdint>

#include "experts/act.cuh"
#include "primitives/pdl.cuh"

namespace moekit::experts {

constexpr int kActThreads = 256;

// Grid-stride over rows (blocks), threads over i: no per-element division in
// a pass bound by memory. h [rows, 2I], a [rows, I].
template <class T>
__global__ void __launch_bounds__(kActThreads)
    act_rows_kernel(const T* __restrict__ h, T* __restrict__ a, const std::int64_t* __restrict__ offsets,
                    int experts, std::int64_t row_capacity, std::int64_t I, Act act, W1Layout layout) {
  prim::pdl_wait();
  std::int64_t used = offsets[experts];
  used = used < 0 ? 0 : (used > row_capacity ? row_capacity : used);
  for (std::int64_t r = blockIdx.x; r < used; r += gridDim.x) {
    const T* hr = h + r * 2 * I;
    T* ar = a + r * I;
    for (std::int64_t i = threadIdx.x; i < I; i += kActThreads)
      ar[i] = from_f32<T>(act_and_mul(act, to_f32(hr[gate_row(layout, i, I)]), to_f32(hr[up_row(layout, i, I)])));
  }
  // Blocks loop over many rows: trigger at the end (pdl.cuh's rule).
  prim::pdl_launch_dependents();
}

// The launch of act_rows_kernel for p's dtype, sized for the row capacity.
// Defined in registry.cu, the one translation unit that instantiates the
// kernel (grouped_sm90.cu is built for sm_90a alone, cublas.cu beside it: a
// kernel template instantiated in two of them would be two device functions
// behind one host stub).
LaunchStatus launch_act_rows(const Problem& p, const void* h, void* a, const std::int64_t* offsets, Stream s,
                             bool pdl);

}  // namespace moekit::experts
