// Per-variant entry points (one translation unit each), gathered by registry.cu.
// Host-visible: no CUDA headers.
#pragma once

#include <cstddef>

#include "dedup/dedup.hpp"

namespace moekit::dedup::detail {

#define MOEKIT_DEDUP_DECLARE(name)                              \
  const char* name##_not_applicable(const Problem& p, const DeviceCaps& caps);  \
  std::size_t name##_workspace_bytes(const Problem& p, const DeviceCaps& caps);  \
  LaunchStatus name##_launch(const Problem& p, const Buffers& b, Stream stream);

MOEKIT_DEDUP_DECLARE(hash)
MOEKIT_DEDUP_DECLARE(cub_sort)
MOEKIT_DEDUP_DECLARE(vectorized)
MOEKIT_DEDUP_DECLARE(bitmask)
MOEKIT_DEDUP_DECLARE(range_sort)
MOEKIT_DEDUP_DECLARE(fast)
MOEKIT_DEDUP_DECLARE(general)

#undef MOEKIT_DEDUP_DECLARE

// Shared shape check of the single-CTA-per-row variants; nullptr when n fits.
const char* block_shape_check(const Problem& p, std::int64_t max_row);

}  // namespace moekit::dedup::detail
