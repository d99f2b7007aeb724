// MoE combine: expert output rows gathered back to their tokens, weighted
// (the combine family). Host-visible: no CUDA headers. Semantics: docs/combine.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"

namespace moekit::combine {

enum class DType { f32, bf16, f16 };

struct Problem {
  std::int64_t tokens = 0;  // T
  std::int32_t topk = 0;    // K
  std::int64_t rows = 0;    // P rows of expert_out
  std::int64_t hidden = 0;  // H
  DType dtype = DType::bf16;
  float scaling = 1.0f;     // routed scaling factor S
};

// Device pointers.
struct Buffers {
  const void* expert_out = nullptr;      // [P, H]
  const std::int32_t* inverse = nullptr; // [T, K], each -1 (dropped) or in [0, P)
  const float* weights = nullptr;        // [T, K]
  void* out = nullptr;                   // [T, H]
  void* workspace = nullptr;
};

using Variant = moekit::Variant<Problem, Buffers>;

using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)

}  // namespace moekit::combine
