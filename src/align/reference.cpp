// CPU reference and checker for moe_align_block_size (semantics: docs/align.md).
//
// The reference is deliberately the plain serial algorithm: count, exclusive
// scan of the block-padded counts, then one pass over the slots in ascending
// order. Slots therefore ascend inside each expert, which is also what the
// `stable` GPU variant promises bit for bit.
#include "align/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "errors.hpp"

namespace moekit::align {

std::int32_t slot_group(const Problem& p, std::int64_t id, std::span<const std::int32_t> expert_map) {
  const std::int32_t E = p.num_experts;
  std::int32_t e = -1;
  if (!expert_map.empty() && p.map_semantics == MapSemantics::local) {
    // Outside the map, or mapped outside [0, E) (-1: not a local expert).
    if (id >= 0 && id < static_cast<std::int64_t>(expert_map.size())) {
      const std::int32_t m = expert_map[static_cast<std::size_t>(id)];
      if (m >= 0 && m < E) e = m;
    }
  } else if (id >= 0 && id < E) {
    e = static_cast<std::int32_t>(id);
  }
  if (e < 0 && p.invalid == Invalid::bucket) return E;
  return e;
}

std::int32_t group_label(const Problem& p, std::int32_t g, std::span<const std::int32_t> expert_map) {
  if (p.invalid == Invalid::bucket && g == p.num_experts) return -1;
  if (vllm_map(p)) return g >= 0 && g < static_cast<std::int32_t>(expert_map.size()) ? expert_map[g] : -1;
  return g;
}

Outputs reference(const Problem& p, std::span<const std::int64_t> ids,
                  std::span<const std::int32_t> expert_map) {
  if (static_cast<std::int64_t>(ids.size()) != p.numel)
    throw InputError(fmt::format("align reference: {} ids given, problem has numel {}",
                                 ids.size(), p.numel));
  if (static_cast<std::int64_t>(expert_map.size()) != p.map_size)
    throw InputError(fmt::format("align reference: expert map has {} entries, problem says {}",
                                 expert_map.size(), p.map_size));
  // Groups: the E experts, then the bucket (SGLang's expert parallelism) when
  // there is one.
  const std::int32_t G = row_groups(p);
  const std::int64_t B = p.block_size;
  const auto pad_value = static_cast<std::int32_t>(p.numel);

  std::vector<std::int64_t> count(static_cast<std::size_t>(G), 0);
  for (std::int64_t id : ids) {
    const std::int32_t g = slot_group(p, id, expert_map);
    if (g >= 0) ++count[static_cast<std::size_t>(g)];
  }
  // start[g]: first row of group g (exclusive scan of the padded counts).
  std::vector<std::int64_t> start(static_cast<std::size_t>(G) + 1, 0);
  for (std::int32_t g = 0; g < G; ++g)
    start[g + 1] = start[g] + (count[g] + B - 1) / B * B;
  const std::int64_t total = start[G];

  Outputs out;
  out.num_tokens_post_pad = static_cast<std::int32_t>(total);
  out.sorted_token_ids.assign(static_cast<std::size_t>(p.max_num_tokens_padded), pad_value);
  out.expert_ids.assign(static_cast<std::size_t>(p.max_num_blocks), -1);

  // A caller may pass a Problem with a smaller (but sufficient) buffer, as the
  // fill-overlap variant's tight bound allows; never index past it.
  std::vector<std::int64_t> next(start.begin(), start.end() - 1);
  for (std::int64_t i = 0; i < p.numel; ++i) {
    const std::int32_t g = slot_group(p, ids[static_cast<std::size_t>(i)], expert_map);
    if (g < 0) continue;
    const std::int64_t row = next[g]++;
    if (row < p.max_num_tokens_padded)
      out.sorted_token_ids[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(i);
  }
  out.block_groups.assign(static_cast<std::size_t>(total / B), -1);
  for (std::int32_t g = 0; g < G; ++g)
    for (std::int64_t b = start[g] / B; b < start[g + 1] / B; ++b) {
      out.block_groups[static_cast<std::size_t>(b)] = g;
      if (b < p.max_num_blocks) out.expert_ids[static_cast<std::size_t>(b)] = group_label(p, g, expert_map);
    }
  return out;
}

CheckResult check(const Problem& p, const Outputs& ref, const Outputs& got, bool exact_order) {
  CheckResult r;
  r.error_unit = "exact";
  auto fail = [&](std::string msg) {
    r.ok = false;
    r.max_error = 1.0;
    r.first_difference = std::move(msg);
    return r;
  };
  if (got.num_tokens_post_pad != ref.num_tokens_post_pad)
    return fail(fmt::format("num_tokens_post_pad[0]: got {}, expected {}", got.num_tokens_post_pad,
                            ref.num_tokens_post_pad));
  if (got.expert_ids.size() != ref.expert_ids.size())
    return fail(fmt::format("expert_ids: got {} elements, expected {}", got.expert_ids.size(),
                            ref.expert_ids.size()));
  if (got.sorted_token_ids.size() != ref.sorted_token_ids.size())
    return fail(fmt::format("sorted_token_ids: got {} elements, expected {}",
                            got.sorted_token_ids.size(), ref.sorted_token_ids.size()));
  for (std::size_t j = 0; j < ref.expert_ids.size(); ++j)
    if (got.expert_ids[j] != ref.expert_ids[j])
      return fail(fmt::format("expert_ids[{}]: got {}, expected {}", j, got.expert_ids[j],
                              ref.expert_ids[j]));

  const auto& want = ref.sorted_token_ids;
  const auto& have = got.sorted_token_ids;
  const std::size_t n = want.size();
  if (exact_order) {
    for (std::size_t i = 0; i < n; ++i)
      if (have[i] != want[i])
        return fail(fmt::format("sorted_token_ids[{}]: got {}, expected {}", i, have[i], want[i]));
    return r;
  }

  // Set comparison per group, in O(n): every reference row that holds a slot
  // must, in `got`, hold some slot of the same group, each slot exactly once;
  // every padding row must hold the padding value. Equal row counts then make
  // the per-group sets equal. A group is an expert, or the bucket; with vllm
  // semantics several experts' blocks read -1, so the reference's
  // block_groups tell them apart.
  const std::int64_t pad_value = p.numel;
  const std::int64_t B = p.block_size;
  const auto group_at = [&](std::size_t row) {
    const std::size_t b = row / static_cast<std::size_t>(B);
    return b < ref.block_groups.size() ? ref.block_groups[b] : ref.expert_ids[b];
  };
  std::vector<std::int32_t> owner(static_cast<std::size_t>(p.numel), -1);  // slot -> group
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t v = want[i];
    if (v != pad_value && v >= 0 && v < p.numel) owner[static_cast<std::size_t>(v)] = group_at(i);
  }
  std::vector<std::int64_t> placed_at(static_cast<std::size_t>(p.numel), -1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t v = have[i];
    if (want[i] == pad_value) {
      if (v != pad_value)
        return fail(fmt::format("sorted_token_ids[{}]: got {}, expected padding {}", i, v,
                                pad_value));
      continue;
    }
    const std::int32_t e = group_at(i);
    if (v < 0 || v >= p.numel || owner[static_cast<std::size_t>(v)] != e)
      return fail(fmt::format(
          "sorted_token_ids[{}]: got {}, expected a slot of {} {} (reference has {} here)", i, v,
          p.invalid == Invalid::bucket && e == p.num_experts ? "the bucket, group" : "expert", e, want[i]));
    if (placed_at[static_cast<std::size_t>(v)] >= 0)
      return fail(fmt::format("sorted_token_ids[{}]: got {}, which is already at index {}", i, v,
                              placed_at[static_cast<std::size_t>(v)]));
    placed_at[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(i);
  }
  return r;
}

}  // namespace moekit::align
