#include "dedup/vectorized.cuh"
#include "dedup/launch.cuh"
#include "dedup/launchers.hpp"

namespace moekit::dedup::detail {

const char* vectorized_not_applicable(const Problem& p, const DeviceCaps&) { return block_shape_check(p, kMaxTile); }
std::size_t vectorized_workspace_bytes(const Problem&, const DeviceCaps&) { return 0; }

LaunchStatus vectorized_launch(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  return dispatch_tile(p.row_len(), [&](auto tile) {
    using T = decltype(tile);
    using K = VectorizedKernel<T::kThreads, T::kItems>;
    return launch_rows<dedup_vectorized_kernel<T::kThreads, T::kItems>, typename K::Storage, T::kThreads>(p, b, stream, pdl);
  });
}

}  // namespace moekit::dedup::detail
