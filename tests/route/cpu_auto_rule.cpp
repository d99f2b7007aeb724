// The route `auto` table is the decision (fake sm_90 device; no GPU needed).
#include <doctest/doctest.h>

#include <string>

#include "auto_rule_text.hpp"
#include "fake_caps.hpp"
#include "route/route.hpp"

using namespace moekit;

TEST_CASE("route auto: block-rank while latency-bound, warp-regs up to E = 512 and K = 32, block while latency-bound, warp-smem") {
  const DeviceCaps sm90 = test::fake_sm90();
  for (int E : {1, 8, 64, 128, 256, 384, 512, 513, 1024, 4096})
    for (int K : {1, 2, 8, 16, 32, 33, 64})
      for (int G : {1, 8}) {
        if (K > E || E % G != 0) continue;
        for (std::int64_t T : {1, 16, 264, 265, 4096}) {
          route::Problem p;
          p.tokens = T;
          p.experts = E;
          p.topk = K;
          p.groups = G;
          p.topk_groups = G;
          // policy: 2 tokens per SM on sm_90
          const bool small = T <= 2 * 132;
          const bool rank = small && E >= 64 && E <= 512 && K >= 2 && K <= 32;
          const bool regs = E <= 512 && K <= 32;
          for (bool pdl : {false, true})  // the same picks with and without PDL
            CHECK(route::registry().pick_auto(p, sm90, pdl).info.name ==
                  (rank ? "block-rank" : regs ? "warp-regs" : small ? "block" : "warp-smem"));
        }
      }
  for (const auto& r : route::registry().auto_rows()) CHECK(route::registry().find(r.variant) != nullptr);
  testing::check_rule_text(route::registry().auto_rule(), route::registry().auto_rows());
}

TEST_CASE("auto rule text: the reader splits items at '; ' outside parentheses") {
  const auto items = testing::parse_rule_text("first that applies of: a if x <= 2 (p; q); b; c if y");
  REQUIRE(items.size() == 3);
  CHECK(items[0].variant == "a");
  CHECK(items[0].when == "x <= 2 (p; q)");
  CHECK(items[1].variant == "b");
  CHECK(items[1].when.empty());
  CHECK(items[2].variant == "c");
  CHECK(items[2].when == "y");
}
