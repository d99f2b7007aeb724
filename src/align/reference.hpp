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
  // The reference's only: the group owning each block below num_tokens_post_pad
  // / B (its expert before vllm's relabelling; E = the bucket), which
  // expert_ids cannot tell apart when several blocks read -1. Empty in outputs
  // read back from a device or files; check() falls back to expert_ids then.
  std::vector<std::int32_t> block_groups;
};

// The group of slot id `id`: its expert (through the map with local
// semantics), E for the bucket, -1 when the slot is dropped.
std::int32_t slot_group(const Problem& p, std::int64_t id, std::span<const std::int32_t> expert_map);
// What expert_ids holds for the blocks of group g (0 <= g < row_groups(p)):
// -1 for the bucket, map[g] with vllm semantics, else g.
std::int32_t group_label(const Problem& p, std::int32_t g, std::span<const std::int32_t> expert_map);

// ids widened to int64; expert_map empty when there is no map. Slots ascend
// inside every group, the bucket's too.
Outputs reference(const Problem& p, std::span<const std::int64_t> ids,
                  std::span<const std::int32_t> expert_map);

// exact_order: compare sorted_token_ids bit for bit (the `stable` variant);
// otherwise compare each group's slots as a set (groups from
// ref.block_groups, else ref.expert_ids).
CheckResult check(const Problem& p, const Outputs& ref, const Outputs& got, bool exact_order);

}  // namespace moekit::align
