// Host side of the one-CTA-per-row kernels: grid = batch, dynamic shared memory
// sized from the kernel's Storage struct.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "dedup/common.cuh"
#include "dedup/dedup.hpp"
#include "primitives/launch.cuh"

namespace moekit::dedup::detail {

template <auto Kernel, class Storage, int THREADS>
inline cudaError_t launch_rows(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  if (p.batch <= 0) return cudaSuccess;
  constexpr std::size_t smem = sizeof(Storage);
  return prim::launch_with_smem(Kernel, static_cast<unsigned>(p.batch), THREADS, smem, stream,
                                prim::pdl_attrs(pdl), b.indices, b.out, static_cast<int>(p.row_len()));
}

}  // namespace moekit::dedup::detail
