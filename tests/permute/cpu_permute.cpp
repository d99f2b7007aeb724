// The permute CPU reference and checker: layouts, and that the checker
// catches a wrong row, a wrong inverse, a row in the wrong expert, non-zero
// padding and wrong offsets.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "permute/buffers.hpp"
#include "permute/reference.hpp"

using namespace moekit;
using permute::Layout;

namespace {

std::vector<std::byte> rows_of(std::int64_t T, std::int64_t rb) {
  std::vector<std::byte> h(static_cast<std::size_t>(T * rb));
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<std::byte>(i * 7 + 1);
  return h;
}

}  // namespace

TEST_CASE("permute reference: padded rows, inverse, zero padding") {
  const std::vector<std::int64_t> ids = {2, 0, 2, 1, 0, 2};  // T = 3, K = 2, E = 3
  const auto p = permute::make_problem(3, 2, 3, 4, 8, Layout::padded);
  const auto h = rows_of(3, 8);
  const auto o = permute::reference(p, h.data(), ids);
  CHECK(o.aligned.num_tokens_post_pad == 12);  // 2, 1, 3 slots -> 4 + 4 + 4 rows
  CHECK(o.permuted.size() == 12 * 8);
  for (std::size_t s = 0; s < ids.size(); ++s) {
    const std::int32_t r = o.inverse[s];
    CHECK(o.aligned.sorted_token_ids[r] == static_cast<std::int32_t>(s));
    CHECK(std::equal(o.permuted.begin() + r * 8, o.permuted.begin() + r * 8 + 8, h.begin() + (s / 2) * 8));
  }
  CHECK(permute::check(p, h.data(), ids, o, o).ok);
}

TEST_CASE("permute reference: compact rows and offsets") {
  const std::vector<std::int64_t> ids = {2, 0, 2, 1, 0, 2};
  const auto p = permute::make_problem(3, 2, 4, 64, 6, Layout::compact);
  const auto h = rows_of(3, 6);
  const auto o = permute::reference(p, h.data(), ids);
  CHECK(o.aligned.num_tokens_post_pad == 6);
  CHECK(o.offsets == std::vector<std::int64_t>{0, 2, 3, 6, 6});
  CHECK(permute::check(p, h.data(), ids, o, o).ok);
}

TEST_CASE("permute check: every kind of wrong output fails") {
  const std::vector<std::int64_t> ids = {2, 0, 2, 1, 0, 2};
  const auto h = rows_of(3, 8);
  const auto p = permute::make_problem(3, 2, 3, 4, 8, Layout::padded);
  const auto ref = permute::reference(p, h.data(), ids);

  auto bad = ref;
  bad.permuted[ref.inverse[3] * 8 + 5] ^= std::byte{1};  // one byte of a real row
  CHECK(permute::check(p, h.data(), ids, ref, bad).first_difference.find("differs") != std::string::npos);

  bad = ref;
  std::swap(bad.inverse[0], bad.inverse[1]);  // slots swapped
  CHECK_FALSE(permute::check(p, h.data(), ids, ref, bad).ok);

  bad = ref;
  const std::int32_t pad_row = 3;  // expert 0 has 2 slots in rows 0..3: rows 2, 3 pad
  REQUIRE(bad.aligned.sorted_token_ids[pad_row] == 6);
  bad.permuted[pad_row * 8] = std::byte{9};
  CHECK(permute::check(p, h.data(), ids, ref, bad).first_difference.find("padding") != std::string::npos);

  const auto pc = permute::make_problem(3, 2, 4, 64, 8, Layout::compact);
  const auto rc = permute::reference(pc, h.data(), ids);
  bad = rc;
  bad.offsets[2] += 1;
  CHECK_FALSE(permute::check(pc, h.data(), ids, rc, bad).ok);
  // A row moved into another expert's range (with the same bytes) is caught.
  bad = rc;
  bad.inverse[3] = 0;  // slot 3 (expert 1) -> row 0 (expert 0's)
  CHECK_FALSE(permute::check(pc, h.data(), ids, rc, bad).ok);
}

// ---- expert parallelism: --invalid, --expert-map, --map-semantics -----------

namespace {

using align::Invalid;
using align::MapSemantics;
using I32 = std::vector<std::int32_t>;

// Every kept slot's row holds its token's row; dropped slots have inverse -1.
void rows_are_tokens(const permute::Outputs& o, const std::vector<std::byte>& h, std::int64_t rb, int K) {
  for (std::size_t s = 0; s < o.inverse.size(); ++s) {
    const std::int32_t r = o.inverse[s];
    if (r < 0) continue;
    CHECK(o.aligned.sorted_token_ids[r] == static_cast<std::int32_t>(s));
    CHECK(std::equal(o.permuted.begin() + r * rb, o.permuted.begin() + (r + 1) * rb, h.begin() + (s / K) * rb));
  }
}

}  // namespace

TEST_CASE("permute: bucket rows are copied after the experts; drop leaves inverse -1") {
  // T = 4, K = 2, E = 3; invalid: -1, 3, 7.
  const std::vector<std::int64_t> ids = {2, -1, 0, 3, 2, 1, 7, 0};
  const auto h = rows_of(4, 8);
  const auto p = permute::make_problem(4, 2, 3, 2, 8, Layout::padded, 0, Invalid::bucket);
  const auto o = permute::reference(p, h.data(), ids);
  // e0: slots 2, 7 (2 rows); e1: 5 (2); e2: 0, 4 (2); bucket: 1, 3, 6 (4 rows, after the experts).
  CHECK(o.aligned.num_tokens_post_pad == 10);
  CHECK(o.inverse == I32{4, 6, 0, 7, 5, 2, 8, 1});
  CHECK(o.aligned.expert_ids == I32{0, 1, 2, -1, -1, -1});
  CHECK(o.permuted.size() == 10 * 8);
  rows_are_tokens(o, h, 8, 2);
  CHECK(permute::check(p, h.data(), ids, o, o).ok);

  const auto pd = permute::make_problem(4, 2, 3, 2, 8, Layout::padded, 0, Invalid::drop);
  const auto od = permute::reference(pd, h.data(), ids);
  CHECK(od.aligned.num_tokens_post_pad == 6);
  CHECK(od.inverse == I32{4, -1, 0, -1, 5, 2, -1, 1});
  rows_are_tokens(od, h, 8, 2);
  CHECK(permute::check(pd, h.data(), ids, od, od).ok);

  SUBCASE("a dropped slot given a row fails") {
    auto bad = od;
    bad.inverse[1] = 3;  // a padding row
    CHECK(permute::check(pd, h.data(), ids, od, bad).first_difference.find("expected -1") != std::string::npos);
  }
  SUBCASE("a bucket slot without its row fails") {
    auto bad = o;
    bad.inverse[3] = -1;
    CHECK_FALSE(permute::check(p, h.data(), ids, o, bad).ok);
  }
  SUBCASE("the bucket placed first fails") {
    auto bad = o;
    bad.aligned.sorted_token_ids = I32{1, 3, 6, 8, 2, 7, 5, 8, 0, 4, 8, 8};
    bad.aligned.expert_ids = I32{-1, -1, 0, 1, 2, -1};
    CHECK_FALSE(permute::check(p, h.data(), ids, o, bad).ok);
  }
}

TEST_CASE("permute compact: the bucket's rows start at offsets[E]") {
  const std::vector<std::int64_t> ids = {2, -1, 0, 3, 2, 1, 7, 0};
  const auto h = rows_of(4, 6);
  const auto p = permute::make_problem(4, 2, 3, 64, 6, Layout::compact, 0, Invalid::bucket);
  const auto o = permute::reference(p, h.data(), ids);
  CHECK(o.aligned.num_tokens_post_pad == 8);  // every slot has a row
  CHECK(o.offsets == std::vector<std::int64_t>{0, 2, 3, 5});  // bucket: rows 5..7
  CHECK(o.inverse == I32{3, 5, 0, 6, 4, 2, 7, 1});
  rows_are_tokens(o, h, 6, 2);
  CHECK(permute::check(p, h.data(), ids, o, o).ok);
  auto bad = o;
  std::swap(bad.inverse[1], bad.inverse[2]);  // a bucket slot into expert 0's rows (and back)
  std::swap(bad.aligned.sorted_token_ids[0], bad.aligned.sorted_token_ids[5]);
  CHECK_FALSE(permute::check(p, h.data(), ids, o, bad).ok);

  const auto pd = permute::make_problem(4, 2, 3, 64, 6, Layout::compact, 0, Invalid::drop);
  const auto od = permute::reference(pd, h.data(), ids);
  CHECK(od.aligned.num_tokens_post_pad == 5);
  CHECK(od.offsets == std::vector<std::int64_t>{0, 2, 3, 5});
  CHECK(permute::check(pd, h.data(), ids, od, od).ok);
}

TEST_CASE("permute with a local map: non-local experts dropped, or in the bucket") {
  // 5 global -> 3 local: 0->-1 1->0 2->1 3->-1 4->2.
  const I32 map{-1, 0, 1, -1, 2};
  const std::vector<std::int64_t> ids = {0, 1, 4, 3, 2, 1};  // T = 3, K = 2
  const auto h = rows_of(3, 4);
  const auto pr = permute::make_problem(3, 2, 3, 2, 4, Layout::padded, 5);  // reject: the map's -1 drops
  const auto orr = permute::reference(pr, h.data(), ids, map);
  CHECK(orr.inverse == I32{-1, 0, 4, -1, 2, 1});
  CHECK(permute::check(pr, h.data(), ids, orr, orr, map).ok);
  const auto pb = permute::make_problem(3, 2, 3, 2, 4, Layout::padded, 5, Invalid::bucket);
  const auto ob = permute::reference(pb, h.data(), ids, map);
  CHECK(ob.inverse == I32{6, 0, 4, 7, 2, 1});
  CHECK(ob.aligned.expert_ids == I32{0, 1, 2, -1, -1});
  rows_are_tokens(ob, h, 4, 2);
  CHECK(permute::check(pb, h.data(), ids, ob, ob, map).ok);
}

TEST_CASE("permute with vllm semantics: non-local experts' rows are copied too") {
  // 4 global experts, 2 local: 0->1 1->-1 2->0 3->-1.
  const I32 map{1, -1, 0, -1};
  const std::vector<std::int64_t> ids = {3, 0, 2, 0, 1, 3};  // T = 3, K = 2
  const auto h = rows_of(3, 4);
  const auto p = permute::make_problem(3, 2, 4, 2, 4, Layout::padded, 4, Invalid::reject, MapSemantics::vllm);
  const auto o = permute::reference(p, h.data(), ids, map);
  // global e0: slots 1, 3; e1: 4; e2: 2; e3: 0, 5 -> 8 rows, every slot copied.
  CHECK(o.aligned.num_tokens_post_pad == 8);
  CHECK(o.inverse == I32{6, 0, 4, 1, 2, 7});
  CHECK(o.aligned.expert_ids == I32{1, -1, 0, -1, -1});
  rows_are_tokens(o, h, 4, 2);
  CHECK(permute::check(p, h.data(), ids, o, o, map).ok);
  auto bad = o;  // slots of two non-local experts swapped: rows and inverse consistent, groups not
  std::swap(bad.aligned.sorted_token_ids[2], bad.aligned.sorted_token_ids[6]);
  std::swap(bad.inverse[4], bad.inverse[0]);
  CHECK_FALSE(permute::check(p, h.data(), ids, o, bad, map).ok);
  // Compact: the map only relabels expert_ids, which compact does not write: rows per global expert.
  const auto pc = permute::make_problem(3, 2, 4, 2, 4, Layout::compact, 4, Invalid::reject, MapSemantics::vllm);
  CHECK(pc.align.map_size == 0);
  const auto oc = permute::reference(pc, h.data(), ids, map);
  CHECK(oc.offsets == std::vector<std::int64_t>{0, 2, 3, 4, 6});
  CHECK(permute::check(pc, h.data(), ids, oc, oc, map).ok);
  // A vllm map must have E entries.
  CHECK_THROWS(permute::make_problem(3, 2, 4, 2, 4, Layout::compact, 5, Invalid::reject, MapSemantics::vllm));
  CHECK_THROWS(permute::make_problem(3, 2, 4, 2, 4, Layout::padded, 3, Invalid::reject, MapSemantics::vllm));
}

TEST_CASE("permute: all-invalid input and 0 tokens") {
  const std::vector<std::int64_t> ids = {-1, 5, 9, -3};  // T = 2, K = 2, E = 2
  const auto h = rows_of(2, 4);
  for (Layout layout : {Layout::padded, Layout::compact}) {
    const auto pb = permute::make_problem(2, 2, 2, 4, 4, layout, 0, Invalid::bucket);
    const auto ob = permute::reference(pb, h.data(), ids);
    CHECK(ob.aligned.num_tokens_post_pad == 4);
    CHECK(ob.inverse == I32{0, 1, 2, 3});
    if (layout == Layout::compact) CHECK(ob.offsets == std::vector<std::int64_t>{0, 0, 0});
    CHECK(permute::check(pb, h.data(), ids, ob, ob).ok);
    const auto pd = permute::make_problem(2, 2, 2, 4, 4, layout, 0, Invalid::drop);
    const auto od = permute::reference(pd, h.data(), ids);
    CHECK(od.aligned.num_tokens_post_pad == 0);
    CHECK(od.permuted.empty());
    CHECK(od.inverse == I32{-1, -1, -1, -1});
    CHECK(permute::check(pd, h.data(), ids, od, od).ok);
  }
  const auto z = permute::make_problem(0, 2, 2, 4, 4, Layout::padded, 0, Invalid::bucket);
  const auto oz = permute::reference(z, nullptr, {});
  CHECK(oz.aligned.num_tokens_post_pad == 0);
  CHECK(oz.aligned.sorted_token_ids.empty());  // no slot pads no group
  CHECK(permute::check(z, nullptr, {}, oz, oz).ok);
}

// The GB/s of the CLI and bench_permute count this traffic (docs/permute.md):
// T = 3 tokens x K = 2 slots, 10-byte rows: ids 6 x 4 + hidden 3 x 10 + rows
// written 6 x 10 + inverse 6 x 4 = 138 bytes, whatever the layout's padding.
TEST_CASE("permute bytes moved: ids and hidden read once, one row per slot, inverse") {
  CHECK(permute::bytes_moved(permute::make_problem(3, 2, 4, 16, 10, permute::Layout::padded)) == 138.0);
  CHECK(permute::bytes_moved(permute::make_problem(3, 2, 4, 1, 10, permute::Layout::compact)) == 138.0);
  CHECK(permute::bytes_moved(permute::make_problem(0, 2, 4, 16, 10, permute::Layout::padded)) == 0.0);
}
