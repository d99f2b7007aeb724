// Given expert weights on the command line (--w1 W1 [E, 2I, H], --w2 W2
// [E, H, I]) for a command whose E and H come from elsewhere (moe-path, ep):
// the headers checked before anything is read, then the arrays read and
// every element required finite. One-line InputErrors name the file.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "display.hpp"
#include "errors.hpp"
#include "npy.hpp"

namespace moekit::experts {

struct WeightFiles {
  npy::Info w1, w2;        // the headers
  std::int64_t inter = 0;  // I, W1's rows / 2
};

// The headers of `w1` and `w2` against E experts of H columns in `dt` (a
// tiny file whose header claims gigabytes is refused before it is read).
// `dtype_hint`: appended to a dtype refusal (how to read other dtypes).
inline WeightFiles inspect_weight_files(const std::string& w1, const std::string& w2, std::int64_t E,
                                        std::int64_t H, npy::DType dt, const npy::ReadOptions& ro,
                                        std::string_view dtype_hint = {}) {
  const std::string l1 = display_path(w1), l2 = display_path(w2);
  WeightFiles f{npy::inspect(w1, ro), npy::inspect(w2, ro), 0};
  for (const auto& [info, l] : {std::pair{&f.w1, &l1}, std::pair{&f.w2, &l2}})
    if (info->dtype != dt)
      throw InputError(fmt::format("{}: the expert weights must be {} like the hidden states, got {}{}", *l,
                                   npy::dtype_name(dt), npy::dtype_name(info->dtype), dtype_hint));
  const std::vector<std::int64_t>& s1 = f.w1.shape;
  if (s1.size() != 3 || s1[0] != E || s1[1] < 2 || s1[1] % 2 != 0 || s1[2] != H)
    throw InputError(fmt::format("{}: W1 must be [E, 2I, H] = [{}, 2I, {}] with I >= 1, got {}", l1, E, H,
                                 npy::format_shape(s1)));
  f.inter = s1[1] / 2;
  if (f.w2.shape != std::vector<std::int64_t>{E, H, f.inter})
    throw InputError(fmt::format("{}: W2 must be [E, H, I] = [{}, {}, {}] (W1's E, H and I), got {}", l2, E, H,
                                 f.inter, npy::format_shape(f.w2.shape)));
  return f;
}

// The files read into a1 and a2, each element finite (else the first one
// that is not is named by [expert, row, column]).
inline void read_weight_files(const std::string& w1, const std::string& w2, const npy::ReadOptions& ro,
                              npy::Array& a1, npy::Array& a2) {
  a1 = npy::read(w1, ro);
  a2 = npy::read(w2, ro);
  for (const auto& [arr, path] : {std::pair{&a1, &w1}, std::pair{&a2, &w2}})
    if (const auto i = npy::first_non_finite(*arr)) {
      const std::int64_t cols = arr->shape[2], rows_per = arr->shape[1], at = std::int64_t(*i);
      throw InputError(fmt::format("{}: element [{}, {}, {}] is {}: expert weights must be finite",
                                   display_path(*path), at / (cols * rows_per), at / cols % rows_per, at % cols,
                                   npy::float_at(*arr, *i)));
    }
}

}  // namespace moekit::experts
