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

// Grid-stride over pieces of 8 outputs (a row's a[r, i0 .. i0+7]), a piece a
// thread: every thread of the grid has loads in flight, whatever the row
// count. (One block a row, threads over i with 2-byte loads, was latency
// bound at 128 rows, Mixtral T 64: docs/bench/experts-notes.md.) kVec:
// I % 8 == 0 and h, a 16-byte aligned, so a piece is one 16-byte store and
// one or two 16-byte loads of each of gate and up (interleaved rows: the 16
// h values of the piece, gate and up alternating).
template <class T, bool kVec>
__global__ void __launch_bounds__(kActThreads)
    act_rows_kernel(const T* __restrict__ h, T* __restrict__ a, const std::int64_t* __restrict__ offsets,
                    int experts, std::int64_t row_capacity, std::int64_t I, Act act, W1Layout layout) {
  prim::pdl_wait();
  std::int64_t used = offsets[experts];
  used = used < 0 ? 0 : (used > row_capacity ? row_capacity : used);
  const std::int64_t pieces = (I + 7) / 8, n = used * pieces;
  const std::int64_t stride = std::int64_t(gridDim.x) * kActThreads;
  for (std::int64_t idx = std::int64_t(blockIdx.x) * kActThreads + threadIdx.x; idx < n; idx += stride) {
    const std::int64_t r = idx / pieces, i0 = (idx - r * pieces) * 8;
    const T* hr = h + r * 2 * I;
    T* ar = a + r * I;
    if constexpr (kVec) {
      uint4 gv, uv;
      if (layout == W1Layout::gate_up) {
        gv = *reinterpret_cast<const uint4*>(hr + i0);
        uv = *reinterpret_cast<const uint4*>(hr + I + i0);
      } else {  // h[2i] gate i, h[2i+1] up i: de-interleave 16 values
        const uint4 p0 = *reinterpret_cast<const uint4*>(hr + 2 * i0);
        const uint4 p1 = *reinterpret_cast<const uint4*>(hr + 2 * i0 + 8);
        const std::uint32_t w[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
        std::uint32_t g[4], u[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          g[q] = (w[2 * q] & 0xffffu) | (w[2 * q + 1] << 16);
          u[q] = (w[2 * q] >> 16) | (w[2 * q + 1] & 0xffff0000u);
        }
        gv = make_uint4(g[0], g[1], g[2], g[3]);
        uv = make_uint4(u[0], u[1], u[2], u[3]);
      }
      const T* ge = reinterpret_cast<const T*>(&gv);
      const T* ue = reinterpret_cast<const T*>(&uv);
      uint4 ov;
      T* oe = reinterpret_cast<T*>(&ov);
#pragma unroll
      for (int v = 0; v < 8; ++v) oe[v] = from_f32<T>(act_and_mul(act, to_f32(ge[v]), to_f32(ue[v])));
      *reinterpret_cast<uint4*>(ar + i0) = ov;
    } else {
      for (std::int64_t i = i0; i < i0 + 8 && i < I; ++i)
        ar[i] = from_f32<T>(act_and_mul(act, to_f32(hr[gate_row(layout, i, I)]), to_f32(hr[up_row(layout, i, I)])));
    }
  }
  // Blocks loop over many pieces: trigger at the end (pdl.cuh's rule).
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
