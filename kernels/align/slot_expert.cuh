// align's rule for a slot's expert as a public device function: the expert
// (local through the map, when Args has one) that slot i of the ids belongs
// to, or -1 where align drops it. Part of align's public kernel API, for a
// later family's kernel that must tell dropped slots without running align.
#pragma once

#include <cstdint>

#include "align/args.cuh"
#include "align/common.cuh"

namespace moekit::align {

/// Slot i's expert under `a` (ids int64 when `ids64`, else int32), -1 when
/// dropped: align's own expert_of, so the rule has one source.
__device__ __forceinline__ int slot_expert(const Args& a, bool ids64, std::int64_t i) {
  return ids64 ? detail::expert_at<std::int64_t>(a, i) : detail::expert_at<std::int32_t>(a, i);
}

}  // namespace moekit::align
