// Synthetic router traces (`moekit gen align`, `moekit align --tokens ...`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "npy.hpp"

namespace moekit::gen {

// "uniform", "zipf:S" (expert popularity ~ 1/rank^S over a seeded permutation),
// "hot:F" (each token routes to expert 0 with probability F), or
// "load:FILE[:LAYER]": expert e drawn with probability proportional to a
// recorded per-expert load (FILE: [E] or [layers, E], int or float .npy; a
// 2-D file without LAYER uses the sum over layers).
struct ExpertDist {
  enum Kind { uniform, zipf, hot, load } kind = uniform;
  double param = 0;
  std::vector<double> weights;  // load: one non-negative weight per expert
  std::string source;           // load: "FILE" or "FILE:LAYER", for messages
};
ExpertDist parse_dist(const std::string& s);  // throws InputError

// [tokens, topk] ids, each token's topk experts distinct (needs topk <= E).
npy::Array align_ids(std::int64_t tokens, std::int32_t topk, std::int32_t num_experts,
                     const ExpertDist& dist, std::uint64_t seed, bool int64);

}  // namespace moekit::gen

namespace moekit::gen {

// An expert-parallel rank's expert map (`moekit gen expert-map`): int32
// [global], entry e = the rank's local id of global expert e, -1 where
// another rank holds it. `round_robin`: rank r holds experts e with
// e % ranks == r (local id e / ranks); otherwise contiguous ranges, the first
// global % ranks ranks one expert more. Not random.
npy::Array expert_map(std::int64_t global, std::int64_t ranks, std::int64_t rank, bool round_robin);

// Per-expert loads as a recorded trace gives them (`moekit gen load`, for
// `--dist load:FILE[:LAYER]`): int64 [layers, E], row l = the slot count of
// each expert in a [tokens, topk] trace drawn from `dist` with layer l's own
// seed, so layers differ where the distribution has a seeded part (zipf).
npy::Array expert_load(std::int64_t tokens, std::int32_t topk, std::int32_t num_experts, std::int64_t layers,
                       const ExpertDist& dist, std::uint64_t seed);

}  // namespace moekit::gen
