// Unit tests of the align input generator.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <numeric>
#include <set>
#include <vector>

#include "align/gen.hpp"
#include "errors.hpp"

using namespace moekit;

TEST_CASE("parse_dist accepts uniform, zipf:S and hot:F and rejects the rest") {
  CHECK(gen::parse_dist("uniform").kind == gen::ExpertDist::uniform);
  auto z = gen::parse_dist("zipf:1.25");
  CHECK(z.kind == gen::ExpertDist::zipf);
  CHECK(z.param == doctest::Approx(1.25));
  auto h = gen::parse_dist("hot:0.3");
  CHECK(h.kind == gen::ExpertDist::hot);
  for (const char* bad : {"zipf", "zipf:", "zipf:-1", "hot:2", "hot:x", "normal:1", ""})
    CHECK_THROWS_AS(gen::parse_dist(bad), InputError);
}

TEST_CASE("gen align: distinct experts per token, deterministic per seed, hot expert honoured") {
  auto a = gen::align_ids(500, 6, 12, gen::parse_dist("hot:1"), 9, false);
  REQUIRE(a.shape == std::vector<std::int64_t>{500, 6});
  auto v = a.as<std::int32_t>();
  for (int t = 0; t < 500; ++t) {
    std::set<int> s(v.begin() + t * 6, v.begin() + t * 6 + 6);
    CHECK(s.size() == 6);
    CHECK(s.count(0) == 1);  // hot:1 routes every token to expert 0
    CHECK(*s.rbegin() < 12);
  }
  auto b = gen::align_ids(500, 6, 12, gen::parse_dist("hot:1"), 9, false);
  CHECK(a.data == b.data);
  auto c = gen::align_ids(500, 6, 12, gen::parse_dist("hot:1"), 10, false);
  CHECK(a.data != c.data);
  // topk == E: every token holds every expert (exercises the fallback path)
  auto full = gen::align_ids(50, 8, 8, gen::parse_dist("zipf:3"), 1, true);
  auto f = full.as<std::int64_t>();
  for (int t = 0; t < 50; ++t) CHECK(std::set<std::int64_t>(f.begin() + t * 8, f.begin() + t * 8 + 8).size() == 8);
  CHECK_THROWS_AS(gen::align_ids(5, 9, 8, {}, 1, false), InputError);
}

TEST_CASE("gen align: int32 and int64 traces hold the same ids") {
  auto a = gen::align_ids(200, 5, 33, gen::parse_dist("zipf:1.1"), 4, false);
  auto b = gen::align_ids(200, 5, 33, gen::parse_dist("zipf:1.1"), 4, true);
  REQUIRE(a.dtype == npy::DType::i4);
  REQUIRE(b.dtype == npy::DType::i8);
  REQUIRE(a.shape == b.shape);
  auto va = a.as<std::int32_t>();
  auto vb = b.as<std::int64_t>();
  REQUIRE(va.size() == 1000);
  REQUIRE(vb.size() == 1000);
  for (std::size_t i = 0; i < va.size(); ++i) CHECK(std::int64_t(va[i]) == vb[i]);
}

TEST_CASE("gen align refuses sizes align cannot use, before allocating") {
  // align indexes slots in int32.
  CHECK_THROWS_AS(gen::align_ids(std::int64_t(1) << 28, 8, 256, {}, 1, false), InputError);
}

TEST_CASE("gen align: deterministic, distinct experts per token, distributions") {
  const std::int64_t T = 200000;
  const int K = 8, E = 64;
  for (const char* d : {"uniform", "zipf:1.2", "hot:0.5"}) {
    CAPTURE(d);
    const auto dist = gen::parse_dist(d);
    const auto a = gen::align_ids(T, K, E, dist, 3, false);
    CHECK(gen::align_ids(T, K, E, dist, 3, false).data == a.data);
    CHECK(gen::align_ids(T, K, E, dist, 4, false).data != a.data);
    const auto v = a.as<std::int32_t>();
    std::vector<double> count(E, 0);
    std::size_t first_is_0 = 0;
    bool distinct = true, in_range = true;
    for (std::int64_t t = 0; t < T; ++t) {
      std::set<std::int32_t> row(v.begin() + t * K, v.begin() + (t + 1) * K);
      distinct = distinct && row.size() == std::size_t(K);
      for (int j = 0; j < K; ++j) {
        const auto e = v[static_cast<std::size_t>(t * K + j)];
        in_range = in_range && e >= 0 && e < E;
        if (e >= 0 && e < E) count[static_cast<std::size_t>(e)] += 1;
      }
      first_is_0 += v[static_cast<std::size_t>(t * K)] == 0;
    }
    CHECK(distinct);
    CHECK(in_range);
    const double total = double(T) * K;
    std::vector<double> sorted = count;
    std::sort(sorted.rbegin(), sorted.rend());
    if (std::string(d) == "uniform") {
      CHECK(sorted.front() / total < 1.1 / E);
      CHECK(sorted.back() / total > 0.9 / E);
    } else if (std::string(d) == "hot:0.5") {
      // Expert 0 is in every hot token and in K/E of the rest; shuffled into place.
      CHECK(std::abs(count[0] / double(T) - (0.5 + 0.5 * K / double(E))) < 0.01);
      CHECK(std::abs(first_is_0 / double(T) - count[0] / double(T) / K) < 0.01);
    } else {
      // Popularity falls with rank; the most popular expert is much above uniform.
      CHECK(sorted.front() / total > 3.0 / E);
      CHECK(sorted[0] > sorted[4]);
      CHECK(sorted[4] > sorted[16]);
    }
  }
  // topk == E: every token takes every expert (the free-scan fallback).
  const auto full_a = gen::align_ids(100, 16, 16, gen::parse_dist("zipf:3"), 1, true);
  const auto full = full_a.as<std::int64_t>();
  for (int t = 0; t < 100; ++t) CHECK(std::set<std::int64_t>(full.begin() + t * 16, full.begin() + (t + 1) * 16).size() == 16);
}

namespace {

// A load file in the temp folder, under a name of its own.
std::string write_load(const std::string& name, npy::DType t, std::vector<std::int64_t> shape,
                       const std::vector<double>& w) {
  npy::Array a;
  a.dtype = t;
  a.shape = std::move(shape);
  a.data.resize(w.size() * npy::dtype_size(t));
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (t == npy::DType::i8) a.as<std::int64_t>()[i] = static_cast<std::int64_t>(w[i]);
    else a.as<double>()[i] = w[i];
  }
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  npy::write(path, a);
  return path;
}

}  // namespace

TEST_CASE("gen align --dist load:FILE draws experts in proportion to a recorded load") {
  // Layer 1 of a [2, 8] int64 load file; experts 4 and 5 never chosen.
  const std::vector<double> layer1 = {10, 20, 30, 40, 0, 0, 50, 50};
  std::vector<double> both = {1, 1, 1, 1, 1, 1, 1, 1};
  both.insert(both.end(), layer1.begin(), layer1.end());
  const std::string f = write_load("moekit_cpu_gen_load.npy", npy::DType::i8, {2, 8}, both);
  const auto dist = gen::parse_dist("load:" + f + ":1");
  REQUIRE(dist.kind == gen::ExpertDist::load);
  const std::int64_t T = 40000;
  const auto a = gen::align_ids(T, 1, 8, dist, 17, false);
  const auto v = a.as<std::int32_t>();
  std::vector<double> count(8, 0);
  for (auto e : v) count[static_cast<std::size_t>(e)] += 1;
  CHECK(count[4] == 0);
  CHECK(count[5] == 0);
  // Chi-square over the 6 experts with load (5 degrees of freedom): below the
  // 0.1% critical value 20.52. A fixed seed, so the test cannot flake; a wrong
  // weighting (e.g. uniform over the 6) gives thousands.
  double chi2 = 0;
  for (int e = 0; e < 8; ++e) {
    if (layer1[e] == 0) continue;
    const double expected = T * layer1[e] / 200.0;
    chi2 += (count[e] - expected) * (count[e] - expected) / expected;
  }
  MESSAGE("chi-square ", chi2);
  CHECK(chi2 < 20.52);
  // Without LAYER a 2-D file uses the sum over layers; top-2 stays distinct per token.
  const auto sum = gen::align_ids(1000, 2, 8, gen::parse_dist("load:" + f), 3, false);
  const auto s = sum.as<std::int32_t>();
  for (std::size_t t = 0; t < 1000; ++t) CHECK(s[2 * t] != s[2 * t + 1]);
  // Errors name the file: wrong E, a layer out of range, negative or all-zero loads, a 3-D file.
  CHECK_THROWS_AS(gen::align_ids(10, 1, 16, dist, 1, false), InputError);
  CHECK_THROWS_AS(gen::parse_dist("load:" + f + ":2"), InputError);
  CHECK_THROWS_AS(gen::parse_dist("load:" + write_load("moekit_cpu_gen_neg.npy", npy::DType::f8, {3}, {1, -1, 2})),
                  InputError);
  CHECK_THROWS_AS(gen::parse_dist("load:" + write_load("moekit_cpu_gen_zero.npy", npy::DType::f8, {3}, {0, 0, 0})),
                  InputError);
  CHECK_THROWS_AS(gen::parse_dist("load:" + write_load("moekit_cpu_gen_3d.npy", npy::DType::f8, {1, 1, 2}, {1, 2})),
                  InputError);
  CHECK_THROWS_AS(gen::parse_dist("load:/no/such/file.npy"), InputError);
}
