// Synthetic router logits (`moekit gen route`, `moekit route --tokens ...`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npy.hpp"

namespace moekit::gen {

// [tokens, E] logits in f32, bf16 or f16. dist "uniform": independent
// standard-normal logits; "load:FILE[:LAYER]": log(load share) + Gumbel noise,
// so that the top-k of each row is a draw of k distinct experts with
// probabilities proportional to the recorded load (the Gumbel-top-k trick).
npy::Array route_logits(std::int64_t tokens, std::int32_t experts, npy::DType dtype, const std::string& dist,
                        std::uint64_t seed);

// [E] f32 correction bias, 0.1 x standard normal.
npy::Array route_bias(std::int32_t experts, std::uint64_t seed);

// f32, bf16 or f16 logits widened to f32 (what the reference and checker
// read). Throws InputError naming `label` and the position of the first NaN
// or infinity.
std::vector<float> logits_as_f32(const npy::Array& a, const std::string& label);

}  // namespace moekit::gen
