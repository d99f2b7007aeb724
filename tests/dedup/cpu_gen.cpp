// Unit tests of the dedup input generator.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <numeric>
#include <set>
#include <vector>

#include "dedup/gen.hpp"
#include "errors.hpp"

using namespace moekit;

TEST_CASE("gen dedup: values in range, padding at row ends") {
  auto a = gen::dedup_indices(4, 3, 50, 1000, 0.9, 0.1, 5);
  REQUIRE(a.shape == std::vector<std::int64_t>{12, 50});
  auto v = a.as<std::int32_t>();
  for (int r = 0; r < 12; ++r)
    for (int j = 0; j < 50; ++j) {
      int x = v[r * 50 + j];
      if (j >= 45) CHECK(x == -1);
      else CHECK((x >= 0 && x < 1000));
    }
  CHECK_THROWS_AS(gen::dedup_indices(1, 1, 0, 10, 0, 0, 1), InputError);
  CHECK_THROWS_AS(gen::dedup_indices(1, 1, 4, 10, 1.5, 0, 1), InputError);
}

TEST_CASE("gen dedup refuses sizes dedup cannot use, before allocating") {
  // A dedup row (M*k) is indexed in int32.
  CHECK_THROWS_AS(gen::dedup_indices(1, 4, 2000000000, 10, 0, 0, 1), InputError);
}

TEST_CASE("gen dedup: deterministic per seed, distinct values, pads") {
  const auto a = gen::dedup_indices(50, 4, 512, 100000, 0.8, 0.1, 9);
  CHECK(gen::dedup_indices(50, 4, 512, 100000, 0.8, 0.1, 9).data == a.data);
  CHECK(gen::dedup_indices(50, 4, 512, 100000, 0.8, 0.1, 10).data != a.data);
  const auto v = a.as<std::int32_t>();
  for (std::size_t r = 0; r < 200; ++r) {
    std::set<std::int32_t> row(v.begin() + r * 512, v.begin() + (r + 1) * 512);
    row.erase(-1);
    CHECK(row.size() == 512 - 51);  // distinct values, 51 pads
  }
}
