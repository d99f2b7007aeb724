// The MoE layer end to end (the moe_path family): route (when given logits) ->
// permute (which runs align) -> the experts (identity, or the expert FFN) ->
// combine, as one stream of launches. Host-visible: no CUDA headers.
// Semantics: docs/moe-path.md.
//
// The family has no kernels of its own: each stage is its family's `auto` pick
// through that family's public registry, so the path measures what those
// families ship. Identity experts cost nothing: combine reads permute's rows.
// The expert FFN is the experts family's auto pick, its FFN stage alone
// (experts::launch_stage): it reads permute's rows and writes y in the same
// row order, which combine then reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "combine/combine.hpp"
#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"
#include "experts/experts.hpp"
#include "permute/permute.hpp"
#include "route/route.hpp"

namespace moekit::moe_path {

struct Problem {
  // A route stage (logits -> topk_ids, topk_weights) runs first; otherwise
  // the ids and weights are inputs. route.scaling is 1: the routed scaling
  // factor is applied once, by combine (combine.scaling).
  bool routed = false;
  // The experts are the expert FFN (experts.hpp's formula), not identity.
  bool ffn = false;
  route::Problem route;      // when routed
  permute::Problem permute;  // T, K, E, B, layout, row bytes
  combine::Problem combine;  // rows = permute's row capacity (expert_out = permuted, or y with ffn)
  // When ffn: the experts family's Problem of the same T, K, E, H, dtype,
  // layout, B and S; make_problem sets permute and combine above to its own
  // sub-problems (slots of ids outside [0, E) dropped, which the path never
  // has), so every stage reads one plan.
  experts::Problem experts;
};
// The launch's pdl (Variant::launch, launch_stage) goes to every stage, so
// with it each stage overlaps the previous stage's tail.

// Device pointers.
struct Buffers {
  const void* logits = nullptr;             // [T, E] (routed)
  const float* bias = nullptr;              // [E] or nullptr (routed)
  const void* hidden = nullptr;             // [T, H]
  std::int32_t* topk_ids = nullptr;         // [T, K]: route's output, or the input ids
  float* topk_weights = nullptr;            // [T, K]: route's output, or the input weights
  const void* w1 = nullptr;                 // ffn: [E, 2I, H] (experts.hpp)
  const void* w2 = nullptr;                 // ffn: [E, H, I]
  void* permuted = nullptr;                 // [permute.align.max_num_tokens_padded, H]
  std::int32_t* inverse = nullptr;          // [T, K]
  std::int32_t* sorted_token_ids = nullptr; // align's outputs
  std::int32_t* expert_ids = nullptr;
  std::int32_t* num_tokens_post_pad = nullptr;
  std::int64_t* expert_offsets = nullptr;   // [E + 1], compact layout
  void* y = nullptr;                        // ffn: [rows, H] the experts' outputs, permuted's row order
  void* out = nullptr;                      // [T, H]
  void* workspace = nullptr;
};

// The expert FFN's own arguments (experts.hpp).
using FfnArgs = experts::FfnArgs;

// The Problem of T tokens with K experts each (of E), rows of H elements of
// `dtype`, permute's layout (block size B for padded), combine's S. With
// `router` the path routes: its scoring, groups, bias, renormalize and
// logits dtype are kept, T, E and K set, and its scaling set to 1 (S is
// combine's). With `ffn` the experts are the expert FFN (bf16 or f16 rows
// only), planned by experts::make_problem. Throws ProblemError
// (route::validate's, align::make_problem's and experts::make_problem's
// limits). Host only (problem.cpp).
Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int64_t hidden,
                     combine::DType dtype, permute::Layout layout, std::int32_t block_size, float scaling,
                     const route::Problem* router = nullptr, const FfnArgs* ffn = nullptr);

using Variant = moekit::Variant<Problem, Buffers>;

using Registry = moekit::Registry<Problem, Buffers>;

// Where the path keeps its workspace zeroed (a stage's pick counts in its
// slice), the bytes from its start every launch leaves zero: all of it, or,
// with the FFN, everything before the FFN's scratch slice (last), through
// the FFN's own zeroed prefix where it keeps one (fused's counters).
std::size_t zeroed_workspace_bytes(const Problem& p, const DeviceCaps& caps);
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)

// The stages of the `stages` variant, each launchable alone (per-stage
// timing): the stage's family `auto` pick on the current device, with its
// slice of the workspace. Identity experts are no stage: they launch nothing;
// the expert FFN is the stage `ffn` (the experts family's auto pick's FFN).
enum class Stage { route, permute, ffn, combine };
// Whether the FFN stage is a pick that lists the slots and combines itself
// (experts' `fused`): then the path is route (when p.routed) and ffn alone,
// y's rows are the slots (inverse the identity on kept slots) and permute's
// other outputs are not written.
bool ffn_lists_slots(const Problem& p, const DeviceCaps& caps);
// route (when p.routed), permute, ffn (when p.ffn), combine; route and ffn
// where ffn_lists_slots. stages(p) asks the current device.
std::span<const Stage> stages(const Problem& p, const DeviceCaps& caps);
std::span<const Stage> stages(const Problem& p);
std::string_view stage_name(Stage s);
// The variant a stage runs on `caps` ("block-rank", "gather", ...; ffn: the
// experts variant).
std::string_view stage_variant(const Problem& p, Stage s, const DeviceCaps& caps);
// One stage alone, with PDL when `pdl` (as Variant::launch).
LaunchStatus launch_stage(const Problem& p, const Buffers& b, Stage s, Stream stream, bool pdl);

}  // namespace moekit::moe_path
