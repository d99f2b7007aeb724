#include "act_and_mul/gen.hpp"

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
#include "half.hpp"

namespace moekit::gen {

npy::Array act_input(std::int64_t tokens, std::int64_t d, npy::DType dtype, std::uint64_t seed) {
  if (tokens < 0) throw InputError("--tokens must be >= 0");
  if (d < 1) throw InputError("--d must be >= 1");
  if (dtype != npy::DType::f2 && dtype != npy::DType::bf16 && dtype != npy::DType::f4)
    throw InputError("the dtype must be f16, bf16 or f32");
  // Also bounds one row on its own, so 2*d cannot overflow when tokens is 0.
  check_size(2.0 * double(d), "an act-and-mul row (2*d)");
  check_size(double(tokens) * 2 * d, "act-and-mul input");
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
