// CPU tests of the align reference and checker: hand-computed cases, a second
// (sort-based) formulation on random inputs, and checker-must-fail cases.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "errors.hpp"
#include "align/reference.hpp"

using namespace moekit;
using namespace moekit::align;
using V = std::vector<std::int32_t>;

namespace {

Outputs ref_of(const Problem& p, const std::vector<std::int64_t>& ids, const V& map = {}) {
  return reference(p, ids, map);
}

}  // namespace

TEST_CASE("make_problem derives the buffer sizes") {
  Problem p = make_problem(6, 3, 4, false, 0, false);
  CHECK(p.max_num_tokens_padded == 6 + 3 * 3);
  CHECK(p.max_num_blocks == 4);
  p = make_problem(6, 3, 4, true, 0, true);
  CHECK(p.max_num_tokens_padded == 16);
  CHECK(p.max_num_blocks == 4);
  CHECK(p.ids_int64);
  p = make_problem(0, 1, 1, false, 0, false);
  CHECK(p.max_num_tokens_padded == 0);
  CHECK(p.max_num_blocks == 0);
  p = make_problem(0, 5, 1024, false, 7, false);
  CHECK(p.max_num_tokens_padded == 5 * 1023);
  CHECK(p.max_num_blocks == 5);
  CHECK(p.map_size == 7);
  // Largest that fits: exactly INT32_MAX entries with B = 1.
  const std::int64_t imax = std::numeric_limits<std::int32_t>::max();
  p = make_problem(imax, 1, 1, false, 0, false);
  CHECK(p.max_num_tokens_padded == imax);
}

TEST_CASE("make_problem rejects bad arguments and int32 overflow") {
  const std::int64_t imax = std::numeric_limits<std::int32_t>::max();
  CHECK_THROWS_AS(make_problem(10, 0, 16, false, 0, false), InputError);
  CHECK_THROWS_AS(make_problem(10, -3, 16, false, 0, false), InputError);
  CHECK_THROWS_AS(make_problem(10, 8, 0, false, 0, false), InputError);
  CHECK_THROWS_AS(make_problem(10, 8, 1025, false, 0, false), InputError);
  CHECK_THROWS_AS(make_problem(-1, 8, 16, false, 0, false), InputError);
  CHECK_THROWS_AS(make_problem(10, 8, 16, false, -1, false), InputError);
  CHECK_THROWS_AS(make_problem(imax + 1, 1, 1, false, 0, false), InputError);
  CHECK_THROWS_AS(make_problem(imax, 1, 2, false, 0, false), InputError);
  CHECK_THROWS_AS(make_problem(imax - 1000, 16384, 1024, false, 0, false), InputError);
  // The block-rounded range must fit too (kernels form block * B in int32).
  CHECK_THROWS_AS(make_problem(imax - 2, 1, 4, false, 0, false), InputError);
}

TEST_CASE("reference: hand-computed case") {
  // slots: 0->e2 1->e0 2->e2 3->e1 4->e0 5->e2; E=3, B=4
  const Problem p = make_problem(6, 3, 4, false, 0, false);
  const Outputs o = ref_of(p, {2, 0, 2, 1, 0, 2});
  CHECK(o.num_tokens_post_pad == 12);
  CHECK(o.sorted_token_ids == V{1, 4, 6, 6, 3, 6, 6, 6, 0, 2, 5, 6, 6, 6, 6});
  CHECK(o.expert_ids == V{0, 1, 2, -1});
  const Problem pp = make_problem(6, 3, 4, false, 0, true);
  const Outputs op = ref_of(pp, {2, 0, 2, 1, 0, 2});
  CHECK(op.sorted_token_ids == V{1, 4, 6, 6, 3, 6, 6, 6, 0, 2, 5, 6, 6, 6, 6, 6});
  CHECK(op.expert_ids == V{0, 1, 2, -1});
}

TEST_CASE("reference: empty experts own no block, B = 1") {
  // E=5, B=1: experts 0 and 3 are empty.
  const Problem p = make_problem(5, 5, 1, false, 0, false);
  const Outputs o = ref_of(p, {4, 1, 2, 4, 1});
  CHECK(o.num_tokens_post_pad == 5);
  CHECK(o.sorted_token_ids == V{1, 4, 2, 0, 3});
  CHECK(o.expert_ids == V{1, 1, 2, 4, 4});
}

TEST_CASE("reference: expert map drops unmapped experts") {
  // global -> local: 0->-1 1->0 2->1 3->-1 4->0 5->1
  const V map{-1, 0, 1, -1, 0, 1};
  const Problem p = make_problem(6, 2, 2, true, 6, false);
  const Outputs o = ref_of(p, {1, 3, 4, 5, 0, 2}, map);
  CHECK(o.num_tokens_post_pad == 4);
  CHECK(o.sorted_token_ids == V{0, 2, 3, 5, 6, 6, 6, 6});
  CHECK(o.expert_ids == V{0, 1, -1, -1});
}

TEST_CASE("reference: invalid ids are dropped") {
  // E=2, B=2: -1, 2, 99 and a map-less huge id drop.
  const Problem p = make_problem(6, 2, 2, true, 0, false);
  const Outputs o = ref_of(p, {-1, 1, 2, 99, 1, std::int64_t(1) << 40});
  CHECK(o.num_tokens_post_pad == 2);
  CHECK(o.sorted_token_ids == V{1, 4, 6, 6, 6, 6, 6, 6});
  CHECK(o.expert_ids == V{1, -1, -1, -1});
  // Map entries outside [0, E) and ids outside the map drop too.
  const V map{0, 5, -7};
  const Problem pm = make_problem(5, 2, 1, false, 3, false);
  const Outputs om = ref_of(pm, {0, 1, 2, 3, -1}, map);
  CHECK(om.num_tokens_post_pad == 1);
  CHECK(om.sorted_token_ids == V{0, 5, 5, 5, 5});
  CHECK(om.expert_ids == V{0, -1, -1, -1, -1});
}

TEST_CASE("reference: numel 0") {
  const Problem p = make_problem(0, 2, 3, false, 0, false);
  const Outputs o = ref_of(p, {});
  CHECK(o.num_tokens_post_pad == 0);
  CHECK(o.sorted_token_ids == V{0, 0, 0, 0});
  CHECK(o.expert_ids == V{-1, -1});
}

TEST_CASE("reference agrees with a stable sort by expert on random inputs") {
  std::mt19937_64 rng(1234);
  for (int iter = 0; iter < 200; ++iter) {
    const std::int64_t numel = std::uniform_int_distribution<int>(0, 300)(rng);
    const std::int32_t E = std::uniform_int_distribution<int>(1, 40)(rng);
    const std::int32_t B = std::uniform_int_distribution<int>(1, 9)(rng);
    const bool use_map = iter % 3 == 0;
    const std::int32_t G = use_map ? E + 5 : 0;
    V map;
    for (int g = 0; g < G; ++g) map.push_back(std::uniform_int_distribution<int>(-1, E - 1)(rng));
    std::vector<std::int64_t> ids(static_cast<std::size_t>(numel));
    const int hi = use_map ? G + 1 : E + 1;
    for (auto& x : ids) x = std::uniform_int_distribution<int>(-1, hi)(rng);
    const Problem p = make_problem(numel, E, B, false, G, iter % 2 == 0);
    const Outputs o = ref_of(p, ids, map);

    // Second formulation: stable-sort the valid slots by expert, then lay out.
    std::vector<std::pair<int, int>> valid;  // (expert, slot)
    for (int i = 0; i < numel; ++i) {
      std::int64_t e = ids[i];
      if (use_map) e = (e >= 0 && e < G) ? map[e] : -1;
      if (e >= 0 && e < E) valid.push_back({static_cast<int>(e), i});
    }
    std::stable_sort(valid.begin(), valid.end(),
                     [](auto a, auto b) { return a.first < b.first; });
    V sorted(static_cast<std::size_t>(p.max_num_tokens_padded), static_cast<int>(numel));
    V eids(static_cast<std::size_t>(p.max_num_blocks), -1);
    int row = 0;
    for (std::size_t k = 0; k < valid.size();) {
      const int e = valid[k].first;
      while (k < valid.size() && valid[k].first == e) sorted[row++] = valid[k++].second;
      row = (row + B - 1) / B * B;
      for (int b = 0; b < row / B; ++b)
        if (eids[b] == -1) eids[b] = e;
    }
    REQUIRE(o.num_tokens_post_pad == row);
    REQUIRE(o.sorted_token_ids == sorted);
    REQUIRE(o.expert_ids == eids);
    // The reference checks clean against itself in both modes.
    REQUIRE(check(p, o, o, true).ok);
    REQUIRE(check(p, o, o, false).ok);
  }
}

TEST_CASE("check: set mode accepts any order inside an expert, exact mode does not") {
  const Problem p = make_problem(6, 3, 4, false, 0, false);
  const Outputs ref = ref_of(p, {2, 0, 2, 1, 0, 2});
  Outputs got = ref;
  std::swap(got.sorted_token_ids[8], got.sorted_token_ids[10]);  // 0,2,5 -> 5,2,0
  const CheckResult set = check(p, ref, got, false);
  CHECK(set.ok);
  CHECK(set.first_difference.empty());
  const CheckResult ex = check(p, ref, got, true);
  CHECK_FALSE(ex.ok);
  CHECK(ex.max_error == 1.0);
  CHECK(ex.first_difference == "sorted_token_ids[8]: got 5, expected 0");
}

TEST_CASE("check: must fail") {
  const Problem p = make_problem(6, 3, 4, false, 0, false);
  const Outputs ref = ref_of(p, {2, 0, 2, 1, 0, 2});
  // ref sorted: 1 4 6 6 | 3 6 6 6 | 0 2 5 6 | 6 6 6
  SUBCASE("slot moved to another expert") {
    Outputs got = ref;
    std::swap(got.sorted_token_ids[1], got.sorted_token_ids[4]);  // 4 <-> 3
    const CheckResult r = check(p, ref, got, false);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference.find("sorted_token_ids[1]: got 3") == 0);
  }
  SUBCASE("duplicate slot") {
    Outputs got = ref;
    got.sorted_token_ids[9] = 0;
    const CheckResult r = check(p, ref, got, false);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference == "sorted_token_ids[9]: got 0, which is already at index 8");
  }
  SUBCASE("padding overwritten") {
    Outputs got = ref;
    got.sorted_token_ids[14] = 2;
    const CheckResult r = check(p, ref, got, false);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference == "sorted_token_ids[14]: got 2, expected padding 6");
  }
  SUBCASE("slot replaced by padding") {
    Outputs got = ref;
    got.sorted_token_ids[10] = 6;
    CHECK_FALSE(check(p, ref, got, false).ok);
  }
  SUBCASE("poison value left unwritten") {
    Outputs got = ref;
    got.sorted_token_ids[2] = static_cast<std::int32_t>(0xABABABABu);
    CHECK_FALSE(check(p, ref, got, false).ok);
  }
  SUBCASE("expert_ids differ, tail not -1") {
    Outputs got = ref;
    got.expert_ids[3] = 0;
    const CheckResult r = check(p, ref, got, false);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference == "expert_ids[3]: got 0, expected -1");
  }
  SUBCASE("num_tokens_post_pad differs") {
    Outputs got = ref;
    got.num_tokens_post_pad = 16;
    const CheckResult r = check(p, ref, got, true);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference == "num_tokens_post_pad[0]: got 16, expected 12");
  }
  SUBCASE("wrong lengths") {
    Outputs got = ref;
    got.sorted_token_ids.pop_back();
    CHECK_FALSE(check(p, ref, got, false).ok);
    got = ref;
    got.expert_ids.push_back(-1);
    CHECK_FALSE(check(p, ref, got, false).ok);
  }
}
