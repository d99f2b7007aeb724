// GPU tests of every dedup variant against the CPU reference.
//
// Shapes: bs {1,2,115,1000} x M {1,2,3,4} x k {1,7,64,511,2048,4096}, each with a
// duplicate-heavy pattern plus one rotating pattern; every value pattern on a
// set of representative shapes; misaligned buffers; rows over 1M values for the
// variants without a size limit. Outputs and workspaces are poisoned first;
// outputs sit between guard zones that must stay poisoned. Every (variant,
// case) is one assertion whose failure names the variant, the shape, the
// value pattern and the seed; "dedup: summary" prints the one-line total.
//
// MOEKIT_GPU_SUBSET=sanitizer runs a small representative subset (for
// compute-sanitizer).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "dedup/buffers.hpp"
#include "dedup/dedup.hpp"
#include "dedup/reference.hpp"
#include "gpu_case.hpp"

namespace dd = moekit::dedup;
using V = std::vector<std::int32_t>;

namespace {

bool subset_mode() { return moekit::test::sanitizer_subset(); }

enum class Pattern {
  kDup,          // uniform in [0, n/2): many duplicates
  kDistinct,     // all distinct, spread over 31 bits
  kEqual,        // one value per batch
  kAllNeg,       // every entry -1
  kHalfNeg,      // half -1 (plus a few other negatives), rest full range
  kOverlap0,     // rows of distinct values < 131072; row m shares a fraction with row m-1
  kOverlap05,
  kOverlap09,
  kOverlap10,
  kFullRange,    // uniform in [0, 2^31), with 0 and 2^31-1 planted
  kSmallMax,     // values < 64, --max-index 64 promised
  kHighRange,    // values in [2^31 - 5000, 2^31): large values, small range
  kClustered,    // 95% in [0, 1000), 5% anywhere: a wide range with one crowded bucket
  kCount
};

const char* name(Pattern p) {
  static const char* names[] = {"dup",         "distinct",    "equal",      "all-neg",
                                "half-neg",    "overlap-0",   "overlap-0.5", "overlap-0.9",
                                "overlap-1.0", "full-range",  "small-max",  "high-range", "clustered"};
  return names[static_cast<int>(p)];
}

struct Case {
  dd::Problem p;
  Pattern pattern;
  V in;
  std::uint64_t seed = 0;
};

Case make_case(int bs, int m, int k, Pattern pat, std::uint64_t seed) {
  Case c;
  c.p.batch = bs;
  c.p.mtp_step = m;
  c.p.k = k;
  c.pattern = pat;
  c.seed = seed;
  const std::int64_t n = std::int64_t(m) * k;
  c.in.resize(std::size_t(bs) * std::size_t(n));
  std::mt19937_64 rng(seed);
  auto uni = [&](std::uint64_t lo, std::uint64_t hi) {  // [lo, hi)
    return static_cast<std::int32_t>(lo + rng() % (hi - lo));
  };
  const std::uint64_t two31 = std::uint64_t(1) << 31;
  for (int b = 0; b < bs; ++b) {
    std::int32_t* row = c.in.data() + std::size_t(b) * std::size_t(n);
    switch (pat) {
      case Pattern::kDup: {
        const std::uint64_t hi = std::max<std::uint64_t>(1, std::uint64_t(n) / 2);
        for (std::int64_t i = 0; i < n; ++i) row[i] = uni(0, hi);
        break;
      }
      case Pattern::kDistinct: {
        // i -> i*a + c mod 2^31 is a bijection for odd a; shuffle the order too.
        const std::uint32_t a = static_cast<std::uint32_t>(rng()) | 1u, cc = static_cast<std::uint32_t>(rng());
        for (std::int64_t i = 0; i < n; ++i)
          row[i] = static_cast<std::int32_t>((static_cast<std::uint32_t>(i) * a + cc) & 0x7fffffffu);
        std::shuffle(row, row + n, rng);
        break;
      }
      case Pattern::kEqual: {
        const std::int32_t v = uni(0, two31);
        std::fill(row, row + n, v);
        break;
      }
      case Pattern::kAllNeg:
        std::fill(row, row + n, -1);
        break;
      case Pattern::kHalfNeg:
        for (std::int64_t i = 0; i < n; ++i) {
          const auto r = rng() % 100;
          row[i] = r < 48 ? -1 : r == 48 ? -7 : r == 49 ? INT32_MIN : uni(0, two31);
        }
        break;
      case Pattern::kOverlap0:
      case Pattern::kOverlap05:
      case Pattern::kOverlap09:
      case Pattern::kOverlap10: {
        const double share = pat == Pattern::kOverlap0    ? 0.0
                             : pat == Pattern::kOverlap05 ? 0.5
                             : pat == Pattern::kOverlap09 ? 0.9
                                                          : 1.0;
        constexpr std::uint32_t kRange = 131072;
        // Row 0: k distinct values (k <= 131072); row r: each slot reuses a value of
        // row r-1 with probability `share`, else draws a fresh one.
        const std::uint32_t a = (static_cast<std::uint32_t>(rng()) | 1u), cc = static_cast<std::uint32_t>(rng());
        for (int i = 0; i < k; ++i) row[i] = static_cast<std::int32_t>((std::uint32_t(i) * a + cc) % kRange);
        std::shuffle(row, row + k, rng);
        std::uniform_real_distribution<double> u01(0.0, 1.0);
        for (int r = 1; r < m; ++r) {
          std::int32_t* cur = row + std::size_t(r) * k;
          const std::int32_t* prev = cur - k;
          std::copy(prev, prev + k, cur);
          std::shuffle(cur, cur + k, rng);
          for (int i = 0; i < k; ++i)
            if (!(u01(rng) < share)) cur[i] = uni(0, kRange);
        }
        break;
      }
      case Pattern::kFullRange:
        for (std::int64_t i = 0; i < n; ++i) row[i] = uni(0, two31);
        row[rng() % n] = 0;
        row[rng() % n] = INT32_MAX;
        break;
      case Pattern::kSmallMax:
        c.p.max_index = 64;
        for (std::int64_t i = 0; i < n; ++i) row[i] = uni(0, 64);
        break;
      case Pattern::kHighRange:
        for (std::int64_t i = 0; i < n; ++i) row[i] = uni(two31 - 5000, two31);
        break;
      case Pattern::kClustered:
        for (std::int64_t i = 0; i < n; ++i) row[i] = rng() % 100 < 95 ? uni(0, 1000) : uni(0, two31);
        row[rng() % n] = INT32_MAX;  // keep the range wide even for tiny rows
        break;
      case Pattern::kCount:
        break;
    }
  }
  return c;
}

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
} g_tally;

std::string describe(const Case& c, const dd::Variant& v, const std::string& extra = "") {
  return std::string(v.info.name) + " bs=" + std::to_string(c.p.batch) + " M=" + std::to_string(c.p.mtp_step) +
         " k=" + std::to_string(c.p.k) + " int32 pattern=" + name(c.pattern) + " seed=" + std::to_string(c.seed) +
         extra;
}

// Runs `v` on the case (input at element offset in_off, output at out_off
// between poisoned guard zones) and compares with `ref`: one assertion. With
// `pdl` (where the device has it) v launches with programmatic dependent
// launch, twice back to back, the second overlapping the first.
void run_one(const dd::Variant& v, const Case& c, const V& ref, int in_off = 0, int out_off = 0, bool pdl = false) {
  const moekit::DeviceCaps& caps = moekit::device_caps();
  const dd::Problem& p = c.p;
  pdl = pdl && caps.pdl;
  if (v.not_applicable(c.p, caps) != nullptr) {
    ++g_tally.skipped;
    return;
  }
  // Input and output `in_off` and `out_off` elements off their allocations, the
  // output poisoned between guard zones, a workspace of 0xCD (or zeroed).
  moekit::SetOptions o = moekit::SetOptions::checked(std::size_t(in_off) * 4);
  o.output_misalign = std::size_t(out_off) * 4;
  const moekit::WorkspaceNeed need = moekit::WorkspaceNeed::of(v, c.p, caps);
  const bool zeroed = need.zeroed;
  const dd::DeviceBuffers d(c.p, c.in, need, o);
  const dd::Buffers b = d.buffers(0);
  std::string why = moekit::test::launch_and_sync([&] { return v.launch(p, b, nullptr, pdl); }, pdl ? 2 : 1);
  if (why.empty()) {
    V got;
    if (std::string g = d.download(got); !g.empty()) {
      why = g;
    } else if (zeroed && !d.workspace_zero()) {
      why = "left its workspace non-zero";
    } else {
      const auto r = dd::check(c.p, ref, got);
      if (!r.ok) why = r.first_difference;
    }
  }
  const std::string extra = (in_off || out_off ? " (offset in " + std::to_string(in_off) + " out " +
                                                     std::to_string(out_off) + ")"
                                               : std::string()) +
                            (pdl ? " pdl (twice back to back)" : "");
  moekit::test::expect_ok(describe(c, v, extra), why);
  ++(why.empty() ? g_tally.passed : g_tally.failed);
}

// Every variant on one case, and `auto` must always apply.
void run_all(const Case& c) {
  const V ref = dd::reference(c.p, c.in);
  for (const dd::Variant& v : dd::registry().variants())
    for (bool pdl : {false, true}) run_one(v, c, ref, 0, 0, pdl);
  const dd::Variant& a = dd::registry().pick_auto(c.p, false);
  CHECK_MESSAGE(a.not_applicable(c.p, moekit::device_caps()) == nullptr, "auto picked an inapplicable variant");
}

}  // namespace

TEST_SUITE("gpu") {
  TEST_CASE("dedup registry: names, lookup and applicability") {
    REQUIRE(dd::registry().variants().size() >= 6);
    for (const dd::Variant& v : dd::registry().variants()) {
      CHECK(dd::registry().find(v.info.name) == &v);
      CHECK(!v.info.description.empty());
    }
    CHECK(dd::registry().find("no-such-variant") == nullptr);
    REQUIRE(dd::registry().find("general") != nullptr);
    dd::Problem big;
    big.batch = 3;
    big.mtp_step = 4;
    big.k = 1 << 20;
    const moekit::DeviceCaps& caps = moekit::device_caps();
    CHECK(dd::registry().find("general")->not_applicable(big, caps) == nullptr);
    CHECK(dd::registry().find("bitmask")->not_applicable(big, caps) != nullptr);
    CHECK(std::string(dd::registry().pick_auto(big, false).info.name) == "general");
    CHECK(!dd::registry().auto_rule().empty());
  }

  TEST_CASE("dedup: shape grid") {
    const bool sub = subset_mode();
    const std::vector<int> bss = sub ? std::vector<int>{2} : std::vector<int>{1, 2, 115, 1000};
    const std::vector<int> ms = sub ? std::vector<int>{1, 2, 3} : std::vector<int>{1, 2, 3, 4};
    const std::vector<int> ks = sub ? std::vector<int>{7, 2048} : std::vector<int>{1, 7, 64, 511, 2048, 4096};
    int rot = 0;
    std::uint64_t seed = 1;
    for (int bs : bss)
      for (int m : ms)
        for (int k : ks) {
          run_all(make_case(bs, m, k, Pattern::kDup, seed++));
          // one more pattern per shape, cycling through the others
          const auto pat = static_cast<Pattern>(1 + (rot++ % (static_cast<int>(Pattern::kCount) - 1)));
          run_all(make_case(bs, m, k, pat, seed++));
        }
  }

  TEST_CASE("dedup: every value pattern on representative shapes") {
    const bool sub = subset_mode();
    struct S {
      int bs, m, k;
    };
    const std::vector<S> shapes = sub ? std::vector<S>{{2, 2, 2048}}
                                      : std::vector<S>{{115, 1, 7},    {115, 2, 2048}, {115, 3, 511},
                                                       {115, 4, 2048}, {2, 4, 4096},   {1, 1, 1},
                                                       {115, 1, 64},   {1000, 2, 64}};
    std::uint64_t seed = 1000;
    for (const S& s : shapes)
      for (int pi = 0; pi < static_cast<int>(Pattern::kCount); ++pi) {
        const auto pat = static_cast<Pattern>(pi);
        if (sub && !(pat == Pattern::kHalfNeg || pat == Pattern::kOverlap09 || pat == Pattern::kDistinct ||
                     pat == Pattern::kSmallMax || pat == Pattern::kAllNeg || pat == Pattern::kClustered))
          continue;
        run_all(make_case(s.bs, s.m, s.k, pat, seed++));
      }
  }

  TEST_CASE("dedup: misaligned input and output fall back to scalar access") {
    // Rows of 4096 values would take the 16-byte path; offset buffers by one or
    // three elements so that it is not legal any more.
    const std::vector<std::pair<int, int>> offs = {{1, 0}, {0, 1}, {3, 3}};
    std::uint64_t seed = 5000;
    for (auto [io, oo] : offs) {
      const Case c = make_case(subset_mode() ? 2 : 115, 2, 2048, Pattern::kOverlap05, seed++);
      const V ref = dd::reference(c.p, c.in);
      for (const dd::Variant& v : dd::registry().variants()) run_one(v, c, ref, io, oo);
    }
  }

  TEST_CASE("dedup: tile boundaries and rows beyond the block variants") {
    // Row lengths around each tile size; 16385+ must be handled by general/auto.
    const bool sub = subset_mode();
    const std::vector<int> ns = sub ? std::vector<int>{16385} : std::vector<int>{512, 513, 1025, 4095, 8193, 16384, 16385, 40000};
    std::uint64_t seed = 7000;
    for (int n : ns) {
      run_all(make_case(3, 1, n, Pattern::kDup, seed++));
      run_all(make_case(3, 1, n, Pattern::kFullRange, seed++));
    }
  }

  TEST_CASE("dedup: over 1M values per batch (general, auto)") {
    if (subset_mode()) return;
    std::uint64_t seed = 9000;
    const std::vector<std::pair<Pattern, std::array<int, 3>>> cases = {
        {Pattern::kDup, {2, 1, 1 << 20}},
        {Pattern::kHalfNeg, {1, 4, 300000}},
        {Pattern::kDistinct, {1, 1, 1100000}}};
    for (auto& [pat, s] : cases) {
      const Case c = make_case(s[0], s[1], s[2], pat, seed++);
      const V ref = dd::reference(c.p, c.in);
      run_one(*dd::registry().find("general"), c, ref);
      run_one(dd::registry().pick_auto(c.p, false), c, ref);
    }
  }

  TEST_CASE("dedup: summary") {
    std::printf("dedup gpu summary: %d variant runs passed, %d failed, %d not applicable (skipped)%s\n",
                g_tally.passed, g_tally.failed, g_tally.skipped, subset_mode() ? " [subset]" : "");
    CHECK(g_tally.passed > 0);
  }
}
