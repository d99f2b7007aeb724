// The MoE expert computation (the experts family): every kept slot's token row
// through its expert's FFN, weighted and summed back to token order.
// Host-visible: no CUDA headers. Semantics: docs/experts.md.
//
// For every kept slot (t, j), e = topk_ids[t, j]:
//   h = hidden[t] . W1[e]^T          f32 accumulation, rounded to the dtype
//   a = act(gate(h)) * up(h)         f32 from the rounded h, rounded to the dtype
//   y = a . W2[e]^T                  f32 accumulation, rounded to the dtype
//   out[t] = S * sum_j w[t, j] * y   f32, j ascending, one rounding (combine's rule)
//
// A launch is stages in one stream: the layout (permute's `auto` pick: rows
// grouped by expert, the inverse map; `gather`: the same without the row
// copy, its gemm1 reading hidden through sorted_token_ids), the variant's FFN
// over those rows (writing y in the same row order), and combine's `auto` pick
// (y through the inverse map, weighted). Slots align drops (ids -1 or out of
// range, experts the map makes -1) get no row and contribute nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "combine/combine.hpp"
#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"
#include "permute/permute.hpp"

namespace moekit::experts {

enum class DType { bf16, f16 };  // activations and weights; accumulation is f32

// act(gate) * up, computed in f32 from the rounded h:
//   silu:       g / (1 + exp(-g)) * u
//   gelu:       0.5 g (1 + erf(g / sqrt 2)) * u
//   gelu_tanh:  0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u
//   swiglu_oai: g' = min(g, 7), u' = clamp(u, -7, 7),
//               g' * sigmoid(1.702 g') * (u' + 1)      (gpt-oss; w1 interleaved)
enum class Act { silu, gelu, gelu_tanh, swiglu_oai };
inline constexpr float kSwigluAlpha = 1.702f;
inline constexpr float kSwigluLimit = 7.0f;

// Rows of W1 [E, 2I, H]: gate rows 0..I-1 then up rows I..2I-1 (vLLM/SGLang
// w13), or interleaved: row 2i gate i, row 2i+1 up i.
enum class W1Layout { gate_up, interleaved };

// The command line's names (--act silu, gelu, gelu-tanh, swiglu-oai;
// --w1-layout gate-up, interleaved), which the options check: any other name
// reads as the first.
constexpr Act act_named(std::string_view n) {
  return n == "gelu" ? Act::gelu : n == "gelu-tanh" ? Act::gelu_tanh : n == "swiglu-oai" ? Act::swiglu_oai : Act::silu;
}
constexpr W1Layout w1_layout_named(std::string_view n) {
  return n == "interleaved" ? W1Layout::interleaved : W1Layout::gate_up;
}

// The expert FFN's own arguments beyond a path's shapes (what moe-path and ep
// pass on to make_problem).
struct FfnArgs {
  std::int64_t inter = 0;  // I
  Act act = Act::silu;
  W1Layout w1_layout = W1Layout::gate_up;
};

struct Problem {
  std::int64_t tokens = 0;   // T
  std::int32_t topk = 0;     // K
  std::int32_t experts = 0;  // E: experts with weights (the local count with an expert map)
  std::int64_t hidden = 0;   // H
  std::int64_t inter = 0;    // I
  DType dtype = DType::bf16;
  Act act = Act::silu;
  W1Layout w1_layout = W1Layout::gate_up;
  // The layout stage (permute: T, K, row bytes H * 2, its layout, align's
  // problem with invalid = drop) and the combine stage (rows = permute's row
  // capacity, S).
  permute::Problem permute;
  combine::Problem combine;

  std::int64_t rows() const { return permute.align.max_num_tokens_padded; }  // rows of permuted and y
  std::size_t element_bytes() const { return 2; }
  std::size_t w1_elements() const { return std::size_t(experts) * std::size_t(2 * inter) * std::size_t(hidden); }
  std::size_t w2_elements() const { return std::size_t(experts) * std::size_t(hidden) * std::size_t(inter); }
};

// The Problem of T tokens with K experts each over E experts (`map_size`
// global experts mapped to E local ones when an expert map is given), rows of
// H, intermediate width I. `layout` is permute's (padded: align's block size
// B). Throws ProblemError (the limits below, permute's and align's). Host only
// (problem.cpp).
Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int64_t hidden,
                     std::int64_t inter, DType dtype, Act act, W1Layout w1_layout, permute::Layout layout,
                     std::int32_t block_size, float scaling, std::int32_t map_size = 0);

// Device pointers.
struct Buffers {
  const void* hidden = nullptr;               // [T, H]
  const std::int32_t* topk_ids = nullptr;     // [T, K]
  const float* topk_weights = nullptr;        // [T, K]
  const std::int32_t* expert_map = nullptr;   // [map_size] global -> local (or -1), or nullptr
  const void* w1 = nullptr;                   // [E, 2I, H]
  const void* w2 = nullptr;                   // [E, H, I]
  // The layout stage's outputs (permute::Buffers).
  void* permuted = nullptr;                   // [rows, H]
  std::int32_t* inverse = nullptr;            // [T, K]
  std::int32_t* sorted_token_ids = nullptr;   // [rows]
  std::int32_t* expert_ids = nullptr;         // [align.max_num_blocks]
  std::int32_t* num_tokens_post_pad = nullptr;  // [1]
  std::int64_t* expert_offsets = nullptr;     // [E + 1] (compact)
  void* y = nullptr;                          // [rows, H] expert outputs, row order of permuted
  void* out = nullptr;                        // [T, H]
  void* workspace = nullptr;
};

// Which expert owns row r of permuted / y, as the FFN kernels read it
// (device pointers from Buffers). Compact: rows offsets[e] .. offsets[e+1]-1
// belong to expert e (rows from offsets[E]: none). Padded: row r belongs to
// expert_ids[r / B] and is real when r < *num_tokens_post_pad and
// sorted_token_ids[r] < numel; its token (the hidden row a gathering FFN
// reads, `gather`) is sorted_token_ids[r] / topk.
struct RowMap {
  bool compact = true;
  const std::int64_t* offsets = nullptr;
  const std::int32_t* sorted_token_ids = nullptr;
  const std::int32_t* expert_ids = nullptr;
  const std::int32_t* num_tokens_post_pad = nullptr;
  std::int32_t block_size = 1;
  std::int64_t numel = 0;
  std::int32_t topk = 1;
};
RowMap row_map(const Problem& p, const Buffers& b);

using Variant = moekit::Variant<Problem, Buffers>;
using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)

// The stages of a variant, each launchable alone once a whole launch has
// run (per-stage timing): layout (permute's auto pick; for a variant whose
// gemm1 gathers its rows from hidden itself, permute::index_only(): align and
// the inverse map, no row copy), ffn (the variant's own kernels: gemm1 + act +
// gemm2), combine (combine's auto pick). `fused` has the ffn stage alone: it
// lists the slots and combines inside (its y rows are the slots, t * K + j).
enum class Stage { layout, ffn, combine };
std::span<const Stage> stages(const Variant& v);
std::string_view stage_name(Stage s);
LaunchStatus launch_stage(const Variant& v, const Problem& p, const Buffers& b, Stage s, Stream stream, bool pdl);
// What v's layout stage runs on p.permute; nullptr for a variant without one.
const permute::Variant* layout_of(const Variant& v, const Problem& p, const DeviceCaps& caps);

// Where v keeps its workspace zeroed (Variant::zeroed_workspace: permute's
// auto pick counts in its slice; fused's counters), the bytes from the
// workspace's start that every launch leaves zero; the rest is the FFN's
// scratch. permute::index_only() runs align as the pick does, with the same
// workspace (a CPU test ties them).
std::size_t zeroed_workspace_bytes(const Variant& v, const Problem& p, const DeviceCaps& caps);

// Generated weights: W1 and W2 of every expert written on the device, each
// element the pure function weight_value (weights.hpp) of (seed, matrix,
// expert, row, column), so the CPU reference recomputes only what it reads.
// `global` (device, [p.experts], or nullptr): the expert id each one's values
// are keyed by, so that a rank holding some of a model's experts (ep) gets
// the same weights as one holding them all.
LaunchStatus generate_weights(const Problem& p, std::uint64_t seed, void* w1, void* w2, Stream stream,
                              const std::int32_t* global = nullptr);

// The auto pick among the variants whose FFN stage reads a layout's permuted
// rows (not fused, which lists its own slots, nor gather, which reads
// hidden): for a caller that lays the rows out itself (ep's receive side)
// and runs only the FFN stage. The auto rows' order and conditions.
const Variant& pick_on_layout(const Problem& p, const DeviceCaps& caps);

}  // namespace moekit::experts
