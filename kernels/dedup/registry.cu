// Registry of the dedup variants and the `auto` rule.
#include <array>
#include <string>

#include "dedup/common.cuh"
#include "dedup/dedup.hpp"
#include "dedup/launchers.hpp"

namespace moekit::dedup {

namespace detail {

const char* block_shape_check(const Problem& p, std::int64_t max_row) {
  if (p.batch < 0 || p.mtp_step < 1 || p.k < 1) return "needs batch >= 0, mtp_step >= 1, k >= 1";
  if (p.row_len() > max_row) return max_row == 8192 ? "needs M*k <= 8192 (use general)" : "needs M*k <= 16384 (use general)";
  return nullptr;
}

}  // namespace detail

namespace {

using namespace detail;

std::string block_limits(std::int64_t max_row) { return "M*k <= " + std::to_string(max_row); }
std::string hash_limits(const DeviceCaps&) { return block_limits(8192); }
std::string tile_limits(const DeviceCaps&) { return block_limits(kMaxTile); }
std::string general_limits(const DeviceCaps&) { return "any (batch*M*k < 2^31)"; }

// Every variant writes each row's distinct values ascending: all are bit-exact.
const std::array<Variant, 7> kVariants{{
    {{"hash",
      "shared-memory hash table (atomicCAS, linear probing), then a block sort",
      "dedup_hash_kernel"},
     true, hash_limits, hash_not_applicable, hash_workspace_bytes, hash_launch},
    {{"cub-sort",
      "BlockRadixSort + BlockDiscontinuity flags + BlockScan, scattered stores",
      "dedup_cub_sort_kernel"},
     true, tile_limits, cub_sort_not_applicable, cub_sort_workspace_bytes, cub_sort_launch},
    {{"vectorized",
      "cub-sort with 16-byte loads and the row staged in smem for 16-byte coalesced stores",
      "dedup_vectorized_kernel"},
     true, tile_limits, vectorized_not_applicable, vectorized_workspace_bytes, vectorized_launch},
    {{"bitmask",
      "vectorized with one 32-bit head mask per thread and __popc offsets",
      "dedup_bitmask_kernel"},
     true, tile_limits, bitmask_not_applicable, bitmask_workspace_bytes, bitmask_launch},
    {{"range-sort",
      "min/max first, sort only the range's bits with 8-bit match.any ranking, ballot compaction",
      "dedup_fast_kernel"},
     true, tile_limits, range_sort_not_applicable, range_sort_workspace_bytes, range_sort_launch},
    {{"fast",
      "per row, smem bitmap if max-min+1 <= 64*tile, else atomic buckets + in-bucket counting, else range-sort",
      "dedup_fast_kernel"},
     true, tile_limits, fast_not_applicable, fast_workspace_bytes, fast_launch},
    {{"general",
      "any size: CUB device segmented radix sort into the workspace, then a tiled unique pass per row",
      "DeviceSegmentedRadixSortKernel dedup_segment_offsets_kernel dedup_unique_sorted_kernel"},
     true, general_limits, general_not_applicable, general_workspace_bytes, general_launch},
}};

// One CTA per batch while a row fits the largest tile; larger rows sort in the workspace.
const std::array<AutoRow<Problem>, 2> kAutoRows = {{
    {"fast", "M*k <= 16384 (one CTA per batch; picks bitmap, buckets or radix passes per row)",
     [](const Problem& p, const DeviceCaps&) { return p.row_len() <= kMaxTile; }},
    {"general", "", nullptr},
}};

}  // namespace

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::dedup
