// MoE dispatch: rows of hidden states scattered into expert order (the
// permute family). Host-visible: no CUDA headers. Semantics: docs/permute.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "align/align.hpp"
#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"

namespace moekit::permute {

enum class Layout {
  padded,   // align's layout: each expert's rows padded to a multiple of B (Triton-style fused MoE)
  compact,  // real slots only, grouped by expert, with per-expert offsets (grouped GEMMs)
};

struct Problem {
  std::int64_t tokens = 0;   // T rows of hidden
  std::int32_t topk = 0;     // K ids per token
  std::int64_t row_bytes = 0;  // H * element size
  Layout layout = Layout::padded;
  // The align step: block size B (padded) or 1 (compact), E experts, T*K
  // slots, the expert map's length and align's expert-parallel modes
  // (align.invalid, align.map_semantics; docs/permute.md). A slot align drops
  // gets no row and inverse -1; the bucket's slots are rows like any other.
  // The launch's pdl decides for every kernel, align's too.
  align::Problem align;
};

// Device pointers.
struct Buffers {
  const void* hidden = nullptr;              // [T, H]
  const std::int32_t* topk_ids = nullptr;    // [T, K] (invalid ids: align.invalid says what they become)
  const std::int32_t* expert_map = nullptr;  // align.map_size entries, or nullptr
  void* permuted = nullptr;                  // [align.max_num_tokens_padded, H]
  std::int32_t* inverse = nullptr;           // [T, K]
  std::int32_t* sorted_token_ids = nullptr;  // align's outputs
  std::int32_t* expert_ids = nullptr;
  std::int32_t* num_tokens_post_pad = nullptr;
  std::int64_t* expert_offsets = nullptr;    // [E + 1], compact layout only (the bucket: rows from offsets[E])
  void* workspace = nullptr;
};

// The Problem for T tokens of K ids over E experts, rows of row_bytes; B is
// used by the padded layout only; map_size, invalid and map_semantics are
// align's (align::make_problem). The compact layout with vllm semantics runs
// align without the map: vllm's map only relabels expert_ids, which compact
// does not write, so its rows and offsets are per global expert. Throws
// ProblemError where align::make_problem refuses (its argument limits, outputs
// past int32). Host only (problem.cpp).
Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int32_t block_size,
                     std::int64_t row_bytes, Layout layout, std::int32_t map_size = 0,
                     align::Invalid invalid = align::Invalid::reject,
                     align::MapSemantics map_semantics = align::MapSemantics::local);

// The layout's outputs (the rows, the inverse map, align's outputs, the
// offsets) and the expert map, where both sides have one, copied between two
// Buffers of the same field names: permute's and a family's that runs it (or
// reads what it wrote: experts' FFN after ep's layout).
template <class To, class From>
void copy_layout_outputs(To& to, const From& from) {
  if constexpr (requires { to.expert_map; from.expert_map; }) to.expert_map = from.expert_map;
  to.permuted = from.permuted;
  to.inverse = from.inverse;
  to.sorted_token_ids = from.sorted_token_ids;
  to.expert_ids = from.expert_ids;
  to.num_tokens_post_pad = from.num_tokens_post_pad;
  to.expert_offsets = from.expert_offsets;
}

// permute's Buffers from a later family's (moe_path, experts), whose fields
// carry permute's names; expert_map where that family has one.
template <class B>
Buffers buffers_of(const B& b, void* workspace) {
  Buffers pb;
  pb.hidden = b.hidden;
  pb.topk_ids = b.topk_ids;
  copy_layout_outputs(pb, b);
  pb.workspace = workspace;
  return pb;
}

using Variant = moekit::Variant<Problem, Buffers>;

using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)

// The layout without the rows, for a consumer that reads hidden through
// sorted_token_ids itself (a fused_moe-style GEMM that gathers its rows):
// align's auto pick as every variant runs it, then the slot -> row map
// (inverse, -1 for dropped slots) from sorted_token_ids by scatter's rows
// pass with no row to zero, then the compact offsets. `permuted` is neither
// read nor written; the padding rows are not zeroed. Not in the registry (it
// does not permute, so `moekit permute` never runs it): a Variant named
// "index" so that a composing family sizes, checks and launches it as it does
// a pick, and its kernels spec names what it launches.
const Variant& index_only();

}  // namespace moekit::permute
