// The router trace of the align benchmarks (bench_align, probe_align): every
// token picks `topk` distinct experts, uniformly or zipf(1.2) over a shuffled
// expert order. Header-only so the .cpp bench and the .cu probe share it and
// draw identical ids from the same seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace moekit::bench {

inline std::vector<std::int32_t> align_ids(int num_experts, int topk, bool zipf, int tokens,
                                           std::mt19937_64& rng) {
  std::vector<double> cdf(static_cast<std::size_t>(num_experts));
  double s = 0;
  for (int r = 0; r < num_experts; ++r) cdf[r] = (s += zipf ? 1.0 / std::pow(r + 1.0, 1.2) : 1.0);
  std::vector<int> perm(static_cast<std::size_t>(num_experts));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::uniform_real_distribution<double> u(0, s);
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(tokens) * topk);
  std::vector<int> mine;
  for (int t = 0; t < tokens; ++t) {
    mine.clear();
    while (static_cast<int>(mine.size()) < topk) {  // distinct experts per token
      const auto r = std::lower_bound(cdf.begin(), cdf.end(), u(rng)) - cdf.begin();
      const int e = perm[std::min<std::size_t>(r, cdf.size() - 1)];
      if (std::find(mine.begin(), mine.end(), e) == mine.end()) mine.push_back(e);
    }
    ids.insert(ids.end(), mine.begin(), mine.end());
  }
  return ids;
}

}  // namespace moekit::bench
