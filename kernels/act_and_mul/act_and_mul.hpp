// SiLU/GELU-and-mul: public interface of the act-and-mul family.
// Host-visible: no CUDA headers. Semantics: docs/act-and-mul.md and issue #4.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"

namespace moekit::act {

enum class DType { f16, bf16, f32 };
enum class Activation { silu, gelu, gelu_tanh };

struct Problem {
  std::int64_t tokens = 0;  // rows
  std::int64_t d = 0;       // output width; input rows are 2*d wide
  DType dtype = DType::bf16;
  Activation act = Activation::silu;
};
// PDL is Variant::launch's `pdl` argument (common/variant.hpp). The plain
// variants follow it (spread and flat with pdl launch exactly as spread-pdl
// and flat-pdl do); spread-pdl and flat-pdl always launch with PDL (their
// entries' always_pdl).

struct Buffers {
  const void* input = nullptr;  // [tokens, 2d]
  void* out = nullptr;          // [tokens, d]
  void* workspace = nullptr;
};

using Variant = moekit::Variant<Problem, Buffers>;

using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)

}  // namespace moekit::act
