#include "dedup/fast.cuh"
#include "dedup/launch.cuh"
#include "dedup/launchers.hpp"

namespace moekit::dedup::detail {

// 8-bit digits: a full 31-bit range takes 4 passes (5- and 6-bit digits and
// CUB's 4-bit BlockRadixSort were slower on the H100: docs/bench/dedup.md).
constexpr int kFastRadixBits = 8;

// Block shapes per tile, from the tuning table of docs/bench/dedup.md: the
// bitmap and bucket paths like many threads (short per-thread runs), the radix
// passes like fewer, longer ones (fewer warps to rank across and synchronise).
template <bool SMART, class F>
cudaError_t dispatch_fast_tile(std::int64_t n, F&& f) {
  if constexpr (SMART) {
    if (n <= 512) return f(Tile<128, 4>{});
    if (n <= 1024) return f(Tile<256, 4>{});
    if (n <= 2048) return f(Tile<512, 4>{});
    if (n <= 4096) return f(Tile<512, 8>{});
    if (n <= 8192) return f(Tile<1024, 8>{});
    return f(Tile<1024, 16>{});
  } else {
    if (n <= 512) return f(Tile<64, 8>{});
    if (n <= 1024) return f(Tile<128, 8>{});
    if (n <= 2048) return f(Tile<256, 8>{});
    if (n <= 4096) return f(Tile<256, 16>{});
    if (n <= 8192) return f(Tile<512, 16>{});
    return f(Tile<1024, 16>{});
  }
}

template <bool SMART>
cudaError_t fast_launch_impl(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  return dispatch_fast_tile<SMART>(p.row_len(), [&](auto tile) {
    using T = decltype(tile);
    using K = FastKernel<T::kThreads, T::kItems, kFastRadixBits, SMART, SMART>;
    return launch_rows<dedup_fast_kernel<T::kThreads, T::kItems, kFastRadixBits, SMART, SMART>,
                typename K::Storage, T::kThreads>(p, b, stream, pdl);
  });
}

const char* range_sort_not_applicable(const Problem& p, const DeviceCaps&) { return block_shape_check(p, kMaxTile); }
std::size_t range_sort_workspace_bytes(const Problem&, const DeviceCaps&) { return 0; }
LaunchStatus range_sort_launch(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  return fast_launch_impl<false>(p, b, stream, pdl);
}

const char* fast_not_applicable(const Problem& p, const DeviceCaps&) { return block_shape_check(p, kMaxTile); }
std::size_t fast_workspace_bytes(const Problem&, const DeviceCaps&) { return 0; }
LaunchStatus fast_launch(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  return fast_launch_impl<true>(p, b, stream, pdl);
}

}  // namespace moekit::dedup::detail
