// act-and-mul between the grouped GEMMs: a[r, i] = act(h[r, gate i]) *
// h[r, up i] for the rows in use (r < offsets[E] of the compact layout), from
// h as gemm1 rounded it to the dtype (experts.hpp), either W1 row layout.
// A separate pass for now; fusing it into gemm1's epilogue is the next step
// the issue measures.
#pragma once

#include <cstdint>

#include "experts/act.cuh"
#include "primitives/pdl.cuh"

namespace moekit::experts::grouped {

constexpr int kActThreads = 256;

// Grid-stride over rows (blocks), threads over i. h [rows, 2I], a [rows, I].
template <class T>
__global__ void __launch_bounds__(kActThreads)
    act_rows_kernel(const T* __restrict__ h, T* __restrict__ a, const std::int64_t* __restrict__ offsets,
                    int experts, std::int64_t row_capacity, std::int64_t I, Act act, W1Layout layout) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  std::int64_t used = offsets[experts];
  used = used < 0 ? 0 : (used > row_capacity ? row_capacity : used);
  for (std::int64_t r = blockIdx.x; r < used; r += gridDim.x) {
    const T* hr = h + r * 2 * I;
    T* ar = a + r * I;
    for (std::int64_t i = threadIdx.x; i < I; i += kActThreads)
      ar[i] = from_f32<T>(act_and_mul(act, to_f32(hr[gate_row(layout, i, I)]), to_f32(hr[up_row(layout, i, I)])));
  }
}

}  // namespace moekit::experts::grouped
