#include <cub/device/device_segmented_radix_sort.cuh>

#include <limits>

#include "common/cuda_check.cuh"
#include "dedup/general.cuh"
#include "dedup/launchers.hpp"
#include "primitives/launch.cuh"

namespace moekit::dedup::detail {

namespace {

constexpr int kThreads = 256, kItems = 16;

std::size_t align_up(std::size_t x) { return (x + 255) & ~std::size_t(255); }

std::int64_t total_items(const Problem& p) { return std::int64_t(p.batch) * p.row_len(); }

// The same call with null storage (size query, no launch) and with real storage.
cudaError_t segmented_sort(void* temp, std::size_t& temp_bytes, const Problem& p, const std::int32_t* in,
                           std::uint32_t* sorted, const int* offsets, cudaStream_t stream) {
  // DeviceSegmentedRadixSort (one CTA per segment) rather than DeviceSegmentedSort:
  // the latter copies segment-group sizes to the host and synchronises, which a
  // CUDA graph cannot capture.
  return cub::DeviceSegmentedRadixSort::SortKeys(temp, temp_bytes, reinterpret_cast<const std::uint32_t*>(in),
                                                 sorted, static_cast<int>(total_items(p)), p.batch, offsets,
                                                 offsets ? offsets + 1 : nullptr, 0, 32, stream);
}

struct Layout {
  std::size_t sorted = 0, offsets = 0, temp = 0, temp_bytes = 0, total = 0;
};

Layout layout(const Problem& p) {
  Layout l;
  l.sorted = 0;
  l.offsets = align_up(std::size_t(total_items(p)) * sizeof(std::uint32_t));
  l.temp = l.offsets + align_up((std::size_t(p.batch) + 1) * sizeof(int));
  segmented_sort(nullptr, l.temp_bytes, p, nullptr, nullptr, nullptr, nullptr);
  l.total = l.temp + l.temp_bytes;
  return l;
}

}  // namespace

const char* general_not_applicable(const Problem& p, const DeviceCaps&) {
  if (p.batch < 0 || p.mtp_step < 1 || p.k < 1) return "needs batch >= 0, mtp_step >= 1, k >= 1";
  if (total_items(p) > std::numeric_limits<int>::max()) return "needs batch*M*k < 2^31";
  return nullptr;
}

std::size_t general_workspace_bytes(const Problem& p, const DeviceCaps&) {
  if (p.batch <= 0) return 0;
  return layout(p).total;
}

LaunchStatus general_launch(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  if (p.batch <= 0) return cudaSuccess;
  const Layout l = layout(p);
  auto* base = static_cast<unsigned char*>(b.workspace);
  auto* sorted = reinterpret_cast<std::uint32_t*>(base + l.sorted);
  auto* offsets = reinterpret_cast<int*>(base + l.offsets);
  const int n = static_cast<int>(p.row_len());
  // The two kernels around CUB's sort launch with PDL when asked; the sort's
  // own launches are CUB's (its kernels wait for the offsets as a stream
  // would, and the unique pass waits for the sort in its pdl_wait()).
  const prim::LaunchAttrs at{pdl, false};
  if (const cudaError_t e = prim::launch_ex(dedup_segment_offsets_kernel,
                                            clamp_grid(ceil_div<long long>(p.batch + 1LL, 256)), 256, 0, stream, at,
                                            offsets, p.batch, n);
      e != cudaSuccess)
    return e;
  std::size_t temp_bytes = l.temp_bytes;
  if (const cudaError_t e = segmented_sort(base + l.temp, temp_bytes, p, b.indices, sorted, offsets, stream);
      e != cudaSuccess)
    return e;
  return prim::launch_ex(dedup_unique_sorted_kernel<kThreads, kItems>, clamp_grid(p.batch, 65536), kThreads, 0,
                         stream, at, static_cast<const std::uint32_t*>(sorted), b.out, p.batch, n);
}

}  // namespace moekit::dedup::detail
