// The dropped slots' inverse (-1), as a device function for the first rows
// kernel after align: a memset of inverse before that kernel would be a
// graph node that cannot be its programmatic predecessor (primitives/pdl.cuh),
// so the kernel would lose PDL after align.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "align/args.cuh"
#include "align/slot_expert.cuh"

namespace moekit::permute::detail {

// What marks a slot dropped: align's own rule (expert_of) over the problem
// its variant runs (align::variant_problem: vLLM's map is a post-pass there,
// so only ids outside [0, E) drop). inverse == nullptr: no slot drops (the
// bucket gives every slot a row).
struct DroppedOut {
  align::Args a;  // ids, map, num_experts, map_size, numel of the variant's problem
  bool ids64;
  std::int32_t* inverse;  // the rows kernel's own inverse (it writes the kept slots)
};

// inverse[i] = -1 for every slot i whose expert is dropped, grid-strided from
// thread `first` of `stride`. The rows kernel writes the kept slots' entries:
// the two sets are disjoint, so no order between them is needed.
__device__ __forceinline__ void mark_dropped(const DroppedOut& d, std::int64_t first, std::int64_t stride) {
  if (d.inverse == nullptr) return;
  for (std::int64_t i = first; i < d.a.numel; i += stride) {
    if (align::slot_expert(d.a, d.ids64, i) < 0) d.inverse[i] = -1;
  }
}

}  // namespace moekit::permute::detail
