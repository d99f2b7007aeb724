// Seeded standard-normal rows, the one generator of activation-like data
// (activations, hidden states, expert output rows) for every family.
// Header-only on gen_common.hpp; no family owns it.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string_view>

#include "errors.hpp"
#include "gen_common.hpp"
#include "half.hpp"
#include "host_memory.hpp"
#include "npy.hpp"

namespace moekit::gen {

// [rows, cols] approximately standard-normal values (a 4096-bin quantile
// table, gen_common.hpp) in f16, bf16 or f32: element i is the table at half
// of random number i/2 of the seed's stream, so a seed gives the same values
// whatever the dtype, at about 1 ns per element. The caller checks the sizes.
inline npy::Array normal_values(std::int64_t rows, std::int64_t cols, npy::DType dtype, std::uint64_t seed) {
  const std::uint64_t key = stream_key(seed, 3);
  const NormalTable& nt = normal_table();
  const std::size_t n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  npy::Array a;
  a.dtype = dtype;
  a.shape = {rows, cols};
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

// [rows, h] standard-normal rows: the values of normal_values(rows,
// 2 * ceil(h / 2)), the first h of each row (so a row is a prefix of a
// [*, 2d] activation row of d = ceil(h / 2)). `what` names the rows in the
// size error.
inline npy::Array normal_rows(std::int64_t rows, std::int64_t h, npy::DType dtype, std::uint64_t seed,
                              std::string_view what) {
  if (rows < 0) throw InputError(fmt::format("--tokens must be >= 0, got {}", rows));
  if (h < 1) throw InputError(fmt::format("--hidden-size must be >= 1, got {}", h));
  if (dtype != npy::DType::f2 && dtype != npy::DType::bf16 && dtype != npy::DType::f4)
    throw InputError("the dtype must be f16, bf16 or f32");
  const std::int64_t w = h + h % 2;
  check_size(double(w), what);
  check_size(double(rows) * double(w), what);
  require_host_memory(double(rows) * double(w) * double(npy::dtype_size(dtype)), std::string(what));
  npy::Array a = normal_values(rows, w, dtype, seed);
  if (h % 2) {  // odd h: keep the first h of each h + 1
    const std::size_t es = npy::dtype_size(dtype);
    npy::Array o;
    o.dtype = dtype;
    o.shape = {rows, h};
    o.data.resize(std::size_t(rows) * std::size_t(h) * es);
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(o.data.data() + r * h * es, a.data.data() + r * w * es, std::size_t(h) * es);
    return o;
  }
  return a;
}

}  // namespace moekit::gen
