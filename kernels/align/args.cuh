// The argument pack every align kernel takes, align's tiny_kernel building
// block (tiny_kernel.cuh) included, and its constructor from a Problem and
// Buffers. Part of align's public kernel API.
#pragma once

#include <cstdint>

#include "align/align.hpp"

namespace moekit::align {

// Everything a kernel needs, by value. Sizes fit int32 (make_problem checks the
// block-rounded range), so in-kernel positions are int32; loop counters that
// step past the end use int64 so they never wrap.
struct Args {
  const void* ids;
  const std::int32_t* map;  // nullptr: no map
  std::int32_t* sorted;
  std::int32_t* eids;
  std::int32_t* total;
  std::int32_t numel;
  std::int32_t num_experts;
  std::int32_t block_size;
  std::int32_t map_size;
  std::int32_t max_padded;
  std::int32_t max_blocks;
};

inline Args make_args(const Problem& p, const Buffers& b) {
  Args a;
  a.ids = b.topk_ids;
  a.map = p.map_size > 0 ? b.expert_map : nullptr;
  a.sorted = b.sorted_token_ids;
  a.eids = b.expert_ids;
  a.total = b.num_tokens_post_pad;
  a.numel = static_cast<std::int32_t>(p.numel);
  a.num_experts = p.num_experts;
  a.block_size = p.block_size;
  a.map_size = p.map_size;
  a.max_padded = static_cast<std::int32_t>(p.max_num_tokens_padded);
  a.max_blocks = static_cast<std::int32_t>(p.max_num_blocks);
  return a;
}

}  // namespace moekit::align
