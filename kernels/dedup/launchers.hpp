// Per-variant entry points (one translation unit each), gathered by registry.cu.
// Host-visible: no CUDA headers.
#pragma once

#include <cstddef>

#include "dedup/dedup.hpp"

namespace moekit::dedup::detail {

// The three functions of a Variant entry, declared for every variant at once
// (each defined in <variant>.cu).
using NotApplicable = const char*(const Problem& p, const DeviceCaps& caps);
using WorkspaceBytes = std::size_t(const Problem& p, const DeviceCaps& caps);
using Launch = LaunchStatus(const Problem& p, const Buffers& b, Stream stream, bool pdl);

NotApplicable hash_not_applicable, cub_sort_not_applicable, vectorized_not_applicable, bitmask_not_applicable,
    range_sort_not_applicable, fast_not_applicable, general_not_applicable;
WorkspaceBytes hash_workspace_bytes, cub_sort_workspace_bytes, vectorized_workspace_bytes, bitmask_workspace_bytes,
    range_sort_workspace_bytes, fast_workspace_bytes, general_workspace_bytes;
Launch hash_launch, cub_sort_launch, vectorized_launch, bitmask_launch, range_sort_launch, fast_launch, general_launch;

// Shared shape check of the single-CTA-per-row variants; nullptr when n fits.
const char* block_shape_check(const Problem& p, std::int64_t max_row);

}  // namespace moekit::dedup::detail
