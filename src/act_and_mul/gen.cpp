#include "act_and_mul/gen.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <unordered_set>
#include <vector>

#include "errors.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
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
  require_host_memory(double(tokens) * 2 * double(d) * double(npy::dtype_size(dtype)), "this act-and-mul input");
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

npy::Array normal_rows(std::int64_t rows, std::int64_t h, npy::DType dtype, std::uint64_t seed, std::string_view what) {
  if (h < 1) throw InputError(fmt::format("--hidden-size must be >= 1, got {}", h));
  check_size(double(rows) * double(h), what);
  npy::Array a = act_input(rows, (h + 1) / 2, dtype, seed);
  if (h % 2) {  // odd h: keep the first h of each h + 1
    const std::size_t es = npy::dtype_size(dtype), w = std::size_t(h + 1);
    npy::Array o;
    o.dtype = dtype;
    o.shape = {rows, h};
    o.data.resize(std::size_t(rows) * std::size_t(h) * es);
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(o.data.data() + r * h * es, a.data.data() + r * w * es, std::size_t(h) * es);
    return o;
  }
  a.shape = {rows, h};
  return a;
}

}  // namespace moekit::gen
