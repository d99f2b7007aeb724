// CPU reference and checker for moe_align_block_size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "align/align.hpp"
#include "check.hpp"

namespace moekit::align {

struct Outputs {
  std::vector<std::int32_t> sorted_token_ids;  // max_num_tokens_padded
  std::vector<std::int32_t> expert_ids;        // max_num_blocks
  std::int32_t num_tokens_post_pad = 0;
};

// Fills the derived sizes. Throws InputError when an output would not fit int32
// or an argument is out of range (E < 1, B < 1 or B > 1024, ...).
Problem make_problem(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size,
                     bool ids_int64, std::int32_t map_size, bool pad_sorted_ids);

// ids widened to int64; expert_map empty when there is no map.
Outputs reference(const Problem& p, std::span<const std::int64_t> ids,
                  std::span<const std::int32_t> expert_map);

// exact_order: compare sorted_token_ids bit for bit (the `stable` variant);
// otherwise compare each expert's slots as a set.
CheckResult check(const Problem& p, const Outputs& ref, const Outputs& got, bool exact_order);

}  // namespace moekit::align
