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

// The Problem for T tokens of K ids over E experts, rows of row_bytes; B is
// used by the padded layout only. Throws InputError when align's outputs would
// not fit int32.
Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int32_t block_size,
                     std::int64_t row_bytes, Layout layout);

// ids: T*K ids in [0, E).
Outputs reference(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids);

// got against the semantics, independent of the order inside an expert:
// align's outputs as sets per expert; every slot's inverse row holds that
// slot in sorted_token_ids, belongs to its expert and equals its token's row
// bit for bit; padding rows are zero; compact offsets equal the reference's.
CheckResult check(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids, const Outputs& ref,
                  const Outputs& got);

}  // namespace moekit::permute
