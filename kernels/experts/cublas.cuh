// cublas: the vendor baseline inside the tool. The FFN over the compact layout
// as two cuBLAS grouped GEMMs (cublasGemmGroupedBatchedEx, one group per
// expert with rows) around the family's act-and-mul pass (act_rows.cuh):
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

#include "common/device.hpp"
#include "common/variant.hpp"
#include "experts/experts.hpp"

namespace moekit::experts::cublas {

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
