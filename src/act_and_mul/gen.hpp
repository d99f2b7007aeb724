// Synthetic activations (`moekit gen act-and-mul`, `moekit act-and-mul --tokens ...`).
#pragma once

#include <cstdint>

#include "npy.hpp"

namespace moekit::gen {

// [tokens, 2d] approximately standard-normal values in f16, bf16 or f32
// (gen::normal_values, src/rows_gen.hpp).
npy::Array act_input(std::int64_t tokens, std::int64_t d, npy::DType dtype, std::uint64_t seed);

}  // namespace moekit::gen
