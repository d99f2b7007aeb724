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

#include "align/buffers.hpp"
#include "align/reference.hpp"
#include "common/problem_error.hpp"
#include "errors.hpp"

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
  CHECK(p.max_num_tokens_padded == 0);  // no slot, no group pads
  CHECK(p.max_num_blocks == 0);
  CHECK(p.map_size == 7);
  // Largest that fits: exactly INT32_MAX entries with B = 1.
  const std::int64_t imax = std::numeric_limits<std::int32_t>::max();
  p = make_problem(imax, 1, 1, false, 0, false);
  CHECK(p.max_num_tokens_padded == imax);
}

// The kernel layer's refusals carry the CLI's messages word for word (the
// CLI adds nothing but the exit code: src/planned.hpp).
TEST_CASE("make_problem's refusals: ProblemError with the argument and the limit") {
  const auto why = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const ProblemError& e) {
      return e.what();
    }
    return "no ProblemError";
  };
  CHECK(why([] { make_problem(-1, 8, 16, false, 0, false); }) == "align: numel must be >= 0 (got -1)");
  CHECK(why([] { make_problem(10, 0, 16, false, 0, false); }) ==
        "align: --num-experts must be in [1, 65536] (got 0): no variant takes more than 65536 experts");
  CHECK(why([] { make_problem(10, 65536, 16, false, 0, false, Invalid::bucket); }) ==
        "align: --num-experts must be in [1, 65535] with --invalid bucket, whose bucket is one more (got 65536): "
        "no variant takes more than 65536 experts");
  CHECK(why([] { make_problem(10, 8, 1025, false, 0, false); }) == "align: --block-size must be in [1, 1024] (got 1025)");
  CHECK(why([] { make_problem(10, 8, 16, false, -1, false); }) == "align: expert map length must be >= 0 (got -1)");
  CHECK(why([] { make_problem(10, 8, 16, false, 9, false, Invalid::reject, MapSemantics::vllm); }) ==
        "align: --map-semantics vllm needs one map entry per expert: the map has 9, --num-experts is 8");
  // 2^31 - 1 slots of one expert at B = 2: 2^31 rows.
  CHECK(why([] { make_problem(2147483647, 1, 2, false, 0, false); }) ==
        "align: outputs do not fit int32: numel 2147483647 + E 1 * (B 2 - 1) needs 2147483648 entries in "
        "sorted_token_ids (max 2147483647)");
  CHECK(why([] { make_problem(2147483640, 3, 4, false, 0, false, Invalid::bucket); }) ==
        "align: outputs do not fit int32: numel 2147483640 + (E + the bucket) 4 * (B 4 - 1) needs 2147483652 "
        "entries in sorted_token_ids (max 2147483647)");
  CHECK(why([] { make_problem(10, 8, 16, false, 0, false); }) == "no ProblemError");
}

TEST_CASE("make_problem: fewer slots than experts size the buffer as vLLM and SGLang do") {
  // numel + min(numel, E) * (B - 1): numel * B when numel < E.
  Problem p = make_problem(8, 256, 128, false, 0, false);
  CHECK(p.max_num_tokens_padded == 8 * 128);
  CHECK(p.max_num_blocks == 8);
  p = make_problem(2048, 256, 128, false, 0, false);
  CHECK(p.max_num_tokens_padded == 2048 + 256 * 127);
  p = make_problem(3, 256, 5, false, 0, true);
  CHECK(p.max_num_tokens_padded == 15);
  p = make_problem(1, 4096, 1024, false, 0, false, Invalid::bucket);
  CHECK(p.max_num_tokens_padded == 1024);
  // The reference lays out every slot of the worst case (each slot its own
  // expert) within that bound, and fills the rest with the padding value.
  std::vector<std::int64_t> ids = {7, 3, 250, 0, 255, 100, 101, 9};
  const Outputs o = reference(make_problem(8, 256, 128, false, 0, false), ids, {});
  CHECK(o.num_tokens_post_pad == 8 * 128);
  CHECK(o.sorted_token_ids.size() == 8 * 128);
  CHECK(o.sorted_token_ids[128] == 1);  // expert 3's slot, second block
  CHECK(o.sorted_token_ids[129] == 8);  // then the padding value numel
}

TEST_CASE("make_problem rejects bad arguments and int32 overflow") {
  const std::int64_t imax = std::numeric_limits<std::int32_t>::max();
  CHECK_THROWS_AS(make_problem(10, 0, 16, false, 0, false), ProblemError);
  CHECK_THROWS_AS(make_problem(10, -3, 16, false, 0, false), ProblemError);
  CHECK_THROWS_AS(make_problem(10, 8, 0, false, 0, false), ProblemError);
  CHECK_THROWS_AS(make_problem(10, 8, 1025, false, 0, false), ProblemError);
  CHECK_THROWS_AS(make_problem(-1, 8, 16, false, 0, false), ProblemError);
  CHECK_THROWS_AS(make_problem(10, 8, 16, false, -1, false), ProblemError);
  CHECK_THROWS_AS(make_problem(imax + 1, 1, 1, false, 0, false), ProblemError);
  CHECK_THROWS_AS(make_problem(imax, 1, 2, false, 0, false), ProblemError);
  CHECK_THROWS_AS(make_problem(imax - 1000, 16384, 1024, false, 0, false), ProblemError);
  // The block-rounded range must fit too (kernels form block * B in int32).
  CHECK_THROWS_AS(make_problem(imax - 2, 1, 4, false, 0, false), ProblemError);
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
  CHECK(o.sorted_token_ids.empty());  // no slot: no group pads, the buffers are empty
  CHECK(o.expert_ids.empty());
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

// ---- expert parallelism: --invalid bucket / drop, --map-semantics vllm ------

namespace {

using moekit::align::Invalid;
using moekit::align::MapSemantics;

Problem bucket_problem(std::int64_t numel, std::int32_t E, std::int32_t B, std::int32_t map_size = 0) {
  return make_problem(numel, E, B, false, map_size, false, Invalid::bucket);
}

}  // namespace

TEST_CASE("make_problem: the bucket is one more group; vllm maps have E entries") {
  // numel + (E + 1) * (B - 1) rows with the bucket.
  Problem p = bucket_problem(7, 3, 2);
  CHECK(p.max_num_tokens_padded == 7 + 4 * 1);
  CHECK(p.max_num_blocks == 6);
  CHECK(row_groups(p) == 4);
  p = make_problem(2, 5, 1024, false, 0, true, Invalid::bucket);
  CHECK(p.max_num_tokens_padded == 2048);  // 2 + 2 * 1023: two slots pad at most two groups
  CHECK(p.max_num_blocks == 2);
  // drop and reject size like today.
  CHECK(make_problem(7, 3, 2, false, 0, false, Invalid::drop).max_num_tokens_padded == 7 + 3);
  // E + the bucket must stay within kMaxExperts.
  CHECK_NOTHROW(make_problem(10, kMaxExperts - 1, 16, false, 0, false, Invalid::bucket));
  CHECK_THROWS_AS(make_problem(10, kMaxExperts, 16, false, 0, false, Invalid::bucket), ProblemError);
  CHECK_NOTHROW(make_problem(10, kMaxExperts, 16, false, 0, false, Invalid::drop));
  // vllm: the map has one entry per (global) expert.
  CHECK_NOTHROW(make_problem(10, 8, 16, false, 8, false, Invalid::reject, MapSemantics::vllm));
  CHECK_THROWS_AS(make_problem(10, 8, 16, false, 9, false, Invalid::reject, MapSemantics::vllm), ProblemError);
  CHECK_THROWS_AS(make_problem(10, 8, 16, false, 4, false, Invalid::bucket, MapSemantics::vllm), ProblemError);
  // The overflow check counts the bucket: fits with drop, not with the bucket.
  const std::int64_t fits = (std::int64_t(1) << 31) - 1024 - 2 * 1023;  // E = 2: the last 1024-row block ends at 2^31 - 1024
  CHECK_NOTHROW(make_problem(fits, 2, 1024, false, 0, false, Invalid::drop));
  CHECK_THROWS_AS(make_problem(fits, 2, 1024, false, 0, false, Invalid::bucket), ProblemError);
}

TEST_CASE("reference: bucket of -1 and out-of-range ids after the experts, slots ascending") {
  // E = 3, B = 2. Slots: 0->e2 1->bucket(-1) 2->e0 3->bucket(5) 4->e2 5->e1 6->bucket(-1).
  const Problem p = bucket_problem(7, 3, 2);
  const Outputs o = ref_of(p, {2, -1, 0, 5, 2, 1, -1});
  CHECK(o.num_tokens_post_pad == 10);  // 2 + 2 + 2 + 4 (the bucket's 3 slots, padded)
  CHECK(o.sorted_token_ids == V{2, 7, 5, 7, 0, 4, 1, 3, 6, 7, 7});
  CHECK(o.expert_ids == V{0, 1, 2, -1, -1, -1});
  CHECK(o.block_groups == V{0, 1, 2, 3, 3});
  CHECK(check(p, o, o, true).ok);
  CHECK(check(p, o, o, false).ok);

  // The same ids dropped: no bucket rows.
  const Problem pd = make_problem(7, 3, 2, false, 0, false, Invalid::drop);
  const Outputs od = ref_of(pd, {2, -1, 0, 5, 2, 1, -1});
  CHECK(od.num_tokens_post_pad == 6);
  CHECK(od.sorted_token_ids == V{2, 7, 5, 7, 0, 4, 7, 7, 7, 7});
  CHECK(od.expert_ids == V{0, 1, 2, -1, -1});
  // reject: the kernels (and so the reference) drop what the CLI let through.
  CHECK(ref_of(make_problem(7, 3, 2, false, 0, false), {2, -1, 0, 5, 2, 1, -1}).sorted_token_ids ==
        od.sorted_token_ids);
}

TEST_CASE("check: a bucket dropped, placed first or mixed with an expert fails") {
  const Problem p = bucket_problem(7, 3, 2);
  const Outputs ref = ref_of(p, {2, -1, 0, 5, 2, 1, -1});
  SUBCASE("dropped") {  // what --invalid drop would give, in the bucket's buffers
    Outputs got;
    got.sorted_token_ids = V{2, 7, 5, 7, 0, 4, 7, 7, 7, 7, 7};
    got.expert_ids = V{0, 1, 2, -1, -1, -1};
    got.num_tokens_post_pad = 6;
    CHECK_FALSE(check(p, ref, got, false).ok);
  }
  SUBCASE("placed first (SGLang's id + 1 order)") {
    Outputs got;
    got.sorted_token_ids = V{1, 3, 6, 7, 2, 7, 5, 7, 0, 4, 7};
    got.expert_ids = V{-1, -1, 0, 1, 2, -1};
    got.num_tokens_post_pad = 10;
    const CheckResult r = check(p, ref, got, false);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference == "expert_ids[0]: got -1, expected 0");
  }
  SUBCASE("placed first with the expert_ids of the reference") {  // rows alone must catch it too
    Outputs got = ref;
    got.sorted_token_ids = V{1, 3, 6, 7, 2, 7, 5, 7, 0, 4, 7};
    CHECK_FALSE(check(p, ref, got, false).ok);
  }
  SUBCASE("a bucket slot swapped with an expert's slot") {
    Outputs got = ref;
    std::swap(got.sorted_token_ids[0], got.sorted_token_ids[6]);  // slot 2 (e0) <-> slot 1 (bucket)
    const CheckResult r = check(p, ref, got, false);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference.find("sorted_token_ids[0]: got 1, expected a slot of expert 0") == 0);
  }
  SUBCASE("the bucket's slots in any order pass the set check, not the exact one") {
    Outputs got = ref;
    std::swap(got.sorted_token_ids[6], got.sorted_token_ids[8]);
    CHECK(check(p, ref, got, false).ok);
    CHECK_FALSE(check(p, ref, got, true).ok);
  }
}

TEST_CASE("reference: bucket with a local map takes non-local experts and ids outside the map") {
  // 5 global experts -> 3 local: 0->-1 1->0 2->1 3->-1 4->2; E = 3, B = 2.
  const V map{-1, 0, 1, -1, 2};
  const Problem p = bucket_problem(7, 3, 2, 5);
  // slots: 0:id0->bucket 1:id1->e0 2:id4->e2 3:id3->bucket 4:id7->bucket (outside the map)
  //        5:id2->e1 6:id-1->bucket
  const Outputs o = ref_of(p, {0, 1, 4, 3, 7, 2, -1}, map);
  CHECK(o.num_tokens_post_pad == 10);
  CHECK(o.sorted_token_ids == V{1, 7, 5, 7, 2, 7, 0, 3, 4, 6, 7});
  CHECK(o.expert_ids == V{0, 1, 2, -1, -1, -1});
  // drop: the bucket's slots have no rows.
  const Problem pd = make_problem(7, 3, 2, false, 5, false, Invalid::drop);
  const Outputs od = ref_of(pd, {0, 1, 4, 3, 7, 2, -1}, map);
  CHECK(od.num_tokens_post_pad == 6);
  CHECK(od.expert_ids == V{0, 1, 2, -1, -1});
}

TEST_CASE("reference: all-invalid input and 0 tokens with the bucket") {
  const Problem p = bucket_problem(5, 2, 4);
  const Outputs o = ref_of(p, {-1, 2, 9, -1, -5});
  CHECK(o.num_tokens_post_pad == 8);
  CHECK(o.sorted_token_ids == V{0, 1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5});
  CHECK(o.expert_ids == V{-1, -1, -1, -1});
  CHECK(o.block_groups == V{2, 2});
  CHECK(check(p, o, o, true).ok);
  // Dropped, the same input has no rows at all.
  const Outputs od = ref_of(make_problem(5, 2, 4, false, 0, false, Invalid::drop), {-1, 2, 9, -1, -5});
  CHECK(od.num_tokens_post_pad == 0);

  const Problem z = bucket_problem(0, 2, 3);
  const Outputs oz = ref_of(z, {});
  CHECK(oz.num_tokens_post_pad == 0);
  CHECK(oz.sorted_token_ids.empty());
  CHECK(oz.expert_ids.empty());
  CHECK(check(z, oz, oz, true).ok);
}

TEST_CASE("reference: vllm semantics align per global expert, then map expert_ids") {
  // 4 global experts, 2 local: 0->1 1->-1 2->0 3->-1. B = 2.
  const V map{1, -1, 0, -1};
  const Problem p = make_problem(7, 4, 2, false, 4, false, Invalid::reject, MapSemantics::vllm);
  // global experts of the slots: 3 0 2 0 1 3 2
  const Outputs o = ref_of(p, {3, 0, 2, 0, 1, 3, 2}, map);
  CHECK(o.num_tokens_post_pad == 8);
  CHECK(o.sorted_token_ids == V{1, 3, 4, 7, 2, 6, 0, 5, 7, 7, 7});
  CHECK(o.expert_ids == V{1, -1, 0, -1, -1, -1});
  CHECK(o.block_groups == V{0, 1, 2, 3});
  CHECK(check(p, o, o, true).ok);
  // The same map read locally: E = 2 local experts, non-local slots dropped.
  const Outputs ol = ref_of(make_problem(7, 2, 2, false, 4, false), {3, 0, 2, 0, 1, 3, 2}, map);
  CHECK(ol.num_tokens_post_pad == 4);
  CHECK(ol.sorted_token_ids == V{2, 6, 1, 3, 7, 7, 7, 7, 7});
  CHECK(ol.expert_ids == V{0, 1, -1, -1, -1});

  SUBCASE("slots of two non-local experts swapped: both blocks read -1, still a mismatch") {
    Outputs got = o;
    std::swap(got.sorted_token_ids[2], got.sorted_token_ids[6]);  // slot 4 (expert 1) <-> slot 0 (expert 3)
    const CheckResult r = check(p, o, got, false);
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference.find("sorted_token_ids[2]: got 0, expected a slot of expert 1") == 0);
  }
  SUBCASE("expert_ids left unmapped") {
    Outputs got = o;
    got.expert_ids = V{0, 1, 2, 3, -1, -1};
    CHECK_FALSE(check(p, o, got, false).ok);
  }
  SUBCASE("with the bucket: out-of-range ids after the global experts") {
    const Problem pb = make_problem(4, 4, 2, true, 4, false, Invalid::bucket, MapSemantics::vllm);
    const Outputs ob = ref_of(pb, {2, 4, -1, 1}, map);
    CHECK(ob.num_tokens_post_pad == 6);
    CHECK(ob.sorted_token_ids == V{3, 4, 0, 4, 1, 2, 4, 4});  // 4 + min(4, 5) * 1 rows
    CHECK(ob.expert_ids == V{-1, 0, -1, -1});
    CHECK(ob.block_groups == V{1, 2, 4});
  }
}

// What launch_ep does, with the reference standing in for the variant: the
// groups pre-pass, the variant on variant_problem(p) without a map, the
// expert_ids post-pass. It must give reference(p) exactly, in every mode.
TEST_CASE("the expert-parallel composition equals the reference in every mode") {
  std::mt19937_64 rng(4321);
  for (int iter = 0; iter < 300; ++iter) {
    const std::int64_t numel = std::uniform_int_distribution<int>(0, 200)(rng);
    const std::int32_t E = std::uniform_int_distribution<int>(1, 30)(rng);
    const std::int32_t B = std::uniform_int_distribution<int>(1, 8)(rng);
    const auto invalid = static_cast<Invalid>(iter % 3);
    const auto sem = static_cast<MapSemantics>((iter / 3) % 2);
    const bool use_map = (iter / 6) % 2 == 0;
    const std::int32_t G = use_map ? (sem == MapSemantics::vllm ? E : E + 4) : 0;
    const std::int32_t local = sem == MapSemantics::vllm ? std::max(1, E / 2) : E;
    V map;
    for (int g = 0; g < G; ++g) map.push_back(std::uniform_int_distribution<int>(-1, local - 1)(rng));
    std::vector<std::int64_t> ids(static_cast<std::size_t>(numel));
    const int hi = use_map ? G + 1 : E + 1;
    for (auto& x : ids) x = std::uniform_int_distribution<int>(-2, hi)(rng);
    const bool pad = iter % 5 == 0;
    const Problem p = make_problem(numel, E, B, iter % 2 == 0, G, pad, invalid, sem);
    const Outputs want = ref_of(p, ids, map);

    const Problem vp = variant_problem(p);
    CHECK(vp.map_size == (has_ep_passes(p) ? 0 : p.map_size));
    CHECK(vp.max_num_tokens_padded == p.max_num_tokens_padded);
    std::vector<std::int64_t> vids = ids;  // the pre-pass (bucket only)
    if (invalid == Invalid::bucket)
      for (auto& x : vids) x = slot_group(p, x, map);  // E for the bucket
    Outputs got = ref_of(vp, vids, has_ep_passes(p) ? V{} : map);
    if (has_ep_passes(p))  // the post-pass, over the used blocks
      for (std::int32_t j = 0; j < got.num_tokens_post_pad / B; ++j) {
        std::int32_t& e = got.expert_ids[static_cast<std::size_t>(j)];
        if (invalid == Invalid::bucket && e == E) e = -1;
        else if (vllm_map(p)) e = map[static_cast<std::size_t>(e)];
      }
    INFO("iter " << iter << " numel " << numel << " E " << E << " B " << B << " invalid "
                 << name_of(invalid) << " " << name_of(sem) << (use_map ? " map" : ""));
    REQUIRE(got.num_tokens_post_pad == want.num_tokens_post_pad);
    REQUIRE(got.sorted_token_ids == want.sorted_token_ids);
    REQUIRE(got.expert_ids == want.expert_ids);
    got.block_groups.clear();  // as read back from a device
    REQUIRE(check(p, want, got, true).ok);
  }
}

// The CLI's GB/s counts this traffic: the ids and the map read once, every
// output written once. 10 int64 ids (80 bytes) + a 6-entry map (24) + 40
// sorted ids, 5 expert ids and the count (4 x 46 = 184) = 288 bytes.
TEST_CASE("align bytes moved: ids and map read once, every output written once") {
  Problem p;
  p.numel = 10;
  p.ids_int64 = true;
  p.map_size = 6;
  p.max_num_tokens_padded = 40;
  p.max_num_blocks = 5;
  CHECK(bytes_moved(p) == 288.0);
  p.ids_int64 = false;  // 40-byte ids
  p.map_size = 0;
  CHECK(bytes_moved(p) == 40.0 + 184.0);
}
