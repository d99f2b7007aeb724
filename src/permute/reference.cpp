// CPU reference and checker for permute (docs/permute.md).
#include "permute/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace moekit::permute {

std::span<const std::int32_t> align_map(const Problem& p, std::span<const std::int32_t> expert_map) {
  return p.align.map_size > 0 ? expert_map : std::span<const std::int32_t>{};
}

Outputs reference(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids,
                  std::span<const std::int32_t> expert_map) {
  const auto map = align_map(p, expert_map);
  Outputs o;
  o.aligned = align::reference(p.align, ids, map);
  const std::int64_t rows = o.aligned.num_tokens_post_pad, numel = p.align.numel;
  const std::size_t rb = static_cast<std::size_t>(p.row_bytes);
  o.permuted.assign(static_cast<std::size_t>(rows) * rb, std::byte{0});
  o.inverse.assign(static_cast<std::size_t>(numel), -1);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int32_t slot = o.aligned.sorted_token_ids[static_cast<std::size_t>(r)];
    if (slot >= numel) continue;
    if (rb) std::memcpy(o.permuted.data() + r * rb, hidden + (slot / p.topk) * rb, rb);
    o.inverse[static_cast<std::size_t>(slot)] = static_cast<std::int32_t>(r);
  }
  if (p.layout == Layout::compact) {
    // Rows per expert (B = 1: no padding); offsets[E] = the local rows, where
    // the bucket (if any) starts.
    const std::int32_t E = p.align.num_experts;
    o.offsets.assign(static_cast<std::size_t>(E) + 1, 0);
    for (std::int64_t id : ids) {
      const std::int32_t g = align::slot_group(p.align, id, map);
      if (g >= 0 && g < E) ++o.offsets[static_cast<std::size_t>(g) + 1];
    }
    for (std::int32_t e = 0; e < E; ++e) o.offsets[e + 1] += o.offsets[e];
  }
  return o;
}

CheckResult check(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids, const Outputs& ref,
                  const Outputs& got, std::span<const std::int32_t> expert_map) {
  const auto map = align_map(p, expert_map);
  CheckResult r = align::check(p.align, ref.aligned, got.aligned, false);
  if (!r.ok) {
    r.first_difference = "align step: " + r.first_difference;
    return r;
  }
  auto fail = [&](std::string what) {
    r.ok = false;
    r.first_difference = std::move(what);
    r.max_error = 1;
    return r;
  };
  const std::int64_t rows = got.aligned.num_tokens_post_pad, numel = p.align.numel;
  const std::size_t rb = static_cast<std::size_t>(p.row_bytes);
  if (got.permuted.size() != static_cast<std::size_t>(rows) * rb)
    return fail(fmt::format("permuted holds {} bytes, expected {} rows of {}", got.permuted.size(), rows, rb));
  if (p.layout == Layout::compact && got.offsets != ref.offsets) {
    std::size_t e = 0;
    while (e < ref.offsets.size() && e < got.offsets.size() && got.offsets[e] == ref.offsets[e]) ++e;
    return fail(fmt::format("expert_offsets[{}] = {}, expected {}", e, e < got.offsets.size() ? got.offsets[e] : -1,
                            e < ref.offsets.size() ? ref.offsets[e] : -1));
  }
  if (got.inverse.size() != static_cast<std::size_t>(numel))
    return fail(fmt::format("inverse holds {} entries, expected {}", got.inverse.size(), numel));
  const std::int32_t E = p.align.num_experts;
  std::vector<char> seen(static_cast<std::size_t>(rows), 0);
  for (std::int64_t slot = 0; slot < numel; ++slot) {
    const std::int32_t row = got.inverse[static_cast<std::size_t>(slot)];
    const std::int64_t t = slot / p.topk, j = slot % p.topk, id = ids[static_cast<std::size_t>(slot)];
    const std::int32_t g = align::slot_group(p.align, id, map);
    if (g < 0) {  // dropped by align: no row
      if (row != -1) return fail(fmt::format("inverse[{}, {}] = {}, expected -1 (id {} is dropped)", t, j, row, id));
      continue;
    }
    if (row < 0 || row >= rows)
      return fail(fmt::format("inverse[{}, {}] = {} is outside the {} rows", t, j, row, rows));
    if (got.aligned.sorted_token_ids[static_cast<std::size_t>(row)] != slot)
      return fail(fmt::format("inverse[{}, {}] = {}, but sorted_token_ids[{}] = {}", t, j, row, row,
                              got.aligned.sorted_token_ids[static_cast<std::size_t>(row)]));
    if (seen[static_cast<std::size_t>(row)]++) return fail(fmt::format("row {} is the target of two slots", row));
    // Its group's rows: padded, the blocks labelled as the group (the bucket
    // and non-local experts: -1); compact, its expert's offsets, or past
    // offsets[E] for the bucket.
    const bool in_group =
        p.layout == Layout::padded
            ? got.aligned.expert_ids[static_cast<std::size_t>(row / p.align.block_size)] ==
                  align::group_label(p.align, g, map)
            : g < E ? got.offsets[static_cast<std::size_t>(g)] <= row && row < got.offsets[static_cast<std::size_t>(g) + 1]
                    : got.offsets[static_cast<std::size_t>(E)] <= row;
    if (!in_group)
      return fail(fmt::format("row {} of slot ({}, {}) is not in {}'s rows", row, t, j,
                              g < E ? fmt::format("expert {}", g) : std::string("the bucket")));
    if (rb && std::memcmp(got.permuted.data() + row * rb, hidden + t * rb, rb) != 0)
      return fail(fmt::format("permuted row {} differs from hidden row {} (slot ({}, {}))", row, t, t, j));
  }
  for (std::int64_t row = 0; row < rows; ++row) {
    if (seen[static_cast<std::size_t>(row)]) continue;
    const std::byte* b = got.permuted.data() + row * rb;
    if (std::any_of(b, b + rb, [](std::byte x) { return x != std::byte{0}; }))
      return fail(fmt::format("padding row {} is not zero", row));
  }
  return r;
}

}  // namespace moekit::permute
