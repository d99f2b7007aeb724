// CPU tests of the dedup reference and checker: hand-computed cases, and cases
// where the checker must fail.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "errors.hpp"
#include "dedup/buffers.hpp"
#include "dedup/reference.hpp"

using moekit::dedup::Problem;
using V = std::vector<std::int32_t>;

namespace {
Problem prob(int bs, int m, int k, std::int64_t max_index = -1) {
  Problem p;
  p.batch = bs;
  p.mtp_step = m;
  p.k = k;
  p.max_index = max_index;
  return p;
}
}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("dedup reference: one batch, two rows with overlap") {
    // rows {5,3,9} and {3,1,5}: distinct = {1,3,5,9}, padded to 6 with -1.
    V in = {5, 3, 9, 3, 1, 5};
    CHECK(moekit::dedup::reference(prob(1, 2, 3), in) == V{1, 3, 5, 9, -1, -1});
  }

  TEST_CASE("dedup reference: batches are independent") {
    // bs=2, M=2, k=2: batch 0 = {7,7,2,7}, batch 1 = {2,0,0,4}.
    V in = {7, 7, 2, 7, 2, 0, 0, 4};
    CHECK(moekit::dedup::reference(prob(2, 2, 2), in) == V{2, 7, -1, -1, 0, 2, 4, -1});
  }

  TEST_CASE("dedup reference: negatives are ignored") {
    V in = {-1, 4, -1, -7, 4, 0, -1, 2147483647};
    CHECK(moekit::dedup::reference(prob(1, 4, 2), in) ==
          V{0, 4, 2147483647, -1, -1, -1, -1, -1});
  }

  TEST_CASE("dedup reference: all -1 and all equal") {
    CHECK(moekit::dedup::reference(prob(1, 1, 4), V(4, -1)) == V(4, -1));
    CHECK(moekit::dedup::reference(prob(1, 3, 1), V{9, 9, 9}) == V{9, -1, -1});
  }

  TEST_CASE("dedup reference: M=1, k=1 and empty batch") {
    CHECK(moekit::dedup::reference(prob(3, 1, 1), V{3, -1, 0}) == V{3, -1, 0});
    CHECK(moekit::dedup::reference(prob(0, 2, 5), V{}).empty());
  }

  TEST_CASE("dedup reference: wrong input size is an input error") {
    CHECK_THROWS_AS(moekit::dedup::reference(prob(2, 2, 2), V(7, 1)), moekit::InputError);
    CHECK_THROWS_AS(moekit::dedup::reference(prob(1, 0, 2), V{}), moekit::InputError);
  }

  TEST_CASE("dedup reference: random rows match a set-based model") {
    std::mt19937 rng(1234);
    for (int trial = 0; trial < 20; ++trial) {
      const int bs = 1 + int(rng() % 5), m = 1 + int(rng() % 4), k = 1 + int(rng() % 50);
      const int range = 1 + int(rng() % 100);
      V in(std::size_t(bs) * m * k);
      for (auto& v : in) v = int(rng() % (range + 1)) - 1;  // includes -1
      const V out = moekit::dedup::reference(prob(bs, m, k), in);
      REQUIRE(out.size() == in.size());
      for (int b = 0; b < bs; ++b) {
        std::set<std::int32_t> s;
        for (int i = 0; i < m * k; ++i) {
          if (in[std::size_t(b) * m * k + i] >= 0) s.insert(in[std::size_t(b) * m * k + i]);
        }
        V expect(s.begin(), s.end());
        expect.resize(std::size_t(m) * k, -1);
        CHECK(V(out.begin() + b * m * k, out.begin() + (b + 1) * m * k) == expect);
      }
    }
  }

  TEST_CASE("dedup check: equal outputs pass") {
    const Problem p = prob(2, 1, 3);
    const V ref = {1, 2, -1, 0, -1, -1};
    const auto r = moekit::dedup::check(p, ref, ref);
    CHECK(r.ok);
    CHECK(r.first_difference.empty());
    CHECK(r.max_error == 0.0);
    CHECK(r.error_unit == "exact");
  }

  TEST_CASE("dedup check: a wrong value fails and is named") {
    const Problem p = prob(2, 1, 3);
    const V ref = {1, 2, -1, 0, 5, -1};
    const V got = {1, 2, -1, 0, 6, -1};
    const auto r = moekit::dedup::check(p, ref, got);
    CHECK_FALSE(r.ok);
    CHECK(r.max_error == 1.0);
    CHECK(r.first_difference == "batch 1, column 1: expected 5, got 6");
  }

  TEST_CASE("dedup check: missing padding, poison and order are caught") {
    const Problem p = prob(1, 2, 2);
    const V ref = {3, 4, -1, -1};
    CHECK_FALSE(moekit::dedup::check(p, ref, V{3, 4, -1, 0}).ok);
    CHECK_FALSE(moekit::dedup::check(p, ref, V{3, 4, -1, int(0xABABABAB)}).ok);
    const auto r = moekit::dedup::check(p, ref, V{4, 3, -1, -1});
    CHECK_FALSE(r.ok);
    CHECK(r.first_difference == "batch 0, column 0: expected 3, got 4");
  }

  TEST_CASE("dedup check: size mismatch fails") {
    const Problem p = prob(1, 2, 2);
    CHECK_FALSE(moekit::dedup::check(p, V{3, 4, -1, -1}, V{3, 4, -1}).ok);
    CHECK_FALSE(moekit::dedup::check(p, V{3, 4, -1}, V{3, 4, -1}).ok);
  }
}

// The CLI's GB/s counts this traffic: bs = 3 batches of M = 2 rows of k = 5
// int32 values read (120 bytes), the [3, 10] output written (120 bytes).
TEST_CASE("dedup bytes moved: the rows read once, the output written once") {
  Problem p;
  p.batch = 3;
  p.mtp_step = 2;
  p.k = 5;
  CHECK(moekit::dedup::bytes_moved(p) == 240.0);
}
