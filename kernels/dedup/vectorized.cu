#include "dedup/vectorized.cuh"
#include "dedup/launch.cuh"
#include "dedup/launchers.hpp"

namespace moekit::dedup::detail {

const char* vectorized_not_applicable(const Problem& p) { return block_shape_check(p, kMaxTile); }
std::size_t vectorized_workspace_bytes(const Problem&) { return 0; }

void vectorized_launch(const Problem& p, const Buffers& b, Stream stream) {
  dispatch_tile(p.row_len(), [&](auto tile) {
    using T = decltype(tile);
    using K = VectorizedKernel<T::kThreads, T::kItems>;
    launch_rows<dedup_vectorized_kernel<T::kThreads, T::kItems>, typename K::Storage, T::kThreads>(p, b, stream);
  });
}

}  // namespace moekit::dedup::detail
