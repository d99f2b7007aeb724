// The host side of align::launch_ep on fake devices (no GPU needed): every
// answer about a variant under --invalid bucket / --map-semantics vllm is the
// variant's answer on variant_problem(p), and the workspace holds the
// variant's own part and then the bucket's groups.
#include <doctest/doctest.h>

#include <string>

#include "align/align.hpp"
#include "align/reference.hpp"
#include "fake_caps.hpp"

using namespace moekit;
using align::Invalid;
using align::MapSemantics;

using test::fake_sm90;

TEST_CASE("variant_problem: the bucket adds a group and int32 ids; vllm drops the map; else unchanged") {
  const align::Problem plain = align::make_problem(100, 64, 16, true, 80, false);
  CHECK_FALSE(align::has_ep_passes(plain));
  const align::Problem same = align::variant_problem(plain);
  CHECK(same.num_experts == 64);
  CHECK(same.map_size == 80);
  CHECK(same.ids_int64);

  const align::Problem b = align::make_problem(100, 64, 16, true, 80, false, Invalid::bucket);
  const align::Problem vb = align::variant_problem(b);
  CHECK(vb.num_experts == 65);
  CHECK(vb.map_size == 0);
  CHECK_FALSE(vb.ids_int64);
  CHECK(vb.invalid == Invalid::drop);
  CHECK(vb.max_num_tokens_padded == b.max_num_tokens_padded);
  CHECK(vb.max_num_blocks == b.max_num_blocks);

  const align::Problem v = align::make_problem(100, 64, 16, true, 64, false, Invalid::drop, MapSemantics::vllm);
  const align::Problem vv = align::variant_problem(v);
  CHECK(vv.num_experts == 64);
  CHECK(vv.map_size == 0);
  CHECK(vv.ids_int64);  // no pre-pass: the variant reads the ids themselves
  // vllm semantics without a map change nothing.
  CHECK_FALSE(align::has_ep_passes(align::make_problem(100, 64, 16, false, 0, false, Invalid::drop, MapSemantics::vllm)));
}

TEST_CASE("launch_ep's answers are the variant's on the problem it runs") {
  const DeviceCaps caps = fake_sm90();
  // E = 64 fits small-batch; E + the bucket does not.
  const align::Problem plain = align::make_problem(500, 64, 16, false, 0, false);
  const align::Problem b = align::make_problem(500, 64, 16, false, 0, false, Invalid::bucket);
  const align::Variant* sb = align::registry().find("small-batch");
  REQUIRE(sb != nullptr);
  CHECK(align::ep_not_applicable(*sb, plain, caps) == nullptr);
  CHECK(align::ep_not_applicable(*sb, b, caps) != nullptr);
  for (const align::Variant& v : align::registry().variants()) {
    CAPTURE(std::string(v.info.name));
    const align::Problem vp = align::variant_problem(b);
    const std::size_t own = v.workspace_bytes(vp, caps);
    CHECK(align::ep_variant_workspace_bytes(v, b, caps) == own);
    // The groups (numel int32) after the variant's part, at a 256-byte boundary.
    const std::size_t total = align::ep_workspace_bytes(v, b, caps);
    CHECK(total == (own + 255) / 256 * 256 + 4 * 500);
    CHECK(align::ep_zeroed_workspace(v, b, caps) == needs_zeroed_workspace(v, vp, caps));
    // Without passes: exactly the variant's.
    CHECK(align::ep_workspace_bytes(v, plain, caps) == v.workspace_bytes(plain, caps));
  }
  // An empty input needs no groups.
  const align::Problem z = align::make_problem(0, 8, 16, false, 0, false, Invalid::bucket);
  for (const align::Variant& v : align::registry().variants())
    CHECK(align::ep_workspace_bytes(v, z, caps) == v.workspace_bytes(align::variant_problem(z), caps));
  // auto picks for the problem it runs: a pick on E + 1 experts.
  const align::Problem big = align::make_problem(1 << 20, 1023, 128, false, 0, false, Invalid::bucket);
  CHECK(align::registry().pick_auto(align::variant_problem(big), caps, true).info.name ==
        align::registry().pick_auto(align::make_problem(1 << 20, 1024, 128, false, 0, false), caps, true).info.name);
}

TEST_CASE("the names of the modes: one spelling, both ways") {
  for (auto n : align::kInvalidNames) CHECK(align::name_of(*align::parse_invalid(n)) == n);
  for (auto n : align::kMapSemanticsNames) CHECK(align::name_of(*align::parse_map_semantics(n)) == n);
  CHECK_FALSE(align::parse_invalid("ignore").has_value());
  CHECK_FALSE(align::parse_map_semantics("global").has_value());
  CHECK(align::name_of(align::Problem{}.invalid) == "reject");
  CHECK(align::name_of(align::Problem{}.map_semantics) == "local");
}
