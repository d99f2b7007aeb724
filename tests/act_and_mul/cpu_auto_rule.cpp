// The act-and-mul `auto` table is the decision (fake sm_90 / sm_80 devices;
// no device needed), and its sm_90 thresholds are the measured waves: 4
// spread blocks per SM (135168 outputs on 132 SMs), with and without PDL.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "act_and_mul/act_and_mul.hpp"
#include "auto_rule_text.hpp"
#include "fake_caps.hpp"
#include "act_and_mul/policy.hpp"

using namespace moekit;

namespace {

DeviceCaps fake(int major, int sms, bool pdl) {
  DeviceCaps c = test::fake_caps(major, 0, sms);
  c.pdl = pdl;
  c.cooperative = true;
  return c;
}

}  // namespace

TEST_CASE("act-and-mul auto: first applicable row; the sm_90 threshold is 135168 outputs, PDL or not") {
  const DeviceCaps sm90 = fake(9, 132, true), sm80 = fake(8, 108, false);
  for (const DeviceCaps* caps : {&sm90, &sm80})
    for (std::int64_t t : {1, 7, 33, 64, 66, 256, 264, 512, 1024, 4096, 65536})
      for (std::int64_t d : {1, 64, 511, 512, 513, 1024, 2048, 2560, 4096, 5120, 14336}) {
        // The skeleton launches with PDL where the device has it (--pdl on, the default).
        const bool pdl = caps->pdl;
        const act::Problem p{t, d, act::DType::bf16, act::Activation::silu};
        std::string_view want;
        for (const auto& r : act::registry().auto_rows())
          if ((!r.pdl_only || pdl) && (r.holds == nullptr || r.holds(p, *caps)) &&
              act::registry().find(r.variant)->not_applicable(p, *caps) == nullptr) {
            want = r.variant;
            break;
          }
        CHECK(act::registry().pick_auto(p, *caps, pdl).info.name == want);
        if (caps == &sm90) {  // the rule before the table: 2 x 128 x 4 x 132 outputs with PDL on sm_90
          const bool small = t * d <= 135168;
          CHECK(act::registry().pick_auto(p, *caps, pdl).info.name == (small ? "spread-pdl" : "flat-pdl"));
        } else {
          const bool small = t * d <= 110592;  // 108 SMs: 2 x 128 x 4 x 108
          CHECK(act::registry().pick_auto(p, *caps, pdl).info.name == (small ? "spread" : "flat"));
        }
      }
  // --pdl off on an sm_90: the plain layouts, up to one 4-block wave (135168 outputs: 33 rows
  // of 4096, 7 of 18432).
  for (std::int64_t t : {1, 32, 33, 34, 64, 96, 128, 4096, 65536}) {
    const act::Problem p{t, 4096, act::DType::bf16, act::Activation::silu};
    CHECK(act::registry().pick_auto(p, sm90, false).info.name == (t <= 33 ? "spread" : "flat"));
    CHECK_FALSE(launches_with_pdl(act::registry().pick_auto(p, sm90, false), false, sm90));
  }
  CHECK(act::registry().pick_auto(act::Problem{7, 18432, act::DType::bf16, act::Activation::silu}, sm90, false).info.name ==
        "spread");
  CHECK(act::registry().pick_auto(act::Problem{12, 14336, act::DType::bf16, act::Activation::silu}, sm90, false).info.name ==
        "flat");
  CHECK(act::registry().pick_auto(act::Problem{32, 4096, act::DType::bf16, act::Activation::silu}, sm90, true).info.name ==
        "spread-pdl");
  CHECK(act::registry().pick_auto(act::Problem{8, 18432, act::DType::bf16, act::Activation::silu}, sm90, true).info.name ==
        "flat-pdl");
  CHECK(act::registry().auto_reads_pdl());
  testing::check_rule_text(act::registry().auto_rule(), act::registry().auto_rows());
}

// The run report's "pdl" (Resolved::pdl): spread-pdl and flat-pdl launch with
// PDL whatever the launch's pdl says, the other variants as it says; nothing
// is "on" on a device without PDL. Hand-listed: a new variant must be placed.
TEST_CASE("act-and-mul report pdl: the -pdl variants launch with PDL whatever pdl says, where the device has it") {
  const DeviceCaps sm90 = fake(9, 132, true), sm80 = fake(8, 108, false);
  const std::vector<std::string_view> always = {"spread-pdl", "flat-pdl"};
  const std::vector<std::string_view> as_asked = {"scalar", "vectorized", "flat", "spread"};
  CHECK(act::registry().variants().size() == always.size() + as_asked.size());
  for (std::string_view name : always) {
    const act::Variant* v = act::registry().find(name);
    REQUIRE(v != nullptr);
    CHECK(launches_with_pdl(*v, false, sm90));
    CHECK(launches_with_pdl(*v, true, sm90));
    CHECK_FALSE(launches_with_pdl(*v, false, sm80));
  }
  for (std::string_view name : as_asked) {
    const act::Variant* v = act::registry().find(name);
    REQUIRE(v != nullptr);
    CHECK_FALSE(launches_with_pdl(*v, false, sm90));
    CHECK(launches_with_pdl(*v, true, sm90));
    CHECK_FALSE(launches_with_pdl(*v, false, sm80));
  }
}

TEST_CASE("act-and-mul loads: plain up to L2 / keep_in_l2_divisor and past stream_max_l2_multiple x L2, streaming between") {
  DeviceCaps h100 = fake(9, 132, true);
  h100.l2_bytes = 50 * 1024 * 1024;
  const std::int64_t share = static_cast<std::int64_t>(h100.l2_bytes) / act::policy_for(h100).keep_in_l2_divisor;
  CHECK(share == 6553600);  // 6.25 MiB on the H100's 50 MiB
  CHECK_FALSE(act::stream_loads(128 * 2 * 4096 * 2, h100));  // 128 x 4096 bf16: 2 MiB
  CHECK_FALSE(act::stream_loads(share, h100));
  CHECK(act::stream_loads(share + 1, h100));
  CHECK(act::stream_loads(1024 * 2 * 4096 * 2, h100));  // 16 MiB
  const std::int64_t top = static_cast<std::int64_t>(h100.l2_bytes) * act::policy_for(h100).stream_max_l2_multiple;
  CHECK(top == 50 * 1024 * 1024);
  CHECK(act::stream_loads(top, h100));
  CHECK_FALSE(act::stream_loads(top + 1, h100));
  CHECK_FALSE(act::stream_loads(std::int64_t{16384} * 2 * 4096 * 2, h100));  // 256 MiB
  DeviceCaps none;  // no device, or an unknown L2: stream
  CHECK(act::stream_loads(1, none));
}
