// Unit tests of the act-and-mul input generator.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <numeric>
#include <set>
#include <vector>

#include "act_and_mul/gen.hpp"
#include "errors.hpp"
#include "half.hpp"

using namespace moekit;

TEST_CASE("gen act-and-mul refuses sizes before allocating") {
  // 2*d must not overflow.
  CHECK_THROWS_AS(gen::act_input(0, std::int64_t(1) << 62, npy::DType::f4, 1), InputError);
  CHECK_THROWS_AS(gen::act_input(1, std::int64_t(1) << 40, npy::DType::f4, 1), InputError);
}

TEST_CASE("gen act-and-mul: deterministic, approximately standard normal, one value per seed for every dtype") {
  const auto f32 = gen::act_input(512, 4096, npy::DType::f4, 11);
  CHECK(gen::act_input(512, 4096, npy::DType::f4, 11).data == f32.data);
  CHECK(gen::act_input(512, 4096, npy::DType::f4, 12).data != f32.data);
  const auto bf = gen::act_input(512, 4096, npy::DType::bf16, 11);
  const auto h = gen::act_input(512, 4096, npy::DType::f2, 11);
  const auto x = f32.as<float>();
  const auto bfv = bf.as<std::uint16_t>();
  const auto hv = h.as<std::uint16_t>();
  std::size_t bf_diff = 0, h_diff = 0;
  double sum = 0, sq = 0, max_abs = 0;
  std::size_t in1 = 0, in2 = 0, in3 = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    bf_diff += bfv[i] != f32_to_bf16_bits(x[i]);  // the fast conversions round like half.hpp
    h_diff += hv[i] != f32_to_f16_bits(x[i]);
    const double v = x[i];
    sum += v;
    sq += v * v;
    max_abs = std::max(max_abs, std::abs(v));
    in1 += std::abs(v) < 1;
    in2 += std::abs(v) < 2;
    in3 += std::abs(v) < 3;
  }
  CHECK(bf_diff == 0);
  CHECK(h_diff == 0);
  const double n = double(x.size());
  const double mean = sum / n, var = sq / n - mean * mean;
  CAPTURE(mean);
  CAPTURE(var);
  CHECK(std::abs(mean) < 3e-3);
  CHECK(std::abs(var - 1) < 5e-3);
  CHECK(std::abs(in1 / n - 0.682689) < 2e-3);
  CHECK(std::abs(in2 / n - 0.954500) < 1e-3);
  CHECK(std::abs(in3 / n - 0.997300) < 3e-4);
  CHECK(max_abs > 4.0);  // there are tails
  CHECK(max_abs < 7.0);
  // Odd element counts: the last element is drawn too.
  const auto odd_a = gen::act_input(1, 1, npy::DType::f4, 5);
  const auto odd = odd_a.as<float>();
  CHECK(odd.size() == 2);
  CHECK(odd[0] != odd[1]);

}
