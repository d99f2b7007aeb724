// Combine's inputs besides the expert rows (`moekit gen inverse`, `moekit gen
// topk-weights`; the rows: `moekit gen combine`).
#pragma once

#include <cstdint>

#include "npy.hpp"

namespace moekit::gen {

// int32 [tokens, topk]: a one-to-one map of the T*K slots onto the rows
// 0..T*K-1 of the expert output, shuffled (as permute's compact layout writes
// it, up to the order of the rows).
npy::Array combine_inverse(std::int64_t tokens, std::int32_t topk, std::uint64_t seed);

// float32 [tokens, topk]: positive, each row descending and summing to 1 (a
// renormalized top-k router's weights, largest first).
npy::Array topk_weights(std::int64_t tokens, std::int32_t topk, std::uint64_t seed);

}  // namespace moekit::gen
