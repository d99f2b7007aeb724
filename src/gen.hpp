// Synthetic inputs for the three ops (the `gen` command, and kernel commands
// run without an input file). Deterministic for a given seed on one platform.
#pragma once

#include <cstdint>
#include <string>

#include "npy.hpp"

namespace moekit::gen {

// "uniform", "zipf:S" (expert popularity ~ 1/rank^S over a seeded permutation)
// or "hot:F" (each token routes to expert 0 with probability F).
struct ExpertDist {
  enum Kind { uniform, zipf, hot } kind = uniform;
  double param = 0;
};
ExpertDist parse_dist(const std::string& s);  // throws InputError

// [tokens, topk] ids, each token's topk experts distinct (needs topk <= E).
npy::Array align_ids(std::int64_t tokens, std::int32_t topk, std::int32_t num_experts,
                     const ExpertDist& dist, std::uint64_t seed, bool int64);

// [batch*mtp_step, k] int32. Row r+1 of a batch keeps a fraction `overlap` of
// row r's values (like consecutive speculative steps); values within a row are
// distinct when max_index >= k; a fraction `pad` of each row's tail is -1.
npy::Array dedup_indices(std::int32_t batch, std::int32_t mtp_step, std::int32_t k,
                         std::int64_t max_index, double overlap, double pad, std::uint64_t seed);

// [tokens, 2d] standard-normal values in f16, bf16 or f32.
npy::Array act_input(std::int64_t tokens, std::int64_t d, npy::DType dtype, std::uint64_t seed);

}  // namespace moekit::gen
