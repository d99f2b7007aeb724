// Synthetic router logits: see gen.hpp.
#include "route/gen.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "align/gen.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "gen_common.hpp"
#include "route/route.hpp"

namespace moekit::gen {

npy::Array route_logits(std::int64_t tokens, std::int32_t experts, npy::DType dtype, const std::string& dist,
                        std::uint64_t seed) {
  if (tokens < 0) throw InputError(fmt::format("--tokens must be >= 0, got {}", tokens));
  if (experts < 1 || experts > route::kMaxExperts)
    throw InputError(fmt::format("--num-experts must be in [1, {}], got {}", route::kMaxExperts, experts));
  check_size(double(tokens) * experts, "router logits");
  const ExpertDist d = parse_dist(dist);
  if (d.kind != ExpertDist::uniform && d.kind != ExpertDist::load)
    throw InputError(fmt::format("--dist: route draws uniform or load:FILE[:LAYER] logits, not '{}'", printable(dist)));
  std::vector<float> log_share;
  if (d.kind == ExpertDist::load) {
    if (d.weights.size() != std::size_t(experts))
      throw InputError(fmt::format("--dist load:{}: {} loads for --num-experts {}", d.source, d.weights.size(), experts));
    double sum = 0;
    for (double w : d.weights) sum += w;
    for (double w : d.weights) log_share.push_back(static_cast<float>(std::log(std::max(w / sum, 1e-30))));
  }
  npy::Array a;
  a.dtype = dtype;
  a.shape = {tokens, experts};
  const std::size_t n = std::size_t(tokens) * experts;
  a.data.resize(n * npy::dtype_size(dtype));
  const NormalTable& nt = normal_table();
  const std::uint64_t key = stream_key(seed, 0x10675);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t u = counter_at(key, i);
    float x;
    if (log_share.empty()) {
      x = nt(static_cast<std::uint32_t>(u >> 32));
    } else {
      const double unit = (double(u >> 11) + 0.5) * 0x1.0p-53;  // (0, 1)
      x = log_share[i % experts] + static_cast<float>(-std::log(-std::log(unit)));  // + Gumbel(0, 1)
    }
    switch (dtype) {
      case npy::DType::f4: reinterpret_cast<float*>(a.data.data())[i] = x; break;
      case npy::DType::bf16: reinterpret_cast<std::uint16_t*>(a.data.data())[i] = to_bf16(x); break;
      case npy::DType::f2: reinterpret_cast<std::uint16_t*>(a.data.data())[i] = to_f16(x); break;
      default: throw InputError("route logits are f32, bf16 or f16");
    }
  }
  return a;
}

npy::Array route_bias(std::int32_t experts, std::uint64_t seed) {
  if (experts < 1 || experts > route::kMaxExperts)
    throw InputError(fmt::format("--num-experts must be in [1, {}], got {}", route::kMaxExperts, experts));
  npy::Array a;
  a.dtype = npy::DType::f4;
  a.shape = {experts};
  a.data.resize(std::size_t(experts) * 4);
  const NormalTable& nt = normal_table();
  const std::uint64_t key = stream_key(seed, 0xb1a5);
  for (std::int32_t i = 0; i < experts; ++i)
    reinterpret_cast<float*>(a.data.data())[i] = 0.1f * nt(static_cast<std::uint32_t>(counter_at(key, i) >> 32));
  return a;
}

std::vector<float> logits_as_f32(const npy::Array& a, const std::string& label) {
  if (a.dtype != npy::DType::f4 && a.dtype != npy::DType::bf16 && a.dtype != npy::DType::f2)
    throw InputError(fmt::format("{}: logits must be float32, bfloat16 or float16", label));
  const std::size_t n = a.numel();
  std::vector<float> out(n);
  const std::int64_t E = a.shape.empty() ? 1 : std::max<std::int64_t>(a.shape.back(), 1);
  for (std::size_t i = 0; i < n; ++i) {
    const float v = npy::float_at(a, i);
    if (!std::isfinite(v))
      throw InputError(fmt::format("{}: logit [{}, {}] is {}: logits must be finite", label, i / E, i % E, v));
    out[i] = v;
  }
  return out;
}

npy::Array read_logits(const std::string& path, const std::string& reinterpret, std::int32_t experts,
                       const std::string& experts_what) {
  const std::string label = display_path(path);
  npy::ReadOptions ro;
  if (!reinterpret.empty()) ro.reinterpret = npy::parse_dtype(reinterpret);
  npy::Array in = npy::read(path, ro);
  if (in.dtype != npy::DType::f4 && in.dtype != npy::DType::bf16 && in.dtype != npy::DType::f2)
    throw InputError(fmt::format("{}: logits must be float32, bfloat16 or float16, got {} (2-byte bf16 data saved "
                                 "as int16/uint16/void: add --dtype bf16)",
                                 label, npy::dtype_name(in.dtype)));
  if (in.shape.size() != 2)
    throw InputError(
        fmt::format("{}: logits must be 2-D [tokens, experts], got {} dimension(s)", label, in.shape.size()));
  if (in.shape[1] < 1 || in.shape[1] > route::kMaxExperts)
    throw InputError(fmt::format("{}: {} experts (the last dimension) is outside [1, {}]", label, in.shape[1],
                                 route::kMaxExperts));
  if (experts != 0 && experts != in.shape[1])
    throw InputError(
        fmt::format("{}: the logits have {} experts, but {} is {}", label, in.shape[1], experts_what, experts));
  return in;
}

std::vector<float> read_bias(const std::string& path, std::int32_t experts) {
  const std::string bl = display_path(path);
  const npy::Array b = npy::read(path);
  if (b.dtype != npy::DType::f4)
    throw InputError(fmt::format("{}: the correction bias must be float32, got {}", bl, npy::dtype_name(b.dtype)));
  if (b.shape.size() != 1 || b.shape[0] != experts)
    throw InputError(fmt::format("{}: the correction bias must be [E] = [{}]", bl, experts));
  const auto v = b.as<float>();
  std::vector<float> bias(v.begin(), v.end());
  for (std::size_t i = 0; i < bias.size(); ++i)
    if (!std::isfinite(bias[i]))
      throw InputError(fmt::format("{}: bias of expert {} is {}: the bias must be finite", bl, i, bias[i]));
  return bias;
}

}  // namespace moekit::gen
