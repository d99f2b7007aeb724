#include "align/gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_set>
#include <vector>

#include "align/align.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"

namespace moekit::gen {

namespace {

// "load:FILE[:LAYER]": the weights of one layer (or the sum of all) of a load file.
ExpertDist parse_load(const std::string& spec) {
  ExpertDist d;
  d.kind = ExpertDist::load;
  std::string file = spec;
  std::int64_t layer = -1;
  if (const auto c = spec.rfind(':'); c != std::string::npos && c + 1 < spec.size() &&
                                      spec.find_first_not_of("0123456789", c + 1) == std::string::npos) {
    file = spec.substr(0, c);
    layer = std::stoll(spec.substr(c + 1).substr(0, 18));
  }
  d.source = display_path(spec);
  const npy::Array a = npy::read(file);
  if (a.shape.empty() || a.shape.size() > 2 || a.shape.back() < 1)
    throw InputError(fmt::format("--dist load:{}: a load vector must be [E] or [layers, E], got {} dimension(s)",
                                 d.source, a.shape.size()));
  const std::int64_t E = a.shape.back(), layers = a.shape.size() == 2 ? a.shape[0] : 1;
  if (layer >= layers)
    throw InputError(fmt::format("--dist load:{}: layer {} is outside [0, {})", d.source, layer, layers));
  auto value = [&](std::int64_t i) -> double {
    switch (a.dtype) {
      case npy::DType::i4: return a.as<std::int32_t>()[i];
      case npy::DType::i8: return double(a.as<std::int64_t>()[i]);
      case npy::DType::f4: return a.as<float>()[i];
      case npy::DType::f8: return a.as<double>()[i];
      default:
        throw InputError(fmt::format("--dist load:{}: loads must be int32, int64, float32 or float64, got {}",
                                     d.source, npy::dtype_name(a.dtype)));
    }
  };
  d.weights.assign(static_cast<std::size_t>(E), 0.0);
  for (std::int64_t l = layer < 0 ? 0 : layer; l < (layer < 0 ? layers : layer + 1); ++l)
    for (std::int64_t e = 0; e < E; ++e) {
      const double w = value(l * E + e);
      if (!(w >= 0) || !std::isfinite(w))
        throw InputError(fmt::format("--dist load:{}: load {} of expert {} (layer {}) is not a finite number >= 0",
                                     d.source, w, e, l));
      d.weights[static_cast<std::size_t>(e)] += w;
    }
  if (std::all_of(d.weights.begin(), d.weights.end(), [](double w) { return w == 0; }))
    throw InputError(fmt::format("--dist load:{}: every load is 0 (a dense layer?)", d.source));
  return d;
}

}  // namespace

ExpertDist parse_dist(const std::string& s) {
  ExpertDist d;
  if (s == "uniform") return d;
  if (s.rfind("load:", 0) == 0) return parse_load(s.substr(5));
  auto colon = s.find(':');
  std::string kind = s.substr(0, colon);
  if (colon == std::string::npos)
    throw InputError(fmt::format("--dist: '{}' needs a parameter (zipf:S, hot:F, load:FILE[:LAYER])", printable(s)));
  d.param = parse_number(s.substr(colon + 1), "--dist " + printable(s));
  if (kind == "zipf") {
    if (d.param < 0) throw InputError("--dist zipf:S needs S >= 0");
    d.kind = ExpertDist::zipf;
  } else if (kind == "hot") {
    if (d.param < 0 || d.param > 1) throw InputError("--dist hot:F needs 0 <= F <= 1");
    d.kind = ExpertDist::hot;
  } else {
    throw InputError(fmt::format("--dist: unknown distribution '{}' (uniform, zipf:S, hot:F, load:FILE[:LAYER])", printable(s)));
  }
  return d;
}

npy::Array align_ids(std::int64_t tokens, std::int32_t topk, std::int32_t num_experts,
                     const ExpertDist& dist, std::uint64_t seed, bool int64) {
  if (tokens < 0) throw InputError("--tokens must be >= 0");
  if (num_experts < 1 || num_experts > align::kMaxExperts)
    throw InputError(fmt::format("--num-experts must be in [1, {}] (no align variant takes more)", align::kMaxExperts));
  if (topk < 1 || topk > num_experts)
    throw InputError(fmt::format("--topk must be in [1, {}] (each token's experts are distinct)",
                                 num_experts));
  // align indexes token slots in int32: a larger trace could never be used.
  check_size(double(tokens) * topk, "an align trace", kInt32Max);
  require_host_memory(double(tokens) * topk * (int64 ? 8 : 4), "this align trace");
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
  if (dist.kind == ExpertDist::load && dist.weights.size() != E)
    throw InputError(fmt::format("--dist load:{}: {} loads for --num-experts {}", dist.source, dist.weights.size(), E));
  if (dist.kind == ExpertDist::zipf || dist.kind == ExpertDist::load) {
    perm.resize(E);
    std::iota(perm.begin(), perm.end(), 0);
    std::vector<double> p(E);
    double sum = 0;
    if (dist.kind == ExpertDist::zipf) {  // ranks dealt to experts by a seeded shuffle
      Rng setup{mix64(key)};
      for (std::uint64_t i = E; i > 1; --i) std::swap(perm[i - 1], perm[setup.below(i)]);
      for (std::uint64_t r = 0; r < E; ++r) sum += (p[r] = 1.0 / std::pow(double(r) + 1.0, dist.param));
    } else {  // a recorded load: rank r is expert r
      for (std::uint64_t r = 0; r < E; ++r) sum += (p[r] = dist.weights[r]);
    }
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
    if (!cols.empty()) {  // zipf or load: the alias table
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

}  // namespace moekit::gen

namespace moekit::gen {

npy::Array expert_map(std::int64_t global, std::int64_t ranks, std::int64_t rank, bool round_robin) {
  if (global < 1 || global > align::kMaxMapSize)
    throw InputError(fmt::format("--global-experts must be in [1, {}] (an expert map's length), got {}",
                                 align::kMaxMapSize, global));
  if (ranks < 1 || ranks > global)
    throw InputError(fmt::format("--ranks must be in [1, --global-experts {}], got {}", global, ranks));
  if (rank < 0 || rank >= ranks)
    throw InputError(fmt::format("--rank must be in [0, --ranks {}), got {}", ranks, rank));
  npy::Array a;
  a.dtype = npy::DType::i4;
  a.shape = {global};
  a.data.resize(static_cast<std::size_t>(global) * 4);
  auto m = a.as<std::int32_t>();
  // Contiguous: `base` experts a rank, the first `extra` ranks one more.
  const std::int64_t base = global / ranks, extra = global % ranks;
  const std::int64_t first = rank * base + std::min(rank, extra), count = base + (rank < extra);
  for (std::int64_t e = 0; e < global; ++e) {
    const std::int64_t local = round_robin ? (e % ranks == rank ? e / ranks : -1)
                                           : (e >= first && e < first + count ? e - first : -1);
    m[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(local);
  }
  return a;
}

npy::Array expert_load(std::int64_t tokens, std::int32_t topk, std::int32_t num_experts, std::int64_t layers,
                       const ExpertDist& dist, std::uint64_t seed) {
  if (layers < 1 || layers > 4096) throw InputError(fmt::format("--layers must be in [1, 4096], got {}", layers));
  if (num_experts < 1 || num_experts > align::kMaxExperts)
    throw InputError(fmt::format("--num-experts must be in [1, {}]", align::kMaxExperts));
  // Every layer's trace is drawn in turn: bound the whole work, not one layer.
  check_size(double(tokens) * topk * double(layers), "slots over all layers", kInt32Max);
  npy::Array a;
  a.dtype = npy::DType::i8;
  a.shape = {layers, num_experts};
  a.data.resize(static_cast<std::size_t>(layers) * static_cast<std::size_t>(num_experts) * 8);  // zeros
  auto load = a.as<std::int64_t>();
  for (std::int64_t l = 0; l < layers; ++l) {
    const npy::Array ids = align_ids(tokens, topk, num_experts, dist, stream_key(seed, 0x10ad0000u + std::uint64_t(l)),
                                     false);
    for (const std::int32_t e : ids.as<std::int32_t>())
      ++load[static_cast<std::size_t>(l * num_experts + e)];
  }
  return a;
}

}  // namespace moekit::gen
