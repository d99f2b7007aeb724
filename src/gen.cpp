#include "gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
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

// ---- random numbers ----------------------------------------------------------
// SplitMix64 used as a counter-based generator: number i of a stream is
// mix64(key + (i + 1) * gamma), so a row or an element can be drawn without
// generating what comes before it, and every draw is a few multiplications.
constexpr std::uint64_t kGamma = 0x9e3779b97f4a7c15ull;

inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Unrelated keys for the generators that share a seed.
std::uint64_t stream_key(std::uint64_t seed, std::uint64_t stream) { return mix64(mix64(seed) ^ (stream * kGamma)); }

inline std::uint64_t counter_at(std::uint64_t key, std::uint64_t i) { return mix64(key + (i + 1) * kGamma); }

// A short sequential stream (one token's or one row's draws), started at a
// counter-based point.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() { return mix64(s += kGamma); }
  // Uniform in [0, n), n >= 1 (multiply-shift; bias below n / 2^64).
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

// Several small uniform indices from one random number: an index is the high
// part of x * bound and the low part carries on as the next x; a fresh number
// comes before the bounds' product passes 2^32, so each index keeps at least
// 32 bits of randomness (bias below bound / 2^32).
struct IndexStream {
  Rng& rng;
  std::uint64_t x = 0, used = std::uint64_t{1} << 32;
  std::uint64_t below(std::uint64_t bound) {  // 1 <= bound < 2^32
    if (used > (std::uint64_t{1} << 32) / bound) x = rng.next(), used = 1;
    used *= bound;
    const unsigned __int128 m = static_cast<unsigned __int128>(x) * bound;
    x = static_cast<std::uint64_t>(m);
    return static_cast<std::uint64_t>(m >> 64);
  }
};

template <class T>
void shuffle(T* v, std::size_t n, Rng& rng) {
  IndexStream idx{rng};
  for (std::size_t j = n; j > 1; --j) std::swap(v[j - 1], v[idx.below(j)]);
}

// ---- normal values -----------------------------------------------------------
// Approximately standard normal from 32 random bits: the top 12 bits pick one
// of 4096 equal-probability bins of the normal distribution, the low 20 bits
// place the value linearly between the bin's exact quantiles. The two outer
// bins (|x| > 3.49, 1 draw in 2048) use the tail x = sqrt(a^2 - 2 ln w),
// reaching about 6.3. Mean 0 and symmetric by construction, variance 1 within
// 1e-3, no table lookups beyond 32 KiB.
struct NormalTable {
  static constexpr int kBits = 12, kBins = 1 << kBits;
  float q[kBins + 1];  // q[j] = Phi^-1(j / kBins); q[0] and q[kBins] unused
  float a2;            // q[1]^2: start of the tail
  NormalTable() {
    for (int j = 1; j <= kBins / 2; ++j) {
      const double p = double(j) / kBins;
      double lo = -10, hi = 0;  // Phi(x) = erfc(-x / sqrt 2) / 2 is increasing: bisect
      for (int it = 0; it < 64; ++it) {
        const double mid = (lo + hi) / 2;
        (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
      }
      q[j] = static_cast<float>(j == kBins / 2 ? 0.0 : (lo + hi) / 2);
      q[kBins - j] = -q[j];
    }
    q[0] = q[1];
    q[kBins] = q[kBins - 1];
    a2 = q[1] * q[1];
  }
  float operator()(std::uint32_t u) const {
    const std::uint32_t bin = u >> (32 - kBits);
    const float f = static_cast<float>(u & ((1u << (32 - kBits)) - 1)) * (1.0f / float(1u << (32 - kBits)));
    if (bin == 0 || bin == kBins - 1) [[unlikely]] {
      const float w = f + 0.5f / float(1u << (32 - kBits));  // (0, 1]
      const float x = std::sqrt(a2 - 2.0f * std::log(w));
      return bin == 0 ? -x : x;
    }
    return q[bin] + f * (q[bin + 1] - q[bin]);
  }
};

const NormalTable& normal_table() {
  static const NormalTable t;
  return t;
}

// Round to nearest even, as f32_to_bf16_bits / f32_to_f16_bits do, without
// the double round trip; values outside the fast path (never NaN here, f16
// subnormals and overflow) take the exact general conversion.
inline std::uint16_t to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline std::uint16_t to_f16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t a = u & 0x7fffffffu;
  if (a < 0x38800000u || a >= 0x477ff000u) [[unlikely]]
    return f32_to_f16_bits(x);  // below 2^-14 (subnormal) or rounds to infinity
  const std::uint32_t h = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13;
  return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | h);
}

// Open-addressing set of non-negative int32 values, emptied in time
// proportional to what was inserted.
class SmallSet {
 public:
  explicit SmallSet(std::size_t n) {
    std::size_t cap = 16;
    while (cap < 4 * n) cap *= 2;  // short probes: few mispredicted branches
    slots_.assign(cap, -1);
    mask_ = cap - 1;
  }
  bool insert(std::int32_t x) {
    std::size_t h = (static_cast<std::uint32_t>(x) * 0x9e3779b1u) & mask_;
    while (slots_[h] >= 0) {
      if (slots_[h] == x) return false;
      h = (h + 1) & mask_;
    }
    slots_[h] = x;
    used_.push_back(h);
    return true;
  }
  void clear() {
    for (auto h : used_) slots_[h] = -1;
    used_.clear();
  }

 private:
  std::vector<std::int32_t> slots_;
  std::vector<std::size_t> used_;
  std::size_t mask_ = 0;
};

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
  // Each token draws from its own counter-based stream (see Rng).
  const std::uint64_t key = stream_key(seed, 1);
  npy::Array a;
  a.shape = {tokens, topk};
  a.dtype = int64 ? npy::DType::i8 : npy::DType::i4;
  a.data.resize(static_cast<std::size_t>(tokens) * topk * (int64 ? 8 : 4));
  std::vector<std::int32_t> row_buf(static_cast<std::size_t>(topk));
  const auto E = static_cast<std::uint64_t>(num_experts);

  // Zipf: popularity 1/rank^S, ranks assigned to experts by a seeded shuffle,
  // sampled in O(1) from an alias table (Vose): one random number picks a
  // column i and, by its low 64 product bits, i itself or alias[i].
  std::vector<std::int32_t> perm, alias;
  std::vector<std::uint64_t> keep;
  struct Column {  // one cache access per draw, and a select instead of a branch
    std::uint64_t keep;
    std::int32_t expert, alias;
  };
  std::vector<Column> cols;
  if (dist.kind == ExpertDist::zipf) {
    Rng setup{mix64(key)};
    perm.resize(E);
    std::iota(perm.begin(), perm.end(), 0);
    for (std::uint64_t i = E; i > 1; --i) std::swap(perm[i - 1], perm[setup.below(i)]);
    std::vector<double> p(E);
    double sum = 0;
    for (std::uint64_t r = 0; r < E; ++r) sum += (p[r] = 1.0 / std::pow(double(r) + 1.0, dist.param));
    for (auto& x : p) x *= double(E) / sum;
    alias.resize(E);
    keep.assign(E, ~std::uint64_t{0});
    std::vector<std::int32_t> small, large;
    for (std::uint64_t r = 0; r < E; ++r) (p[r] < 1.0 ? small : large).push_back(static_cast<std::int32_t>(r));
    while (!small.empty() && !large.empty()) {
      const std::int32_t s_ = small.back(), l = large.back();
      small.pop_back();
      keep[s_] = static_cast<std::uint64_t>(std::ldexp(std::max(p[s_], 0.0), 64));  // p < 1: fits
      alias[s_] = l;
      p[l] -= 1.0 - p[s_];
      if (p[l] < 1.0) {
        large.pop_back();
        small.push_back(l);
      }
    }
    for (auto r : small) alias[r] = r;  // rounding leftovers: keep all
    for (auto r : large) alias[r] = r;
    for (auto& x : alias) x = perm[static_cast<std::size_t>(x)];  // ranks -> experts
    cols.resize(E);
    for (std::uint64_t r = 0; r < E; ++r) cols[r] = {keep[r], perm[r], alias[r]};
  }
  auto draw = [&](Rng& rng) -> std::int32_t {
    if (dist.kind == ExpertDist::zipf) {
      const unsigned __int128 m = static_cast<unsigned __int128>(rng.next()) * E;
      const auto col = static_cast<std::size_t>(m >> 64);
      const Column& c = cols[col];
      return static_cast<std::uint64_t>(m) < c.keep ? c.expert : c.alias;
    }
    return static_cast<std::int32_t>(rng.below(E));
  };
  // Dense "taken" marks make distinctness O(topk) per token even when topk ~ E;
  // rejection stays cheap while most experts are free, and we fall back to a
  // scan of free experts when it is not.
  std::vector<std::uint8_t> taken(E, 0);
  for (std::int64_t t = 0; t < tokens; ++t) {
    Rng rng{counter_at(key, static_cast<std::uint64_t>(t))};
    std::int32_t* row = row_buf.data();
    int n = 0;
    if (dist.kind == ExpertDist::hot && rng.unit() < dist.param) {
      row[n++] = 0;
      taken[0] = 1;
    }
    // Rejection without a branch on the (unpredictable) outcome: a taken
    // expert is written and then overwritten.
    for (int tries = 0; n < topk; ++tries) {
      if (tries == 64 * topk) {  // heavily skewed and nearly full: uniformly chosen free experts
        std::vector<std::int32_t> free_e;
        for (std::int32_t c = 0; c < num_experts; ++c)
          if (!taken[c]) free_e.push_back(c);
        while (n < topk) {
          const auto at = rng.below(free_e.size());
          row[n++] = free_e[at];
          taken[free_e[at]] = 1;
          free_e.erase(free_e.begin() + static_cast<std::ptrdiff_t>(at));
        }
        break;
      }
      const std::int32_t c = draw(rng);
      const bool fresh = !taken[c];
      row[n] = c;
      taken[c] = 1;
      n += fresh;
    }
    // Shuffled: the hot expert is not always first.
    shuffle(row, static_cast<std::size_t>(topk), rng);
    for (int j = 0; j < topk; ++j) taken[row[j]] = 0;
    const std::size_t at = static_cast<std::size_t>(t) * topk;
    if (int64) {
      auto out = a.as<std::int64_t>().data() + at;
      for (int j = 0; j < topk; ++j) out[j] = row[j];
    } else {
      std::memcpy(a.as<std::int32_t>().data() + at, row, static_cast<std::size_t>(topk) * 4);
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
  // Each (batch, step) row draws from its own counter-based stream (see Rng).
  const std::uint64_t key = stream_key(seed, 2);
  const bool distinct = max_index >= 2 * std::int64_t(k);  // rejection stays cheap
  npy::Array a;
  a.dtype = npy::DType::i4;
  a.shape = {std::int64_t(batch) * mtp_step, k};
  a.data.resize(static_cast<std::size_t>(batch) * mtp_step * k * 4);
  const auto out = a.as<std::int32_t>();
  std::vector<std::int32_t> prev(k), row(k), carry(k);
  SmallSet seen(distinct ? static_cast<std::size_t>(k) : 0);
  const int keep = static_cast<int>(std::lround(overlap * k));
  const int pads = static_cast<int>(std::lround(pad * k));
  for (std::int32_t b = 0; b < batch; ++b) {
    for (std::int32_t m = 0; m < mtp_step; ++m) {
      const std::size_t r = static_cast<std::size_t>(b) * mtp_step + m;
      Rng rng{counter_at(key, r)};
      int n = 0;
      if (m > 0 && keep > 0) {  // carry over a random subset of the previous step's values
        carry = prev;
        // Fisher-Yates, only as far as needed.
        IndexStream idx{rng};
        for (int i = 0; i < k && n < keep; ++i) {
          std::swap(carry[i], carry[i + idx.below(static_cast<std::uint64_t>(k - i))]);
          if (carry[i] < 0) continue;
          if (distinct && !seen.insert(carry[i])) continue;
          row[n++] = carry[i];
        }
      }
      while (n < k) {
        const auto x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(max_index)));
        if (distinct && !seen.insert(x)) continue;
        row[n++] = x;
      }
      seen.clear();
      shuffle(row.data(), row.size(), rng);
      std::int32_t* o = out.data() + r * k;
      std::copy(row.begin(), row.end(), o);
      for (int i = k - pads; i < k; ++i) o[i] = -1;
      std::swap(prev, row);  // the next step carries from the unpadded row
    }
  }
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
  // Element i is normal_table()(half of random number i/2 of the stream):
  // approximately standard normal (see NormalTable), the same for a seed
  // whatever the dtype, and about 1 ns per element.
  const std::uint64_t key = stream_key(seed, 3);
  const NormalTable& nt = normal_table();
  const std::size_t n = static_cast<std::size_t>(tokens) * 2 * d;
  npy::Array a;
  a.dtype = dtype;
  a.shape = {tokens, 2 * d};
  a.data.resize(n * npy::dtype_size(dtype));
  const auto fill = [&](auto* o, auto convert) {
    for (std::size_t i = 0; i + 1 < n; i += 2) {
      const std::uint64_t r = counter_at(key, i / 2);
      o[i] = convert(nt(static_cast<std::uint32_t>(r >> 32)));
      o[i + 1] = convert(nt(static_cast<std::uint32_t>(r)));
    }
    if (n % 2) o[n - 1] = convert(nt(static_cast<std::uint32_t>(counter_at(key, (n - 1) / 2) >> 32)));
  };
  if (dtype == npy::DType::f4) {
    fill(a.as<float>().data(), [](float x) { return x; });
  } else if (dtype == npy::DType::f2) {
    fill(a.as<std::uint16_t>().data(), to_f16);
  } else {
    fill(a.as<std::uint16_t>().data(), to_bf16);
  }
  return a;
}

}  // namespace moekit::gen
