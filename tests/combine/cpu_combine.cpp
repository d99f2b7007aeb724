// The combine CPU reference and checker.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "combine/buffers.hpp"
#include "combine/reference.hpp"
#include "half.hpp"

using namespace moekit;

TEST_CASE("combine reference: weighted sum of the rows, dropped slots skipped, scaled") {
  combine::Problem p;
  p.tokens = 2;
  p.topk = 2;
  p.rows = 3;
  p.hidden = 2;
  p.dtype = combine::DType::f32;
  p.scaling = 2.0f;
  const std::vector<float> x = {1, 2, 10, 20, 100, 200};
  const std::vector<std::int32_t> inv = {2, 0, -1, 1};
  const std::vector<float> w = {0.5f, 0.25f, 9.0f, 1.0f};
  std::vector<float> out(4);
  combine::reference(p, x.data(), inv.data(), w.data(), out.data());
  CHECK(out == std::vector<float>{2 * (50 + 0.25f), 2 * (100 + 0.5f), 20, 40});
  CHECK(combine::check(p, out.data(), out.data()).ok);
  auto bad = out;
  bad[3] = std::nextafter(bad[3], 100.f);
  const auto c = combine::check(p, out.data(), bad.data());
  CHECK_FALSE(c.ok);
  CHECK(c.first_difference.find("out[1, 1]") != std::string::npos);
}

TEST_CASE("combine reference: bf16 rounds once from the f32 sum") {
  combine::Problem p;
  p.tokens = 1;
  p.topk = 3;
  p.rows = 3;
  p.hidden = 1;
  p.dtype = combine::DType::bf16;
  // 1 + 2^-8 + 2^-8: one term alone is a tie that rounds to 1 in bf16, their f32 sum is 1 + 2^-7.
  const std::vector<std::uint16_t> x = {f32_to_bf16_bits(1.0f), f32_to_bf16_bits(0x1p-8f), f32_to_bf16_bits(0x1p-8f)};
  const std::vector<std::int32_t> inv = {0, 1, 2};
  const std::vector<float> w = {1, 1, 1};
  std::uint16_t out = 0;
  combine::reference(p, x.data(), inv.data(), w.data(), &out);
  CHECK(bf16_bits_to_f32(out) == 1.0f + 0x1p-7f);
}

TEST_CASE("combine check_tolerant: one output ULP or 1e-5 of the terms passes, more fails") {
  combine::Problem p;
  p.tokens = 1;
  p.topk = 2;
  p.rows = 2;
  p.hidden = 2;
  p.dtype = combine::DType::bf16;
  // f32 results: column 0 = 1.5 + 0.25 = 1.75 (bf16 ULP there 2^-7), column 1 = 3 - 3 = 0 (terms of size 3).
  const std::vector<std::uint16_t> x = {f32_to_bf16_bits(1.5f), f32_to_bf16_bits(3.0f), f32_to_bf16_bits(0.25f),
                                        f32_to_bf16_bits(-3.0f)};
  const std::vector<std::int32_t> inv = {0, 1};
  const std::vector<float> w = {1, 1};
  auto out = [](float a, float b) { return std::vector<std::uint16_t>{f32_to_bf16_bits(a), f32_to_bf16_bits(b)}; };
  CHECK(combine::check_tolerant(p, x.data(), inv.data(), w.data(), out(1.75f, 0.f).data()).ok);
  CHECK(combine::check_tolerant(p, x.data(), inv.data(), w.data(), out(1.75f + 0x1p-7f, 0.f).data()).ok);
  CHECK(combine::check_tolerant(p, x.data(), inv.data(), w.data(), out(1.75f, 5e-5f).data()).ok);  // 1e-5 * 6
  const auto far = combine::check_tolerant(p, x.data(), inv.data(), w.data(), out(1.75f + 0x1p-5f, 0.f).data());
  CHECK_FALSE(far.ok);
  CHECK(far.first_difference.find("out[0, 0]") != std::string::npos);
  CHECK_FALSE(combine::check_tolerant(p, x.data(), inv.data(), w.data(), out(1.75f, 1e-3f).data()).ok);
}

// The GB/s of the CLI and bench_combine count this traffic (docs/combine.md):
// T = 2, K = 2, H = 3 bf16 with one slot dropped: 3 used rows x 6 bytes read,
// 2 output rows x 6 written, inverse and weights 4 x 8 = 18 + 12 + 32 bytes.
TEST_CASE("combine bytes moved: used rows read once, out written once, inverse and weights") {
  combine::Problem p;
  p.tokens = 2;
  p.topk = 2;
  p.rows = 4;
  p.hidden = 3;
  p.dtype = combine::DType::bf16;
  const std::vector<std::int32_t> inv{0, -1, 2, 3};
  CHECK(combine::bytes_moved(p, inv) == 62.0);
  p.dtype = combine::DType::f32;  // 12-byte rows
  CHECK(combine::bytes_moved(p, inv) == 36.0 + 24.0 + 32.0);
}
