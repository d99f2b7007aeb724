#include "gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_set>
#include <vector>

#include "errors.hpp"
#include "half.hpp"

namespace moekit::gen {
namespace {

double parse_number(const std::string& s, const std::string& what) {
  try {
    std::size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (...) {
  }
  throw InputError(fmt::format("--dist: bad number '{}' in {}", s, what));
}

constexpr double kInt32Max = double(std::numeric_limits<std::int32_t>::max());

// Guards against asking for more memory than a sane input needs. `limit` is the
// most elements the op can take at all (align and dedup index in int32).
void check_size(double elements, const char* what, double limit = kInt32Max * 4) {
  if (elements > limit)
    throw InputError(fmt::format("gen {}: {:.0f} elements is too large (at most {:.0f})", what, elements, limit));
}

}  // namespace

ExpertDist parse_dist(const std::string& s) {
  ExpertDist d;
  if (s == "uniform") return d;
  auto colon = s.find(':');
  std::string kind = s.substr(0, colon);
  if (colon == std::string::npos) throw InputError(fmt::format("--dist: '{}' needs a parameter (zipf:S, hot:F)", s));
  d.param = parse_number(s.substr(colon + 1), s);
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
  if (tokens < 0) throw InputError("gen align: --tokens must be >= 0");
  if (num_experts < 1) throw InputError("gen align: --num-experts must be >= 1");
  if (topk < 1 || topk > num_experts)
    throw InputError(fmt::format("gen align: --topk must be in [1, {}] (each token's experts are distinct)",
                                 num_experts));
  // align indexes token slots in int32: a larger trace could never be used.
  check_size(double(tokens) * topk, "align", kInt32Max);
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

npy::Array dedup_indices(std::int32_t batch, std::int32_t mtp_step, std::int32_t k,
                         std::int64_t max_index, double overlap, double pad, std::uint64_t seed) {
  if (batch < 0) throw InputError("gen dedup: --batch must be >= 0");
  if (mtp_step < 1) throw InputError("gen dedup: --mtp-step must be >= 1");
  if (k < 1) throw InputError("gen dedup: --k must be >= 1");
  if (max_index < 1 || max_index > (std::int64_t(1) << 31))
    throw InputError("gen dedup: --max-index must be in [1, 2^31]");
  if (!(overlap >= 0 && overlap <= 1)) throw InputError("gen dedup: --overlap must be in [0, 1]");
  if (!(pad >= 0 && pad <= 1)) throw InputError("gen dedup: --pad must be in [0, 1]");
  // A batch row (M*k values) is indexed in int32 by every dedup variant.
  check_size(double(mtp_step) * k, "dedup (values per batch, M*k)", kInt32Max);
  check_size(double(batch) * mtp_step * k, "dedup");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::int64_t> val(0, max_index - 1);
  const bool distinct = max_index >= 2 * std::int64_t(k);  // rejection stays cheap
  std::vector<std::int32_t> v(static_cast<std::size_t>(batch) * mtp_step * k);
  std::vector<std::int32_t> prev(k), row(k);
  std::unordered_set<std::int32_t> seen;
  const int keep = static_cast<int>(std::lround(overlap * k));
  const int pads = static_cast<int>(std::lround(pad * k));
  for (std::int32_t b = 0; b < batch; ++b) {
    for (std::int32_t m = 0; m < mtp_step; ++m) {
      seen.clear();
      int n = 0;
      if (m > 0 && keep > 0) {  // carry over a random subset of the previous step's values
        std::vector<std::int32_t> carry(prev.begin(), prev.end());
        std::shuffle(carry.begin(), carry.end(), rng);
        for (int i = 0; i < k && n < keep; ++i) {
          if (carry[i] < 0) continue;
          if (distinct && !seen.insert(carry[i]).second) continue;
          row[n++] = carry[i];
        }
      }
      while (n < k) {
        auto x = static_cast<std::int32_t>(val(rng));
        if (distinct && !seen.insert(x).second) continue;
        row[n++] = x;
      }
      std::shuffle(row.begin(), row.end(), rng);
      prev = row;
      for (int i = k - pads; i < k; ++i) row[i] = -1;
      std::copy(row.begin(), row.end(), v.begin() + (static_cast<std::size_t>(b) * mtp_step + m) * k);
    }
  }
  npy::Array a;
  a.dtype = npy::DType::i4;
  a.shape = {std::int64_t(batch) * mtp_step, k};
  a.data.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

npy::Array act_input(std::int64_t tokens, std::int64_t d, npy::DType dtype, std::uint64_t seed) {
  if (tokens < 0) throw InputError("gen act-and-mul: --tokens must be >= 0");
  if (d < 1) throw InputError("gen act-and-mul: --d must be >= 1");
  if (dtype != npy::DType::f2 && dtype != npy::DType::bf16 && dtype != npy::DType::f4)
    throw InputError("gen act-and-mul: --dtype must be f16, bf16 or f32");
  // Also bounds one row on its own, so 2*d cannot overflow when tokens is 0.
  check_size(2.0 * double(d), "act-and-mul (row width 2*d)");
  check_size(double(tokens) * 2 * d, "act-and-mul");
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::size_t n = static_cast<std::size_t>(tokens) * 2 * d;
  npy::Array a;
  a.dtype = dtype;
  a.shape = {tokens, 2 * d};
  a.data.resize(n * npy::dtype_size(dtype));
  if (dtype == npy::DType::f4) {
    auto o = a.as<float>();
    for (std::size_t i = 0; i < n; ++i) o[i] = nd(rng);
  } else {
    auto o = a.as<std::uint16_t>();
    const bool f16 = dtype == npy::DType::f2;
    for (std::size_t i = 0; i < n; ++i) {
      float x = nd(rng);
      o[i] = f16 ? f32_to_f16_bits(x) : f32_to_bf16_bits(x);
    }
  }
  return a;
}

}  // namespace moekit::gen
