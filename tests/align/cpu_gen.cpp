// Unit tests of the align input generator.
#include <doctest/doctest.h>

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
