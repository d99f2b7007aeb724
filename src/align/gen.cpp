#include "align/gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <unordered_set>
#include <vector>

#include "errors.hpp"
#include "gen_common.hpp"

namespace moekit::gen {

ExpertDist parse_dist(const std::string& s) {
  ExpertDist d;
  if (s == "uniform") return d;
  auto colon = s.find(':');
  std::string kind = s.substr(0, colon);
  if (colon == std::string::npos) throw InputError(fmt::format("--dist: '{}' needs a parameter (zipf:S, hot:F)", s));
  d.param = parse_number(s.substr(colon + 1), "--dist " + s);
  if (kind == "zipf") {
    if (d.param < 0) throw InputError("--dist zipf:S needs S >= 0");
    d.kind = ExpertDist::zipf;
  } else if (kind == "hot") {
    if (d.param < 0 || d.param > 1) throw InputError("--dist hot:F needs 0 <= F <= 1");
    d.kind = ExpertDist::hot;
  } else {
    throw InputError(fmt::format("--dist: unknown distribution '{}' (uniform, zipf:S, hot:F)", s));
  }
  return d;
}

npy::Array align_ids(std::int64_t tokens, std::int32_t topk, std::int32_t num_experts,
                     const ExpertDist& dist, std::uint64_t seed, bool int64) {
  if (tokens < 0) throw InputError("--tokens must be >= 0");
  if (num_experts < 1) throw InputError("--num-experts must be >= 1");
  if (topk < 1 || topk > num_experts)
    throw InputError(fmt::format("--topk must be in [1, {}] (each token's experts are distinct)",
                                 num_experts));
  // align indexes token slots in int32: a larger trace could never be used.
  check_size(double(tokens) * topk, "an align trace", kInt32Max);
  std::mt19937_64 rng(seed);
  // Written straight into the output array (no wide copy of the whole trace).
  npy::Array a;
  a.shape = {tokens, topk};
  a.dtype = int64 ? npy::DType::i8 : npy::DType::i4;
  a.data.resize(static_cast<std::size_t>(tokens) * topk * (int64 ? 8 : 4));
  std::vector<std::int64_t> row_buf(static_cast<std::size_t>(topk));

  // Zipf: popularity 1/rank^S, ranks assigned to experts by a seeded shuffle.
  std::vector<double> cdf;
  std::vector<std::int32_t> perm(num_experts);
  std::iota(perm.begin(), perm.end(), 0);
  if (dist.kind == ExpertDist::zipf) {
    std::shuffle(perm.begin(), perm.end(), rng);
    cdf.resize(num_experts);
    double acc = 0;
    for (std::int32_t r = 0; r < num_experts; ++r) cdf[r] = (acc += 1.0 / std::pow(r + 1.0, dist.param));
    for (auto& c : cdf) c /= acc;
  }
  std::uniform_int_distribution<std::int32_t> uni(0, num_experts - 1);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  auto draw = [&]() -> std::int32_t {
    if (dist.kind == ExpertDist::zipf) {
      auto it = std::lower_bound(cdf.begin(), cdf.end(), u01(rng));
      std::size_t r = std::min<std::size_t>(it - cdf.begin(), num_experts - 1);
      return perm[r];
    }
    return uni(rng);
  };
  // Dense "taken" marks make distinctness O(topk) per token even when topk ~ E;
  // rejection stays cheap while most experts are free, and we fall back to a
  // scan of free experts when it is not.
  std::vector<std::uint8_t> taken(num_experts, 0);
  for (std::int64_t t = 0; t < tokens; ++t) {
    std::int64_t* row = row_buf.data();
    int n = 0;
    if (dist.kind == ExpertDist::hot && u01(rng) < dist.param) {
      row[n++] = 0;
      taken[0] = 1;
    }
    while (n < topk) {
      std::int32_t e = -1;
      for (int tries = 0; tries < 64 && e < 0; ++tries) {
        std::int32_t c = draw();
        if (!taken[c]) e = c;
      }
      if (e < 0) {  // heavily skewed and nearly full: take a uniformly chosen free expert
        std::vector<std::int32_t> free_e;
        for (std::int32_t c = 0; c < num_experts; ++c)
          if (!taken[c]) free_e.push_back(c);
        e = free_e[std::uniform_int_distribution<std::size_t>(0, free_e.size() - 1)(rng)];
      }
      taken[e] = 1;
      row[n++] = e;
    }
    std::shuffle(row, row + topk, rng);  // the hot expert is not always first
    for (int j = 0; j < topk; ++j) taken[row[j]] = 0;
    const std::size_t at = static_cast<std::size_t>(t) * topk;
    if (int64) {
      std::memcpy(a.as<std::int64_t>().data() + at, row, static_cast<std::size_t>(topk) * 8);
    } else {
      auto out = a.as<std::int32_t>().data() + at;
      for (int j = 0; j < topk; ++j) out[j] = static_cast<std::int32_t>(row[j]);
    }
  }
  return a;
}

}  // namespace moekit::gen
