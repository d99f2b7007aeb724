#include "combine/gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include "errors.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"

namespace moekit::gen {

namespace {

npy::Array slots(std::int64_t tokens, std::int32_t topk, npy::DType dtype, const char* what) {
  if (tokens < 0) throw InputError(fmt::format("--tokens must be >= 0, got {}", tokens));
  if (topk < 1) throw InputError(fmt::format("--topk must be >= 1, got {}", topk));
  // Rows are named in int32 by every combine variant.
  check_size(double(tokens) * topk, what, kInt32Max);
  require_host_memory(double(tokens) * topk * 4.0, what);
  npy::Array a;
  a.dtype = dtype;
  a.shape = {tokens, topk};
  a.data.resize(static_cast<std::size_t>(tokens) * static_cast<std::size_t>(topk) * 4);
  return a;
}

}  // namespace

npy::Array combine_inverse(std::int64_t tokens, std::int32_t topk, std::uint64_t seed) {
  npy::Array a = slots(tokens, topk, npy::DType::i4, "an inverse map");
  auto inv = a.as<std::int32_t>();
  std::iota(inv.begin(), inv.end(), 0);
  Rng rng{stream_key(seed, 0x1a5e)};
  shuffle(inv.data(), inv.size(), rng);
  return a;
}

npy::Array topk_weights(std::int64_t tokens, std::int32_t topk, std::uint64_t seed) {
  npy::Array a = slots(tokens, topk, npy::DType::f4, "top-k weights");
  auto w = a.as<float>();
  const std::uint64_t key = stream_key(seed, 0x3e16);
  for (std::int64_t t = 0; t < tokens; ++t) {
    Rng rng{counter_at(key, static_cast<std::uint64_t>(t))};
    float* row = w.data() + t * topk;
    double sum = 0;
    for (std::int32_t j = 0; j < topk; ++j) sum += row[j] = static_cast<float>(0.05 + rng.unit());  // > 0
    for (std::int32_t j = 0; j < topk; ++j) row[j] = static_cast<float>(row[j] / sum);
    std::sort(row, row + topk, std::greater<float>());
  }
  return a;
}

}  // namespace moekit::gen
