// The permute CPU reference and checker: layouts, and that the checker
// catches a wrong row, a wrong inverse, a row in the wrong expert, non-zero
// padding and wrong offsets.
#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

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
