// ep's generated inputs: which seed each rank draws with (`moekit ep` without
// input files, `moekit gen ep`, bench_ep).
#pragma once

#include <cstdint>

#include "gen_common.hpp"

namespace moekit::ep {

// Rank 0 draws with the seed itself, so a one-rank run draws what `gen align`,
// `gen topk-weights` and `gen ep` draw; rank r > 0 with stream r of it.
inline std::uint64_t rank_seed(std::uint64_t seed, int r) {
  return r == 0 ? seed : gen::stream_key(seed, std::uint64_t(r));
}

}  // namespace moekit::ep
