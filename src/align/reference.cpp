// CPU reference and checker for moe_align_block_size (semantics: docs/align.md).
//
// The reference is deliberately the plain serial algorithm: count, exclusive
// scan of the block-padded counts, then one pass over the slots in ascending
// order. Slots therefore ascend inside each expert, which is also what the
// `stable` GPU variant promises bit for bit.
#include "align/reference.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "errors.hpp"

namespace moekit::align {

namespace {

constexpr std::int64_t kInt32Max = std::numeric_limits<std::int32_t>::max();

// Local expert of one slot, or -1 when the slot is dropped (id outside the map
// or outside [0, E) after it, or mapped to -1).
std::int32_t local_expert(std::int64_t id, std::int32_t num_experts,
                          std::span<const std::int32_t> expert_map) {
  if (!expert_map.empty()) {
    if (id < 0 || id >= static_cast<std::int64_t>(expert_map.size())) return -1;
    id = expert_map[static_cast<std::size_t>(id)];
  }
  if (id < 0 || id >= num_experts) return -1;
  return static_cast<std::int32_t>(id);
}

}  // namespace

Problem make_problem(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size,
                     bool ids_int64, std::int32_t map_size, bool pad_sorted_ids) {
  if (numel < 0) throw InputError(fmt::format("align: numel must be >= 0 (got {})", numel));
  if (num_experts < 1 || num_experts > kMaxExperts)
    throw InputError(fmt::format("align: --num-experts must be in [1, {}] (got {}): no variant takes more",
                                 kMaxExperts, num_experts));
  if (block_size < 1 || block_size > 1024)
    throw InputError(fmt::format("align: --block-size must be in [1, 1024] (got {})", block_size));
  if (map_size < 0)
    throw InputError(fmt::format("align: expert map length must be >= 0 (got {})", map_size));

  // All arithmetic in int64: numel <= 2^63 and E*(B-1) < 2^41, no overflow here.
  std::int64_t padded = numel + static_cast<std::int64_t>(num_experts) * (block_size - 1);
  if (pad_sorted_ids) padded = (padded + block_size - 1) / block_size * block_size;
  const std::int64_t blocks = (padded + block_size - 1) / block_size;
  // Kernels form block_index * B and cumsum + B in int32: require the whole
  // block-rounded range to fit, which also covers every slot index and the
  // padding value numel.
  if (blocks * block_size > kInt32Max)
    throw InputError(fmt::format(
        "align: outputs do not fit int32: numel {} + E {} * (B {} - 1) needs {} entries in "
        "sorted_token_ids (max {})",
        numel, num_experts, block_size, blocks * block_size, kInt32Max));

  Problem p;
  p.numel = numel;
  p.num_experts = num_experts;
  p.block_size = block_size;
  p.ids_int64 = ids_int64;
  p.map_size = map_size;
  p.max_num_tokens_padded = padded;
  p.max_num_blocks = blocks;
  return p;
}

Outputs reference(const Problem& p, std::span<const std::int64_t> ids,
                  std::span<const std::int32_t> expert_map) {
  if (static_cast<std::int64_t>(ids.size()) != p.numel)
    throw InputError(fmt::format("align reference: {} ids given, problem has numel {}",
                                 ids.size(), p.numel));
  if (static_cast<std::int64_t>(expert_map.size()) != p.map_size)
    throw InputError(fmt::format("align reference: expert map has {} entries, problem says {}",
                                 expert_map.size(), p.map_size));
  const std::int32_t E = p.num_experts;
  const std::int64_t B = p.block_size;
  const auto pad_value = static_cast<std::int32_t>(p.numel);

  std::vector<std::int64_t> count(static_cast<std::size_t>(E), 0);
  for (std::int64_t id : ids) {
    const std::int32_t e = local_expert(id, E, expert_map);
    if (e >= 0) ++count[static_cast<std::size_t>(e)];
  }
  // start[e]: first row of expert e (exclusive scan of the padded counts).
  std::vector<std::int64_t> start(static_cast<std::size_t>(E) + 1, 0);
  for (std::int32_t e = 0; e < E; ++e)
    start[e + 1] = start[e] + (count[e] + B - 1) / B * B;
  const std::int64_t total = start[E];

  Outputs out;
  out.num_tokens_post_pad = static_cast<std::int32_t>(total);
  out.sorted_token_ids.assign(static_cast<std::size_t>(p.max_num_tokens_padded), pad_value);
  out.expert_ids.assign(static_cast<std::size_t>(p.max_num_blocks), -1);

  // A caller may pass a Problem with a smaller (but sufficient) buffer, as the
  // fill-overlap variant's tight bound allows; never index past it.
  std::vector<std::int64_t> next(start.begin(), start.end() - 1);
  for (std::int64_t i = 0; i < p.numel; ++i) {
    const std::int32_t e = local_expert(ids[static_cast<std::size_t>(i)], E, expert_map);
    if (e < 0) continue;
    const std::int64_t row = next[e]++;
    if (row < p.max_num_tokens_padded)
      out.sorted_token_ids[static_cast<std::size_t>(row)] = static_cast<std::int32_t>(i);
  }
  for (std::int32_t e = 0; e < E; ++e)
    for (std::int64_t b = start[e] / B; b < start[e + 1] / B && b < p.max_num_blocks; ++b)
      out.expert_ids[static_cast<std::size_t>(b)] = e;
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

  // Set comparison per expert, in O(n): every reference row that holds a slot
  // must, in `got`, hold some slot of the same expert, each slot exactly once;
  // every padding row must hold the padding value. Equal row counts then make
  // the per-expert sets equal.
  const std::int64_t pad_value = p.numel;
  const std::int64_t B = p.block_size;
  std::vector<std::int32_t> owner(static_cast<std::size_t>(p.numel), -1);  // slot -> expert
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t v = want[i];
    if (v != pad_value && v >= 0 && v < p.numel)
      owner[static_cast<std::size_t>(v)] = ref.expert_ids[i / static_cast<std::size_t>(B)];
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
    const std::int32_t e = ref.expert_ids[i / static_cast<std::size_t>(B)];
    if (v < 0 || v >= p.numel || owner[static_cast<std::size_t>(v)] != e)
      return fail(fmt::format(
          "sorted_token_ids[{}]: got {}, expected a slot of expert {} (reference has {} here)", i,
          v, e, want[i]));
    if (placed_at[static_cast<std::size_t>(v)] >= 0)
      return fail(fmt::format("sorted_token_ids[{}]: got {}, which is already at index {}", i, v,
                              placed_at[static_cast<std::size_t>(v)]));
    placed_at[static_cast<std::size_t>(v)] = static_cast<std::int64_t>(i);
  }
  return r;
}

}  // namespace moekit::align
