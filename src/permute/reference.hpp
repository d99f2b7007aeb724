// CPU reference and checker for permute (semantics: docs/permute.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "align/reference.hpp"
#include "check.hpp"
#include "permute/permute.hpp"

namespace moekit::permute {

struct Outputs {
  align::Outputs aligned;               // padded: written; compact: internal (B = 1)
  std::vector<std::byte> permuted;      // num_tokens_post_pad rows of row_bytes
  std::vector<std::int32_t> inverse;    // [T, K]
  std::vector<std::int64_t> offsets;    // [E + 1], compact only
};

// The map align uses for p: `expert_map`, or none where p.align has no map.
std::span<const std::int32_t> align_map(const Problem& p, std::span<const std::int32_t> expert_map);

// ids: T*K ids (what an invalid one becomes: p.align.invalid); expert_map:
// the --expert-map entries, or empty.
Outputs reference(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids,
                  std::span<const std::int32_t> expert_map = {});

// got against the semantics, independent of the order inside an expert:
// align's outputs as sets per group; every slot align keeps has its inverse
// row hold that slot in sorted_token_ids, belong to its group (its expert_ids
// label, or its expert's / the bucket's compact offsets) and equal its
// token's row bit for bit; every slot align drops has inverse -1; padding
// rows are zero; compact offsets equal the reference's.
CheckResult check(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids, const Outputs& ref,
                  const Outputs& got, std::span<const std::int32_t> expert_map = {});

}  // namespace moekit::permute
