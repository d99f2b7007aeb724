// CPU reference and checker for permute (docs/permute.md).
#include "permute/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "errors.hpp"

namespace moekit::permute {

Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int32_t block_size,
                     std::int64_t row_bytes, Layout layout) {
  Problem p;
  p.tokens = tokens;
  p.topk = topk;
  p.row_bytes = row_bytes;
  p.layout = layout;
  p.align = align::make_problem(tokens * topk, experts, layout == Layout::padded ? block_size : 1, false, 0, false);
  return p;
}

Outputs reference(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids) {
  Outputs o;
  o.aligned = align::reference(p.align, ids, {});
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
    const std::int32_t E = p.align.num_experts;
    o.offsets.assign(static_cast<std::size_t>(E) + 1, 0);
    for (std::int64_t id : ids) ++o.offsets[static_cast<std::size_t>(id) + 1];
    for (std::int32_t e = 0; e < E; ++e) o.offsets[e + 1] += o.offsets[e];
  }
  return o;
}

CheckResult check(const Problem& p, const std::byte* hidden, std::span<const std::int64_t> ids, const Outputs& ref,
                  const Outputs& got) {
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
  std::vector<char> seen(static_cast<std::size_t>(rows), 0);
  for (std::int64_t slot = 0; slot < numel; ++slot) {
    const std::int32_t row = got.inverse[static_cast<std::size_t>(slot)];
    const std::int64_t t = slot / p.topk, j = slot % p.topk, id = ids[static_cast<std::size_t>(slot)];
    if (row < 0 || row >= rows)
      return fail(fmt::format("inverse[{}, {}] = {} is outside the {} rows", t, j, row, rows));
    if (got.aligned.sorted_token_ids[static_cast<std::size_t>(row)] != slot)
      return fail(fmt::format("inverse[{}, {}] = {}, but sorted_token_ids[{}] = {}", t, j, row, row,
                              got.aligned.sorted_token_ids[static_cast<std::size_t>(row)]));
    if (seen[static_cast<std::size_t>(row)]++) return fail(fmt::format("row {} is the target of two slots", row));
    const bool in_expert = p.layout == Layout::padded
                               ? got.aligned.expert_ids[static_cast<std::size_t>(row / p.align.block_size)] == id
                               : got.offsets[static_cast<std::size_t>(id)] <= row &&
                                     row < got.offsets[static_cast<std::size_t>(id) + 1];
    if (!in_expert) return fail(fmt::format("row {} of slot ({}, {}) is not in expert {}'s rows", row, t, j, id));
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
