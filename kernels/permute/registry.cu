// Launchers and registry of the permute family.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "common/cuda_check.cuh"
#include "common/fits_smem.hpp"
#include "permute/fused.cuh"
#include "permute/gather.cuh"
#include "permute/permute.hpp"
#include "permute/policy.hpp"
#include "permute/scatter.cuh"
#include "permute/tma.cuh"
#include "primitives/launch.cuh"
#include "primitives/smem.cuh"

namespace moekit::permute {
namespace {

bool aligned_to(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// The widest word (16, 4 or 2 bytes) that row_bytes and both pointers allow.
int word_bytes(const Problem& p, const Buffers& b) {
  for (int w : {16, 4}) {
    if (p.row_bytes % w == 0 && aligned_to(b.hidden, w) && aligned_to(b.permuted, w)) return w;
  }
  return 2;
}

template <template <class> class L>
cudaError_t by_word(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  switch (word_bytes(p, b)) {
    case 16: return L<uint4>::run(p, b, s, pdl);
    case 4: return L<unsigned>::run(p, b, s, pdl);
    default: return L<unsigned short>::run(p, b, s, pdl);
  }
}

// Every kernel launches with PDL when the launch's pdl says so: no memset
// node sits between align and the first rows kernel (that kernel marks the
// dropped slots itself: dropped_out), which could not be a programmatic
// predecessor (primitives/pdl.cuh).

unsigned copy_grid(std::int64_t items) {
  return clamp_grid(std::min<std::int64_t>(
      std::max<std::int64_t>(items, 1),
      std::int64_t{policy_for(device_caps()).copy_blocks_per_sm} * std::max(device_caps().sm_count, 1)));
}

// ---- the steps the multi-launch variants share ----

// align's auto pick for the problem its variant runs (align::variant_problem:
// the bucket and vllm's map are passes around it, align::launch_ep). align's
// auto rows read no PDL (tests/align/cpu_auto_rule.cpp checks), so the pick
// asked without it sizes the workspace and launches alike.
const align::Variant& align_step(const Problem& p, const DeviceCaps& caps) {
  return align::registry().pick_auto(align::variant_problem(p.align), caps, false);
}

LaunchStatus run_align(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  align::Buffers ab;
  ab.topk_ids = b.topk_ids;
  ab.expert_map = p.align.map_size > 0 ? b.expert_map : nullptr;
  ab.sorted_token_ids = b.sorted_token_ids;
  ab.expert_ids = b.expert_ids;
  ab.num_tokens_post_pad = b.num_tokens_post_pad;
  ab.workspace = b.workspace;
  return align::launch_ep(align_step(p, device_caps()), p.align, ab, s, pdl);
}

// The dropped slots' part of the first rows kernel after align: the rule of
// the problem align's variant runs (align::variant_problem), nothing with the
// bucket (every slot has a row).
detail::DroppedOut dropped_out(const Problem& p, const Buffers& b) {
  if (p.align.invalid == align::Invalid::bucket || p.align.numel == 0) return {{}, false, nullptr};
  const align::Problem vp = align::variant_problem(p.align);
  align::Buffers ab;
  ab.topk_ids = b.topk_ids;
  ab.expert_map = vp.map_size > 0 ? b.expert_map : nullptr;
  return {align::make_args(vp, ab), vp.ids_int64, b.inverse};
}

bool has_rows(const Problem& p) { return p.row_bytes > 0 && p.align.max_num_tokens_padded > 0; }

// The offsets' part of the first kernel after align (compact layout only).
detail::OffsetsOut offsets_out(const Problem& p, const Buffers& b) {
  if (p.layout != Layout::compact) return {nullptr, nullptr, 0};
  return {static_cast<const std::int32_t*>(b.expert_ids), b.expert_offsets, p.align.num_experts};
}

// The offsets by a kernel of their own, right after run_align, where no rows
// kernel runs (the rows kernels write them: offsets_out): only where nothing
// is padded, so there is no slot to mark dropped either.
cudaError_t run_offsets(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (p.layout != Layout::compact) return cudaSuccess;
  const int E = p.align.num_experts;
  return prim::launch_ex(detail::compact_offsets_kernel, clamp_grid(ceil_div(E + 1, 256)), 256, 0, s,
                         prim::pdl_attrs(pdl), offsets_out(p, b), static_cast<const std::int32_t*>(b.num_tokens_post_pad));
}

// The grid of the first rows kernel after align: its rows' (copy_grid), and
// in the compact layout at least a thread per offset, which the same kernel
// writes with a binary search each (a grid sized to a few rows would leave
// E + 1 searches to a few blocks: E up to 65536).
unsigned rows_grid(const Problem& p, std::int64_t row_items, unsigned threads) {
  const unsigned g = copy_grid(row_items);
  if (p.layout != Layout::compact) return g;
  return std::max(g, clamp_grid(ceil_div<std::int64_t>(std::int64_t{p.align.num_experts} + 1, threads)));
}

// inverse from align's rows, padding rows zeroed (scatter and tma).
template <class V>
struct RowsPass {
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    const std::int64_t rows = p.align.max_num_tokens_padded;
    return prim::launch_ex(detail::rows_pass_kernel<V>, rows_grid(p, ceil_div<std::int64_t>(rows, 8), 256), 256, 0, s,
                           prim::pdl_attrs(pdl),
                           static_cast<V*>(b.permuted), static_cast<const std::int32_t*>(b.sorted_token_ids),
                           static_cast<const std::int32_t*>(b.num_tokens_post_pad), b.inverse, p.align.numel,
                           p.row_bytes / std::int64_t(sizeof(V)), rows, offsets_out(p, b), dropped_out(p, b));
  }
};

// After align, where there are no rows to copy (row_bytes 0, or none
// padded): the rows pass with rows of 0 words, inverse (and the offsets)
// only, permuted never touched.
LaunchStatus index_pass(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (p.align.max_num_tokens_padded == 0) return run_offsets(p, b, s, pdl);
  Problem no_rows = p;
  no_rows.row_bytes = 0;
  return RowsPass<uint4>::run(no_rows, b, s, pdl);
}

// ---- gather ----

template <class V>
struct GatherRows {
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    const std::int64_t row_vecs = p.row_bytes / static_cast<std::int64_t>(sizeof(V));
    const std::int64_t rows = p.align.max_num_tokens_padded;
    const unsigned threads = static_cast<unsigned>(std::clamp<std::int64_t>((row_vecs + 31) / 32 * 32, 32, 256));
    // Grid-stride over the rows: most of the padded buffer is unused at small T.
    return prim::launch_ex(detail::gather_rows_kernel<V>, rows_grid(p, rows, threads), threads, 0, s, prim::pdl_attrs(pdl),
                           static_cast<const V*>(b.hidden), static_cast<V*>(b.permuted),
                           static_cast<const std::int32_t*>(b.sorted_token_ids),
                           static_cast<const std::int32_t*>(b.num_tokens_post_pad), b.inverse, p.align.numel, p.topk,
                           row_vecs, rows, offsets_out(p, b), dropped_out(p, b));
  }
};

LaunchStatus launch_gather(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (const LaunchStatus e = run_align(p, b, s, pdl); e != 0) return e;
  if (!has_rows(p)) return index_pass(p, b, s, pdl);
  return by_word<GatherRows>(p, b, s, pdl);
}

// ---- scatter ----

template <class V>
struct ScatterTokens {
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    const std::int64_t row_vecs = p.row_bytes / static_cast<std::int64_t>(sizeof(V));
    const std::int64_t slices =
        ceil_div<std::int64_t>(row_vecs, std::int64_t{detail::kScatterThreads} * detail::kScatterUnroll);
    if (const cudaError_t e = RowsPass<V>::run(p, b, s, pdl); e != cudaSuccess) return e;
    if (p.tokens == 0) return cudaSuccess;
    return prim::launch_ex(detail::scatter_tokens_kernel<V>, copy_grid(p.tokens * slices), detail::kScatterThreads, 0,
                           s, prim::pdl_attrs(pdl), static_cast<const V*>(b.hidden), static_cast<V*>(b.permuted),
                           static_cast<const std::int32_t*>(b.inverse), p.tokens, p.topk, row_vecs, slices);
  }
};

LaunchStatus launch_scatter(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (const LaunchStatus e = run_align(p, b, s, pdl); e != 0) return e;
  if (!has_rows(p)) return index_pass(p, b, s, pdl);
  return by_word<ScatterTokens>(p, b, s, pdl);
}

// ---- tma ----

LaunchStatus launch_tma(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (const LaunchStatus e = run_align(p, b, s, pdl); e != 0) return e;
  if (!has_rows(p)) return index_pass(p, b, s, pdl);
  // Bulk copies need 16-byte aligned rows: otherwise scatter's copy.
  if (word_bytes(p, b) != 16) return by_word<ScatterTokens>(p, b, s, pdl);
  if (const cudaError_t e = RowsPass<uint4>::run(p, b, s, pdl); e != cudaSuccess) return e;
  if (p.tokens == 0) return cudaSuccess;
  const DeviceCaps& caps = device_caps();
  const std::int64_t seg = std::min<std::int64_t>(p.row_bytes, detail::kTmaSegment);
  const std::int64_t segs = ceil_div<std::int64_t>(p.row_bytes, seg);
  const std::size_t smem = detail::tma_smem(p.row_bytes);
  const unsigned grid = clamp_grid(std::min<std::int64_t>(
      p.tokens * segs, std::int64_t{policy_for(caps).tma_blocks_per_sm} * std::max(caps.sm_count, 1)));
  return prim::launch_with_smem(detail::tma_tokens_kernel, grid, 32, smem, s, prim::pdl_attrs(pdl),
                                static_cast<const char*>(b.hidden), static_cast<char*>(b.permuted),
                                static_cast<const std::int32_t*>(b.inverse), p.tokens, p.topk, p.row_bytes, segs);
}

// ---- index only (permute.hpp: no rows) ----

LaunchStatus launch_index(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (const LaunchStatus e = run_align(p, b, s, pdl); e != 0) return e;
  return index_pass(p, b, s, pdl);
}

// ---- fused ----

struct FusedPlan {
  align::TinyPlan tiny;
  std::size_t smem = 0;
};

template <class V>
std::size_t fused_smem(const Problem& p) {
  const std::size_t base = (align::tiny_smem(p.align.numel, p.align.num_experts) + 15) / 16 * 16;
  return base + detail::PermutePlace<V>::extra_smem(p.align.numel, p.align.num_experts);
}

FusedPlan fused_plan(const Problem& p, const DeviceCaps& caps) {
  const Policy& pol = policy_for(caps);
  FusedPlan f;
  const int threads = p.align.numel <= pol.fused_256_threads_max_slots ? 256 : 512;
  const std::int64_t most = std::int64_t{pol.fused_blocks_per_sm} * std::max(caps.sm_count, 1);
  f.tiny = align::tiny_plan_with(p.align, static_cast<int>(most), threads);
  f.smem = fused_smem<uint4>(p);  // the same for every word type
  return f;
}

template <class V, int kThreads, bool kWide>
cudaError_t launch_fused_as(const Problem& p, const Buffers& b, Stream s, bool pdl, const FusedPlan& f) {
  using Place = detail::PermutePlace<V>;
  auto kernel = align::tiny_kernel<std::int32_t, kThreads, kWide, Place>;
  align::Buffers ab;
  ab.topk_ids = b.topk_ids;
  ab.expert_map = p.align.map_size > 0 ? b.expert_map : nullptr;
  ab.sorted_token_ids = b.sorted_token_ids;
  ab.expert_ids = b.expert_ids;
  ab.num_tokens_post_pad = b.num_tokens_post_pad;
  typename Place::Params pp;
  pp.hidden = static_cast<const V*>(b.hidden);
  pp.permuted = static_cast<V*>(b.permuted);
  pp.inverse = b.inverse;
  pp.offsets = p.layout == Layout::compact ? b.expert_offsets : nullptr;
  pp.topk = p.topk;
  pp.row_vecs = static_cast<std::uint32_t>(p.row_bytes / std::int64_t(sizeof(V)));
  pp.div_row_vecs = prim::FastDivU32(std::max<std::uint32_t>(pp.row_vecs, 1));
  return prim::launch_with_smem(kernel, f.tiny.grid, kThreads, f.smem, s, prim::pdl_attrs(pdl),
                                align::make_args(p.align, ab), f.tiny.chunk, pp);
}

template <class V>
struct Fused {
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    const FusedPlan f = fused_plan(p, device_caps());
    const bool wide = align::tiny_wide(p.align.numel, f.tiny.threads);
    if (f.tiny.threads == 256)
      return wide ? launch_fused_as<V, 256, true>(p, b, s, pdl, f) : launch_fused_as<V, 256, false>(p, b, s, pdl, f);
    return wide ? launch_fused_as<V, 512, true>(p, b, s, pdl, f) : launch_fused_as<V, 512, false>(p, b, s, pdl, f);
  }
};

LaunchStatus launch_fused(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  // No early exit at zero rows: num_tokens_post_pad (0) and the offsets are still written.
  if (p.row_bytes == 0) {  // no data: the index half alone, with a 2-byte word
    return Fused<unsigned short>::run(p, b, s, pdl);
  }
  return by_word<Fused>(p, b, s, pdl);
}

// ---- variant facts ----

const char* align_na(const Problem& p, const DeviceCaps& caps) {
  return align::ep_not_applicable(align_step(p, caps), p.align, caps);
}
std::size_t align_workspace(const Problem& p, const DeviceCaps& caps) {
  return align::ep_workspace_bytes(align_step(p, caps), p.align, caps);
}
// Zeroed once, then align's own part stays zero (the bucket's groups after it are scratch).
bool align_zeroed(const Problem& p, const DeviceCaps& caps) {
  return align::ep_zeroed_workspace(align_step(p, caps), p.align, caps);
}
std::string any_limits(const DeviceCaps&) { return "any (align's auto pick applies)"; }

const char* scatter_na(const Problem& p, const DeviceCaps& caps) {
  if (p.topk > detail::kScatterMaxTopk) return "K > 64 (a token's rows are staged in shared memory)";
  return align_na(p, caps);
}
std::string scatter_limits(const DeviceCaps&) { return "K <= " + std::to_string(detail::kScatterMaxTopk); }

const char* tma_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present() && caps.cc_major < 9) return "needs sm_90 (bulk copies)";
  if (p.topk > detail::kTmaMaxTopk) return "K > 32 (one lane per row of a token)";
  return align_na(p, caps);
}
std::string tma_limits(const DeviceCaps&) {
  return "sm_90+, K <= " + std::to_string(detail::kTmaMaxTopk) + " (rows not 16-byte aligned: scatter's copy)";
}

const char* fused_na(const Problem& p, const DeviceCaps& caps) {
  if (align::has_ep_passes(p.align)) return "--invalid bucket and --map-semantics vllm need align's passes (gather)";
  if (p.align.numel > align::kTinyMaxNumel) return "needs T * K <= 32768 (every block ranks all slots)";
  if (p.align.num_experts > align::kTinyMaxExperts) return "needs E <= 16384";
  const std::int64_t vecs = p.row_bytes / 2;  // the most words a row can take
  if (p.align.numel * vecs >= (std::int64_t{1} << 32)) return "needs T * K * H words < 2^32";
  if (!fits_smem(caps, fused_smem<uint4>(p) + 256)) return "needs 12 bytes per slot and 16 per expert of shared memory";
  return nullptr;
}
std::string fused_limits(const DeviceCaps& caps) {
  return "T * K <= " + std::to_string(align::kTinyMaxNumel) + ", E <= " +
         std::to_string(align::kTinyMaxExperts) + ", 12 B/slot + 16 B/expert of shared memory" +
         (caps.present() ? " <= " + std::to_string(caps.smem_optin / 1024) + " KiB" : std::string()) +
         ", not with --invalid bucket or --map-semantics vllm";
}

const std::array<Variant, 4> kVariants{{
    {{"gather",
      "align (auto) sorts the slots by expert, then one block per output row copies the token's row in "
      "16-byte vectors (4/2-byte words for unaligned rows), zeroes padding rows and records the inverse map", "align:auto gather_rows_kernel compact_offsets_kernel"},
     false, any_limits, align_na, align_workspace, launch_gather, align_zeroed},
    {{"scatter",
      "align (auto), a rows pass (inverse map, zero padding rows), then token by token: each 16-byte vector of "
      "hidden is loaded once and stored to the token's K rows, 4 vectors in flight per thread", "align:auto rows_pass_kernel scatter_tokens_kernel compact_offsets_kernel"},
     false, scatter_limits, scatter_na, align_workspace, launch_scatter, align_zeroed},
    {{"tma",
      "sm_90: align (auto) and scatter's rows pass, then the copy engine moves the rows: one bulk load per "
      "token segment into shared memory, one bulk store per row of the token, double-buffered", "align:auto rows_pass_kernel tma_tokens_kernel compact_offsets_kernel"},
     false, tma_limits, tma_na, align_workspace, launch_tma, align_zeroed},
    {{"fused",
      "one launch: align's tiny kernel ranks the slots in every block, and the block that places an expert "
      "also copies its rows, zeroes its chunk's padding rows and writes inverse and offsets (decode)", "tiny_kernel<PermutePlace>"},
     false, fused_limits, fused_na, [](const Problem&, const DeviceCaps&) -> std::size_t { return 0; },
     launch_fused},
}};

// fused: compact layout only (in the padded one its few blocks per expert
// zero the padding rows slowly), and few rows per expert (one block copies an
// expert's rows).
bool fused_fits(const Problem& p, const DeviceCaps& caps) {
  const Policy& pol = policy_for(caps);
  return p.layout == Layout::compact && p.align.numel <= pol.fused_max_slots &&
         p.align.numel <= std::int64_t{pol.fused_max_slots_per_expert} * p.align.num_experts;
}
bool many_slots(const Problem& p, const DeviceCaps& caps) { return p.align.numel >= policy_for(caps).tma_min_slots; }

const std::array<AutoRow<Problem>, 3> kAutoRows = {{
    {"fused",
     "compact layout, T * K <= policy.fused_max_slots and T * K <= policy.fused_max_slots_per_expert * E",
     fused_fits},
    {"tma", "T * K >= policy.tma_min_slots", many_slots},
    {"gather", "", nullptr},
}};

const Variant kIndexOnly{
    {"index",
     "align (auto), then scatter's rows pass with no row to copy or zero: the inverse map from sorted_token_ids "
     "(and the compact offsets); permuted untouched",
     "align:auto rows_pass_kernel<uint4> compact_offsets_kernel"},
    false, any_limits, align_na, align_workspace, launch_index, align_zeroed};

}  // namespace

const Variant& index_only() { return kIndexOnly; }

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::permute
