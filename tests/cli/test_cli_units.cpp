// Unit tests of the host pieces behind the CLI: option values, generators,
// report rendering.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "driver.hpp"
#include "errors.hpp"
#include "gen.hpp"
#include "report.hpp"

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

TEST_CASE("parse_format") {
  CHECK(parse_format("json") == Format::json);
  CHECK(parse_format("csv") == Format::csv);
  CHECK(parse_format("text") == Format::text);
  CHECK_THROWS_AS(parse_format("xml"), InputError);
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

TEST_CASE("generators refuse sizes no op can use, before allocating") {
  // align indexes slots in int32; a dedup row (M*k) too; 2*d must not overflow.
  CHECK_THROWS_AS(gen::align_ids(std::int64_t(1) << 28, 8, 256, {}, 1, false), InputError);
  CHECK_THROWS_AS(gen::dedup_indices(1, 4, 2000000000, 10, 0, 0, 1), InputError);
  CHECK_THROWS_AS(gen::act_input(0, std::int64_t(1) << 62, npy::DType::f4, 1), InputError);
  CHECK_THROWS_AS(gen::act_input(1, std::int64_t(1) << 40, npy::DType::f4, 1), InputError);
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

TEST_CASE("report renderings carry the stable fields") {
  Report r;
  r.op = "dedup";
  r.variant = "bitmask";
  r.variant_requested = "auto";
  r.params = {{"batch", "115"}, {"max_index", "none"}};
  r.dtype = "int32";
  r.device = "NVIDIA \"quoted\" GPU";
  r.check_status = "fail";
  r.check.ok = false;
  r.check.first_difference = "batch 3, column 7: expected 5, got 6";
  TimingStats t;
  t.median_us = 2.0;
  t.min_us = 1.5;
  t.max_us = 3.0;
  t.samples = 10;
  t.mode = "graph replay";
  r.timing = t;
  r.bytes = 4000;
  r.peak_gbps = 4;
  std::string j = render_report(r, Format::json);
  CHECK(j.find("\"op\":\"dedup\"") != std::string::npos);
  CHECK(j.find("\"batch\":115") != std::string::npos);        // integers stay numbers
  CHECK(j.find("\"max_index\":\"none\"") != std::string::npos);
  CHECK(j.find("NVIDIA \\\"quoted\\\" GPU") != std::string::npos);  // escaped
  CHECK(j.find("\"median\":2,") != std::string::npos);
  CHECK(j.find("\"gbps\":2,") != std::string::npos);          // 4000 B / 2 us = 2 GB/s
  CHECK(j.find("\"pct_of_peak\":50") != std::string::npos);
  CHECK(j.find("\"result\":\"fail\"") != std::string::npos);
  CHECK(j.back() == '\n');
  std::string c = render_report(r, Format::csv);
  auto nl = c.find('\n');
  auto commas = [](std::string s) { return std::count(s.begin(), s.end(), ','); };
  CHECK(commas(c.substr(0, nl)) == commas(c.substr(nl + 1)));
  std::string x = render_report(r, Format::text);
  CHECK(x.find("FAIL: batch 3, column 7") != std::string::npos);
  CHECK(x.find("median 2.00 us") != std::string::npos);
}
