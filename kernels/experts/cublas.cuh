// cublas: the vendor baseline inside the tool. The FFN over the compact layout
// as two cuBLAS grouped GEMMs (cublasGemmGroupedBatchedEx, one group per
// expert with rows) around an act-and-mul kernel of our own:
//   gemm1  h[rows_e, 2I] = permuted[rows_e, H] . W1[e]^T   (f32 compute, h in the dtype)
//   act    a[r, i] = act(h[r, gate_row(i)]) * h[r, up_row(i)]   (act.cuh: every act, both W1 layouts)
//   gemm2  y[rows_e, H]  = a[rows_e, I] . W2[e]^T
// cuBLAS takes each group's sizes on the host: the launch copies
// expert_offsets back and waits for it (Variant::host_sync), so it cannot be
// captured into a CUDA graph and refuses to run inside a capture.
// The cuBLAS calls live in cublas.cu (the only file that includes cuBLAS).
#pragma once

#include <cstddef>
#include <cstdint>

#include "experts/act.cuh"
#include "primitives/pdl.cuh"

namespace moekit::experts::cublas {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 1u << 20;  // grid-stride past this

// a[r, i] for rows [row0, row1) and i < I, from h [rows, 2I] (the dtype):
// h's column c is W1's row c, so gate_row / up_row pick the columns of either
// W1 layout. h is read as rounded by gemm1; act_and_mul runs in f32.
template <class T>
__global__ void __launch_bounds__(kThreads) act_mul_kernel(const T* __restrict__ h, T* __restrict__ a,
                                                           std::int64_t row0, std::int64_t row1, std::int64_t I,
                                                           Act act, W1Layout layout) {
  prim::pdl_wait();
  const std::int64_t n = (row1 - row0) * I;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t k = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < n; k += stride) {
    const std::int64_t r = row0 + k / I, i = k % I;
    const T* hr = h + r * 2 * I;
    const float g = to_f32(hr[gate_row(layout, i, I)]), u = to_f32(hr[up_row(layout, i, I)]);
    a[r * I + i] = from_f32<T>(act_and_mul(act, g, u));
  }
  // Blocks loop over many rows: trigger at the end (pdl.cuh's rule).
  prim::pdl_launch_dependents();
}

// The FFN's workspace: h [rows, 2I], a [rows, I], the grouped calls' device
// pointer arrays (6 E pointers) and the workspace cuBLAS is given.
std::size_t workspace_bytes(const Problem& p, const DeviceCaps& caps);
// Why the variant cannot run p (the padded layout, sizes past cuBLAS's int),
// or nullptr.
const char* not_applicable(const Problem& p, const DeviceCaps& caps);
// The FFN: rows of b.permuted -> rows of b.y in the same order, `ws` the
// workspace above. Waits on the host for expert_offsets; returns
// cudaErrorStreamCaptureUnsupported inside a capture, a cuBLAS failure as
// the nearest cudaError_t.
LaunchStatus ffn(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl);

}  // namespace moekit::experts::cublas
