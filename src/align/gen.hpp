// Synthetic router traces (`moekit gen align`, `moekit align --tokens ...`).
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

}  // namespace moekit::gen
