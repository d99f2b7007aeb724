// Host side of the one-CTA-per-row kernels: grid = batch, dynamic shared memory
// sized from the kernel's Storage struct.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "dedup/common.cuh"
#include "dedup/dedup.hpp"

namespace moekit::dedup::detail {

template <auto Kernel, class Storage, int THREADS>
inline void launch_rows(const Problem& p, const Buffers& b, Stream stream) {
  if (p.batch <= 0) return;
  constexpr std::size_t smem = sizeof(Storage);
  ensure_smem<Kernel>(smem);
  Kernel<<<static_cast<unsigned>(p.batch), THREADS, smem, stream>>>(b.indices, b.out,
                                                                    static_cast<int>(p.row_len()));
}

}  // namespace moekit::dedup::detail
