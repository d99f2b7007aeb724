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

// Router logits read from a .npy file (what `--logits` takes): f32, bf16 or
// f16 (`reinterpret` "bf16"/"f16" reads 2-byte data saved as int16/uint16/void;
// "" = as stored), 2-D [T, E] with E in [1, route::kMaxExperts] and, when
// `experts` is not 0, equal to it (`experts_what` names where it came from:
// "-E"). Throws InputError naming the file.
npy::Array read_logits(const std::string& path, const std::string& reinterpret, std::int32_t experts,
                       const std::string& experts_what);

// A correction bias read from a .npy file (`--correction-bias`): f32 [experts],
// every value finite. Throws InputError naming the file.
std::vector<float> read_bias(const std::string& path, std::int32_t experts);

}  // namespace moekit::gen
