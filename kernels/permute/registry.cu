// Launchers and registry of the permute family.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "common/cuda_check.cuh"
#include "permute/gather.cuh"
#include "permute/permute.hpp"

namespace moekit::permute {
namespace {

bool aligned_to(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// align's auto pick for the problem its variant runs (align::variant_problem:
// the bucket and vllm's map are passes around it, align::launch_ep).
const align::Variant& align_step(const Problem& p, const DeviceCaps& caps) {
  return align::pick_auto(align::variant_problem(p.align), caps);
}

template <class V>
cudaError_t launch_gather_typed(const Problem& p, const Buffers& b, Stream s) {
  const std::int64_t row_vecs = p.row_bytes / static_cast<std::int64_t>(sizeof(V));
  const std::int64_t rows = p.align.max_num_tokens_padded;
  const unsigned threads = static_cast<unsigned>(std::clamp<std::int64_t>((row_vecs + 31) / 32 * 32, 32, 256));
  // Grid-stride over the rows: most of the padded buffer is unused at small T.
  const unsigned grid = clamp_grid(std::min<std::int64_t>(rows, std::int64_t{8} * std::max(device_caps().sm_count, 1)));
  detail::gather_rows_kernel<V><<<grid, threads, 0, s>>>(static_cast<const V*>(b.hidden), static_cast<V*>(b.permuted),
                                                         b.sorted_token_ids, b.num_tokens_post_pad, b.inverse,
                                                         p.align.numel, p.topk, row_vecs, rows);
  return cudaGetLastError();
}

LaunchStatus launch_gather(const Problem& p, const Buffers& b, Stream s) {
  const DeviceCaps& caps = device_caps();
  align::Buffers ab;
  ab.topk_ids = b.topk_ids;
  ab.expert_map = p.align.map_size > 0 ? b.expert_map : nullptr;
  ab.sorted_token_ids = b.sorted_token_ids;
  ab.expert_ids = b.expert_ids;
  ab.num_tokens_post_pad = b.num_tokens_post_pad;
  ab.workspace = b.workspace;
  if (const LaunchStatus e = align::launch_ep(align_step(p, caps), p.align, ab, s); e != 0) return e;
  const std::size_t slots = static_cast<std::size_t>(p.align.numel);
  if (slots > 0) {
    if (const cudaError_t e = cudaMemsetAsync(b.inverse, 0xff, slots * 4, s); e != cudaSuccess) return e;
  }
  cudaError_t e = cudaSuccess;
  if (p.row_bytes > 0 && p.align.max_num_tokens_padded > 0) {
    if (p.row_bytes % 16 == 0 && aligned_to(b.hidden, 16) && aligned_to(b.permuted, 16))
      e = launch_gather_typed<uint4>(p, b, s);
    else if (p.row_bytes % 4 == 0 && aligned_to(b.hidden, 4) && aligned_to(b.permuted, 4))
      e = launch_gather_typed<unsigned>(p, b, s);
    else
      e = launch_gather_typed<unsigned short>(p, b, s);
    if (e != cudaSuccess) return e;
  }
  if (p.layout == Layout::compact) {
    const int E = p.align.num_experts;
    detail::compact_offsets_kernel<<<clamp_grid(ceil_div(E + 1, 256)), 256, 0, s>>>(
        b.expert_ids, b.num_tokens_post_pad, b.expert_offsets, E);
    e = cudaGetLastError();
  }
  return e;
}

const char* gather_na(const Problem& p, const DeviceCaps& caps) {
  return align::ep_not_applicable(align_step(p, caps), p.align, caps);
}
std::size_t gather_workspace(const Problem& p, const DeviceCaps& caps) {
  return align::ep_workspace_bytes(align_step(p, caps), p.align, caps);
}
// Zeroed once, then align's own part stays zero (the bucket's groups after it are scratch).
bool gather_zeroed(const Problem& p, const DeviceCaps& caps) {
  return align::ep_zeroed_workspace(align_step(p, caps), p.align, caps);
}
std::string any_limits(const DeviceCaps&) { return "any (align's auto pick applies)"; }

const std::array<Variant, 1> kVariants{{
    {{"gather",
      "align (auto) sorts the slots by expert, then one block per output row copies the token's row in "
      "16-byte vectors (4/2-byte words for unaligned rows), zeroes padding rows and records the inverse map"},
     false, any_limits, gather_na, gather_workspace, launch_gather, gather_zeroed},
}};

const std::array<AutoRow<Problem>, 1> kAutoRows = {{
    {"gather", "", nullptr},
}};

}  // namespace

std::span<const Variant> variants() { return kVariants; }
const Variant* find(std::string_view name) { return find_variant<Variant>(kVariants, name); }
const Variant& pick_auto(const Problem& p) { return pick_auto(p, moekit::device_caps()); }
const Variant& pick_auto(const Problem& p, const DeviceCaps& caps) {
  return pick_from_rows<Variant, Problem>(kAutoRows, kVariants, p, caps);
}
std::span<const AutoRow<Problem>> auto_rows() { return kAutoRows; }
std::string auto_rule() { return auto_rule_text<Problem>(kAutoRows); }

}  // namespace moekit::permute
