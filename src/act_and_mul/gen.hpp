// Synthetic activations (`moekit gen act-and-mul`, `moekit act-and-mul --tokens ...`).
#pragma once

#include <cstdint>
#include <string_view>

#include "npy.hpp"

namespace moekit::gen {

// [tokens, 2d] approximately standard-normal values (a 4096-bin quantile table,
// src/gen_common.hpp) in f16, bf16 or f32.
npy::Array act_input(std::int64_t tokens, std::int64_t d, npy::DType dtype, std::uint64_t seed);

// [rows, h] standard-normal rows (permute's hidden states, combine's expert
// rows): act_input's values, the first h of each 2*ceil(h/2). `what` names the
// rows in the size error.
npy::Array normal_rows(std::int64_t rows, std::int64_t h, npy::DType dtype, std::uint64_t seed, std::string_view what);

}  // namespace moekit::gen
