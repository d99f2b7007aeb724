// The align `auto` table is the decision: on fake sm_90 / sm_80 devices the
// pick is the first row whose condition holds and whose variant applies, the
// rule's text names every row, and on sm_90 the picks are the ones of the
// hand-written rule the table replaced. No device needed.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "align/align.hpp"
#include "align/reference.hpp"
#include "auto_rule_text.hpp"
#include "fake_caps.hpp"

using namespace moekit;

namespace {

DeviceCaps fake(int major, int sms, std::size_t smem_optin, bool pdl) {
  DeviceCaps c = test::fake_caps(major, 0, sms);
  c.name = "fake sm_" + std::to_string(major * 10);
  c.smem_optin = smem_optin;
  c.smem_per_sm = smem_optin + 1024;
  c.cooperative = true;
  c.pdl = pdl;
  return c;
}

const DeviceCaps kSm90 = fake(9, 132, 227 * 1024, true);
const DeviceCaps kSm80 = fake(8, 108, 163 * 1024, false);

bool applies(std::string_view name, const align::Problem& p, const DeviceCaps& caps) {
  const align::Variant* v = align::registry().find(name);
  REQUIRE(v != nullptr);
  return v->not_applicable(p, caps) == nullptr;
}

// The rule restated by hand (registry.cu; sm_90 thresholds of 2026-11-26).
std::string_view legacy_sm90(const align::Problem& p, const DeviceCaps& c) {
  const int E = p.num_experts;
  if (p.numel >= 128 && p.numel <= 512 && E <= 128 && p.max_num_tokens_padded >= 8192 && applies("stripe", p, c))
    return "stripe";
  const std::int64_t solo_most = E <= 16 ? std::max<std::int64_t>(512, std::min<std::int64_t>(3072, 512 * E)) : 512;
  if (p.numel >= 33 && p.numel <= solo_most && p.max_num_tokens_padded <= 8704 && E <= 512 && applies("solo", p, c))
    return "solo";
  if (p.numel <= 128 && applies("micro", p, c)) return "micro";
  if (p.numel <= 256 && E >= 2048 && p.block_size >= 64 && applies("micro", p, c)) return "micro";
  if (p.numel <= 256 && p.block_size < 64 && applies("relay", p, c)) return "relay";
  if (p.numel >= 3073 && p.numel <= (E > 64 ? 8192 : 16384) && applies("cluster", p, c)) return "cluster";
  const bool tiny_size = p.numel <= (E <= 16 ? 4096 : E >= 1024 ? 16384 : 8192);
  if (tiny_size && applies("tiny", p, c)) return "tiny";
  if (applies("onepass", p, c)) return "onepass";
  const bool one_ok = applies("oneshot", p, c), two_ok = applies("twopass", p, c),
             per_ok = applies("persistent", p, c), huge = E >= 4096;
  if (one_ok && (p.numel <= 8192 || huge)) return "oneshot";
  if (per_ok && huge) return "persistent";
  if (two_ok) return "twopass";
  if (per_ok) return "persistent";
  if (one_ok) return "oneshot";
  if (applies("tiny", p, c)) return "tiny";
  return "warpscan";
}

std::vector<align::Problem> grid() {
  std::vector<align::Problem> ps;
  for (std::int64_t n : {1, 8, 32, 33, 64, 65, 100, 128, 129, 256, 257, 512, 513, 1024, 1500, 2048, 2049, 3072, 3073, 4096, 4097, 6000, 8192, 8193, 12000, 16384, 16385, 32768, 65535,
                         65536, 300000, 1 << 20, 1081345, 2162688, 2162689, 3 << 20})
    for (int E : {1, 2, 4, 8, 16, 17, 32, 33, 64, 65, 127, 128, 129, 256, 511, 512, 513, 1023, 1024, 2047, 2048, 4095, 4096, 16384, 19370, 19371,
                  24576, 29000, 40000})
      for (bool i64 : {false, true})
        for (int B : {1, 16, 63, 64, 128}) {
          try {
            ps.push_back(align::make_problem(n, E, B, i64, 0, true));
          } catch (...) {  // outputs past int32: not a problem any variant sees
          }
        }
  return ps;
}

}  // namespace

// Hand-listed cells, each taken from the measurements docs/align.md "auto"
// cites (its item number in the comment), not from the table under test.
struct Cell {
  std::int64_t numel;
  int E, B;
  bool i64;
  const char* sm90;  // the pick on sm_90
  const char* sm80;  // the pick on sm_80 (no clusters)
};
const Cell kCells[] = {
    {16 * 8, 64, 128, false, "stripe", "stripe"},    // 0: 16 x 8, E 64, 8,256 rows
    {64 * 8, 64, 128, false, "stripe", "stripe"},    // 0: 64 x 8, E 64
    {16 * 8, 128, 128, false, "stripe", "stripe"},   // 0: 16 x 8, E 128
    {1024, 128, 128, false, "tiny", "tiny"},         // 0: not past 512 slots (tiny 2.58 vs 3.23)
    {4 * 8, 64, 128, false, "micro", "micro"},       // 0: 32 slots, micro 1.36 vs stripe 1.80
    {128, 128, 16, false, "solo", "solo"},           // 1: Llama-4 decode step, 2,048 rows
    {16 * 6, 64, 64, false, "solo", "solo"},         // 1: DeepSeek-V2-Lite 16-token prefix
    {64 * 6, 64, 64, false, "solo", "solo"},         // 1: 64-token prefix
    {32 * 2, 8, 128, false, "solo", "solo"},         // 1: 32 tokens x 2, E 8
    {1024 * 2, 8, 128, false, "solo", "solo"},       // 1: 2048 slots, E 8 (solo to 3072 for E <= 16)
    {1 * 8, 256, 128, false, "micro", "micro"},      // 2: one token
    {32 * 8, 2048, 64, false, "micro", "micro"},     // 2: 256 slots, E >= 2048, B >= 64
    {32 * 8, 1024, 128, false, "tiny", "tiny"},      // 2: E 1024 tiny 2.86 vs micro 2.96
    {200, 1024, 16, false, "relay", "relay"},        // 3: B < 64, solo out (E > 512)
    {17 * 8, 512, 128, false, "tiny", "tiny"},       // 3: B >= 64: tiny 2.34 vs relay 2.71
    {2048 * 2, 8, 128, false, "cluster", "tiny"},    // 4: 4096 x 2 ... 2048 x 2, E 8
    {1024 * 8, 32, 128, false, "cluster", "tiny"},   // 4: 1024 x 8, E 32
    {8192 * 2, 8, 128, true, "cluster", "onepass"},  // 4: int64 ids, 8192 x 2, E 8
    {12288, 128, 128, false, "onepass", "onepass"},  // 4: not past 8192 for E > 64
    {32768, 8, 128, false, "onepass", "onepass"},    // 4: not at 32768 slots
    {2048 * 8, 4096, 128, false, "tiny", "tiny"},    // 5: 16384 when E >= 1024
    {4096 * 8, 256, 128, false, "onepass", "onepass"},     // 6: 4096 tokens x 8
    {65536 * 8, 256, 128, false, "onepass", "onepass"},    // 6: 65536 tokens x 8
    {3 << 20, 256, 128, false, "twopass", "twopass"},      // 7: past one wave of onepass
    {3 << 20, 4096, 128, false, "persistent", "persistent"},  // 7: E >= 4096
};

TEST_CASE("align auto: the picks of hand-listed cells from docs/align.md") {
  for (const Cell& c : kCells) {
    const align::Problem p = align::make_problem(c.numel, c.E, c.B, c.i64, 0, true);
    CAPTURE(c.numel);
    CAPTURE(c.E);
    CAPTURE(c.B);
    CAPTURE(c.i64);
    for (bool pdl : {false, true}) {  // the same picks for launches with and without PDL
      CAPTURE(pdl);
      CHECK(align::registry().pick_auto(p, kSm90, pdl).info.name == std::string_view(c.sm90));
      CHECK(align::registry().pick_auto(p, kSm80, pdl).info.name == std::string_view(c.sm80));
    }
  }
}

TEST_CASE("align auto: on sm_90 the table picks what the hand-written rule picks") {
  for (const align::Problem& p : grid()) {
    CAPTURE(p.numel);
    CAPTURE(p.num_experts);
    CAPTURE(p.ids_int64);
    CHECK(align::registry().pick_auto(p, kSm90, true).info.name == legacy_sm90(p, kSm90));
  }
}

// align's `auto` variant and the families that run align's pick ask for it
// without a pdl (a workspace size has none): that holds only while no row
// depends on PDL.
TEST_CASE("align auto: no row depends on PDL") {
  CHECK_FALSE(align::registry().auto_reads_pdl());
  for (const align::Problem& p : grid())
    CHECK(align::registry().pick_auto(p, kSm90, false).info.name == align::registry().pick_auto(p, kSm90, true).info.name);
}

TEST_CASE("align auto: the rule's text names every row, and every row a variant") {
  for (const auto& r : align::registry().auto_rows()) CHECK(align::registry().find(r.variant) != nullptr);
  testing::check_rule_text(align::registry().auto_rule(), align::registry().auto_rows());
}

TEST_CASE("align cluster: sm_90 only, E and numel bounds by id width") {
  const align::Problem p = align::make_problem(8192, 8, 128, false, 0, true);
  CHECK(applies("cluster", p, kSm90));
  CHECK_FALSE(applies("cluster", p, kSm80));
  CHECK(applies("cluster", p, DeviceCaps{}));  // no device: only the device-independent limits
  CHECK(applies("cluster", align::make_problem(65536, 128, 128, false, 0, true), kSm90));
  CHECK_FALSE(applies("cluster", align::make_problem(64, 129, 128, false, 0, true), kSm90));
  CHECK_FALSE(applies("cluster", align::make_problem(65537, 8, 128, false, 0, true), kSm90));
  CHECK_FALSE(applies("cluster", align::make_problem(32769, 8, 128, true, 0, true), kSm90));
  CHECK_FALSE(applies("cluster", align::make_problem(64, 1025, 128, false, 0, true), kSm90));
}

TEST_CASE("align limits name this device's numbers, and the formula without one") {
  const align::Variant* onepass = align::registry().find("onepass");
  REQUIRE(onepass != nullptr);
  CHECK(onepass->limits(kSm90).find("2162688 int32") != std::string::npos);  // 4 x 1024 x 4 x 132
  CHECK(onepass->limits(kSm80).find("1769472 int32") != std::string::npos);  // ... x 108
  CHECK(onepass->limits(DeviceCaps{}).find("SMs") != std::string::npos);
  for (const auto& v : align::registry().variants()) CHECK(!v.limits(DeviceCaps{}).empty());
}

// `stable` by hand (registry.cu's stable_choice; sm_90 thresholds of 2026-11-26).
TEST_CASE("align stable: the variant it runs on sm_90") {
  for (const align::Problem& p : grid()) {
    CAPTURE(p.numel);
    CAPTURE(p.num_experts);
    CAPTURE(p.block_size);
    CAPTURE(p.ids_int64);
    const int E = p.num_experts;
    const bool huge = E >= 4096;
    std::string_view want;
    if (p.numel >= (E > 128 ? 129 : 128) && p.numel <= 1024 && E <= 512 && applies("stripe", p, kSm90))
      want = "stripe";
    else if (applies("micro", p, kSm90))
      want = "micro";
    else if (applies("oneshot", p, kSm90) && (p.numel <= 8192 || huge))
      want = "oneshot";
    else if (applies("persistent", p, kSm90) && huge)
      want = "persistent";
    else if (applies("twopass", p, kSm90))
      want = "twopass";
    else if (applies("persistent", p, kSm90))
      want = "persistent";
    else
      want = "oneshot";
    const align::Variant& got = align::pick_stable(p, kSm90);
    CHECK(got.info.name == want);
    CHECK(got.stable_order);
  }
}

// The kernels `auto` may launch (its registry entry's `kernels`, read by
// `moekit variants --resources` and `moekit sass`) are those of the variants
// its rows pick: a row added without them would go unlisted.
TEST_CASE("align auto: its kernels spec names exactly the variants of its rows") {
  std::vector<std::string> rows, named;
  for (const auto& row : align::registry().auto_rows())
    if (std::find(rows.begin(), rows.end(), row.variant) == rows.end()) rows.emplace_back(row.variant);
  const align::Variant* a = align::registry().find("auto");
  REQUIRE(a != nullptr);
  std::string_view spec = a->info.kernels;
  while (!spec.empty()) {
    const std::size_t sp = spec.find(' ');
    const std::string_view tok = spec.substr(0, sp);
    REQUIRE(tok.starts_with("@"));
    named.emplace_back(tok.substr(1));
    spec = sp == std::string_view::npos ? std::string_view() : spec.substr(sp + 1);
  }
  std::sort(rows.begin(), rows.end());
  std::sort(named.begin(), named.end());
  CHECK(named == rows);
}
