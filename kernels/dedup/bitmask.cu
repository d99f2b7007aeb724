#include "dedup/bitmask.cuh"
#include "dedup/launch.cuh"
#include "dedup/launchers.hpp"

namespace moekit::dedup::detail {

const char* bitmask_not_applicable(const Problem& p) { return block_shape_check(p, kMaxTile); }
std::size_t bitmask_workspace_bytes(const Problem&) { return 0; }

void bitmask_launch(const Problem& p, const Buffers& b, Stream stream) {
  dispatch_tile(p.row_len(), [&](auto tile) {
    using T = decltype(tile);
    using K = BitmaskKernel<T::kThreads, T::kItems>;
    launch_rows<dedup_bitmask_kernel<T::kThreads, T::kItems>, typename K::Storage, T::kThreads>(p, b, stream);
  });
}

}  // namespace moekit::dedup::detail
