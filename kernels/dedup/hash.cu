#include "dedup/hash.cuh"
#include "dedup/launch.cuh"
#include "dedup/launchers.hpp"

namespace moekit::dedup::detail {

// The table (2 slots per tile item) plus the insertion list cost 12 bytes per
// item: 8192 items (96 KiB) is the largest tile that also fits an A100.
const char* hash_not_applicable(const Problem& p, const DeviceCaps&) { return block_shape_check(p, 8192); }
std::size_t hash_workspace_bytes(const Problem&, const DeviceCaps&) { return 0; }

LaunchStatus hash_launch(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  return dispatch_tile<1024, 8192>(p.row_len(), [&](auto tile) {
    using T = decltype(tile);
    using K = HashKernel<T::kThreads, T::kItems>;
    return launch_rows<dedup_hash_kernel<T::kThreads, T::kItems>, typename K::Storage, T::kThreads>(p, b, stream, pdl);
  });
}

}  // namespace moekit::dedup::detail
