// Router top-k: public interface of the route family (logits -> topk_ids,
// topk_weights). Host-visible: no CUDA headers. Semantics: docs/route.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"

namespace moekit::route {

// Largest E any variant takes: the `warp` variant keeps a row of scores per
// warp in shared memory, the `block` variant 16 per thread of 256. The CLI
// refuses larger E before allocating anything E-long.
inline constexpr std::int32_t kMaxExperts = 4096;

enum class DType { f32, bf16, f16 };
enum class Scoring { softmax, sigmoid };

struct Problem {
  std::int64_t tokens = 0;       // T rows of logits
  std::int32_t experts = 0;      // E
  std::int32_t topk = 0;         // K <= E
  std::int32_t groups = 1;       // G, divides E; 1 = no groups
  std::int32_t topk_groups = 1;  // KG <= G groups kept
  Scoring scoring = Scoring::softmax;
  bool bias = false;             // a correction bias [E] f32 is given
  bool renormalize = false;
  float scaling = 1.0f;          // routed scaling factor
  DType dtype = DType::f32;      // logits dtype
  // --then-align: align's block size and output lengths (align::make_problem
  // of T*K slots and E experts), for the variants that fuse align; 0 = none.
  std::int32_t align_block = 0;
  std::int64_t align_rows = 0;    // max_num_tokens_padded
  std::int64_t align_blocks = 0;  // max_num_blocks
};

// Device pointers.
struct Buffers {
  const void* logits = nullptr;        // [T, E] of p.dtype
  const float* bias = nullptr;         // [E] or nullptr
  std::int32_t* topk_ids = nullptr;    // [T, K]
  float* topk_weights = nullptr;       // [T, K]
  // Align outputs, written by the variants that fuse align (fuses_align).
  std::int32_t* sorted_token_ids = nullptr;     // [align_rows]
  std::int32_t* expert_ids = nullptr;           // [align_blocks]
  std::int32_t* num_tokens_post_pad = nullptr;  // [1]
  void* workspace = nullptr;
};

// Validates the shape arguments every variant relies on: throws ProblemError
// (common/problem_error.hpp) when K > E, G does not divide E, KG > G, K is
// above the experts of KG groups, T*K does not fit int32, ... Host only
// (problem.cpp).
void validate(const Problem& p);

using Variant = moekit::Variant<Problem, Buffers>;

using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)
// Whether v writes the align outputs itself (with p.align_block > 0); for the
// others the caller runs an align variant on topk_ids after it.
bool fuses_align(const Variant& v);

}  // namespace moekit::route
