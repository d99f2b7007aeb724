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

#define MOEKIT_DEDUP_ENTRY(id, name, desc, lim, kernels) \
  Variant { {name, desc, kernels}, true, lim, id##_not_applicable, id##_workspace_bytes, id##_launch }

// Every variant writes each row's distinct values ascending: all are bit-exact.
const std::array<Variant, 7> kVariants = {
    MOEKIT_DEDUP_ENTRY(hash, "hash",
                       "shared-memory hash table (atomicCAS, linear probing), then a block sort",
                       hash_limits, "dedup_hash_kernel"),
    MOEKIT_DEDUP_ENTRY(cub_sort, "cub-sort",
                       "BlockRadixSort + BlockDiscontinuity flags + BlockScan, scattered stores",
                       tile_limits, "dedup_cub_sort_kernel"),
    MOEKIT_DEDUP_ENTRY(vectorized, "vectorized",
                       "cub-sort with 16-byte loads and the row staged in smem for 16-byte coalesced stores",
                       tile_limits, "dedup_vectorized_kernel"),
    MOEKIT_DEDUP_ENTRY(bitmask, "bitmask",
                       "vectorized with one 32-bit head mask per thread and __popc offsets",
                       tile_limits, "dedup_bitmask_kernel"),
    MOEKIT_DEDUP_ENTRY(range_sort, "range-sort",
                       "min/max first, sort only the range's bits with 8-bit match.any ranking, ballot compaction",
                       tile_limits, "dedup_fast_kernel"),
    MOEKIT_DEDUP_ENTRY(fast, "fast",
                       "per row, smem bitmap if max-min+1 <= 64*tile, else atomic buckets + in-bucket counting, else range-sort",
                       tile_limits, "dedup_fast_kernel"),
    MOEKIT_DEDUP_ENTRY(general, "general",
                       "any size: CUB device segmented radix sort into the workspace, then a tiled unique pass per row",
                       general_limits, "DeviceSegmentedRadixSortKernel dedup_segment_offsets_kernel dedup_unique_sorted_kernel"),
};

#undef MOEKIT_DEDUP_ENTRY

// One CTA per batch while a row fits the largest tile; larger rows sort in the workspace.
const std::array<AutoRow<Problem>, 2> kAutoRows = {{
    {"fast", "M*k <= 16384 (one CTA per batch; picks bitmap, buckets or radix passes per row)",
     [](const Problem& p, const DeviceCaps&) { return p.row_len() <= kMaxTile; }},
    {"general", "", nullptr},
}};

}  // namespace

std::span<const Variant> variants() { return kVariants; }

const Variant* find(std::string_view name) { return find_variant<Variant>(kVariants, name); }

const Variant& pick_auto(const Problem& p) { return pick_auto(p, moekit::device_caps()); }
const Variant& pick_auto(const Problem& p, const DeviceCaps& caps) {
  return pick_from_rows<Variant, Problem>(kAutoRows, kVariants, p, caps);
}

std::span<const AutoRow<Problem>> auto_rows() { return kAutoRows; }

std::string auto_rule() { return auto_rule_text<Problem>(kAutoRows); }

}  // namespace moekit::dedup
