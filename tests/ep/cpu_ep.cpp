// ep's planning, CPU reference and checker: a hand-listed dispatch, the
// combine against a second formulation (double sums of the same f32 terms'
// order-free value), and the checker rejecting wrong answers.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "common/problem_error.hpp"
#include "ep/ep.hpp"
#include "ep/reference.hpp"
#include "fake_caps.hpp"
#include "half.hpp"
#include "moe_path/reference.hpp"

using namespace moekit;

namespace {

// f32 rows: row t of rank s is {100 s + t, -(100 s + t)}, so a row names its origin.
struct Case {
  ep::Problem p;
  std::vector<std::vector<float>> hidden;
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<std::vector<float>> w;
  std::vector<ep::RankInputs> in() const {
    std::vector<ep::RankInputs> v;
    for (std::size_t s = 0; s < hidden.size(); ++s)
      v.push_back({std::as_bytes(std::span<const float>(hidden[s])), ids[s], w[s]});
    return v;
  }
};

Case two_ranks() {
  Case c;
  // E 4 over 2 ranks (contiguous: experts 0, 1 on rank 0; 2, 3 on rank 1), K 2, T 3, H 2.
  c.p = ep::make_problem(2, 3, 2, 4, 2, combine::DType::f32, 2.0f);
  for (int s = 0; s < 2; ++s) {
    std::vector<float> h;
    for (int t = 0; t < 3; ++t) h.insert(h.end(), {float(100 * s + t), -float(100 * s + t)});
    c.hidden.push_back(h);
  }
  c.ids = {{0, 2, 1, 0, 3, -1},   // rank 0: t0 -> e0, e2; t1 -> e1, e0; t2 -> e3, dropped
           {2, 3, 0, 9, 1, 2}};   // rank 1: t0 -> e2, e3; t1 -> e0, 9 (dropped: >= E); t2 -> e1, e2
  c.w = {{0.5f, 0.25f, 1.f, 2.f, 4.f, 8.f}, {1.f, 1.f, 0.5f, 3.f, 0.25f, 0.75f}};
  return c;
}

std::vector<float> floats(const std::vector<std::byte>& b) {
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), b.size());
  return f;
}

}  // namespace

TEST_CASE("ep make_problem: contiguous placement, local counts, refusals") {
  const ep::Problem p = ep::make_problem(4, 16, 8, 256, 7168, combine::DType::bf16, 2.5f);
  CHECK(p.placement[0] == 0);
  CHECK(p.placement[63] == 0);
  CHECK(p.placement[64] == 1);
  CHECK(p.placement[255] == 3);
  CHECK(p.local[0] == 64);
  CHECK(p.local[3] == 64);
  CHECK(p.recv_capacity() == 64);
  CHECK(p.slot_capacity() == 4 * 16 * 8);
  CHECK(ep::expert_map(p, 1)[64] == 0);
  CHECK(ep::expert_map(p, 1)[63] == -1);
  CHECK(ep::expert_map(p, 1)[127] == 63);
  CHECK_THROWS_AS(ep::make_problem(3, 16, 8, 256, 64, combine::DType::bf16, 1.f), ProblemError);  // 3 does not divide 256
  CHECK_THROWS_AS(ep::make_problem(9, 16, 8, 256, 64, combine::DType::bf16, 1.f), ProblemError);  // past kMaxRanks
  CHECK_THROWS_AS(ep::make_problem(0, 16, 8, 256, 64, combine::DType::bf16, 1.f), ProblemError);
  // K past the plan's one byte a rank: refused, the largest it counts accepted.
  CHECK_THROWS_AS(ep::make_problem(2, 16, 256, 256, 64, combine::DType::bf16, 1.f), ProblemError);
  CHECK_NOTHROW(ep::make_problem(2, 16, 255, 256, 64, combine::DType::bf16, 1.f));
  CHECK_THROWS_AS(ep::make_problem(2, 16, 8, 4, 64, combine::DType::bf16, 1.f, {0, 1, 2, 0}), ProblemError);
  CHECK_THROWS_AS(ep::make_problem(2, 16, 8, 4, 64, combine::DType::bf16, 1.f, {0, 1, 1}), ProblemError);
  // A placement file: 3 ranks over 4 experts, rank 2 owning none.
  const ep::Problem q = ep::make_problem(3, 2, 1, 4, 8, combine::DType::bf16, 1.f, {1, 0, 1, 1});
  CHECK(q.local[0] == 1);
  CHECK(q.local[1] == 3);
  CHECK(q.local[2] == 0);
  CHECK(ep::expert_map(q, 1) == std::vector<std::int32_t>{0, -1, 1, 2});
}

TEST_CASE("ep reference: hand-listed dispatch of two ranks") {
  const Case c = two_ranks();
  const auto in = c.in();
  const auto ref = ep::reference(c.p, in);
  REQUIRE(ref.size() == 2);
  // Rank 0 owns e0 and e1. e0: (s0 t0), (s0 t1), (s1 t1); e1: (s0 t1), (s1 t2).
  CHECK(ref[0].offsets == std::vector<std::int64_t>{0, 3, 5});
  CHECK(floats(ref[0].rows) == std::vector<float>{0, -0.f, 1, -1, 101, -101, 1, -1, 102, -102});
  // Rank 1 owns e2 and e3. e2: (s0 t0), (s1 t0), (s1 t2); e3: (s0 t2), (s1 t0).
  CHECK(ref[1].offsets == std::vector<std::int64_t>{0, 3, 5});
  CHECK(floats(ref[1].rows) == std::vector<float>{0, -0.f, 100, -100, 102, -102, 2, -2, 100, -100});
  // out = S * (sum of kept weights) * row; dropped slots add nothing.
  CHECK(floats(ref[0].out) == std::vector<float>{2 * 0.75f * 0, -2 * 0.75f * 0, 2 * 3.f * 1, -2 * 3.f * 1,
                                                 2 * 4.f * 2, -2 * 4.f * 2});
  CHECK(floats(ref[1].out) == std::vector<float>{2 * 2.f * 100, -2 * 2.f * 100, 2 * 0.5f * 101, -2 * 0.5f * 101,
                                                 2 * 1.f * 102, -2 * 1.f * 102});
  CHECK(ep::check(c.p, ref, ref).ok);
  const ep::Traffic t = ep::traffic(c.p, c.ids);
  // Rows that leave their GPU: rank 0's t0 (to 1), t2 (to 1); rank 1's t1 (to 0), t2 (to 0).
  CHECK(t.dispatch_remote == 4);
  // All (token, destination) rows: rank 0: 2 + 1 + 1, rank 1: 1 + 1 + 2.
  CHECK(t.dispatch_rows == 8);
  // Slots served by the other GPU: rank 0's e2 (t0), e3 (t2); rank 1's e0 (t1), e1 (t2).
  CHECK(t.combine_remote == 4);
  CHECK(t.combine_rows == 10);  // the kept slots: 5 of rank 0's 6, 5 of rank 1's 6
}

TEST_CASE("ep checker: order within an expert is free, anything else is caught") {
  const Case c = two_ranks();
  const auto in = c.in();
  const auto ref = ep::reference(c.p, in);
  // The two rows of rank 1's expert e3 swapped: the same set.
  auto got = ref;
  std::vector<std::byte>& rows = got[1].rows;
  std::swap_ranges(rows.begin() + 3 * 8, rows.begin() + 4 * 8, rows.begin() + 4 * 8);
  CHECK(ep::check(c.p, ref, got).ok);
  // A row moved from e0 to e1 (offsets changed).
  got = ref;
  got[0].offsets[1] = 2;
  auto r1 = ep::check(c.p, ref, got);
  CHECK_FALSE(r1.ok);
  CHECK(r1.first_difference.find("rank 0, local expert 0 (global 0)") != std::string::npos);
  // A row of e2 replaced by another token's row (same count).
  got = ref;
  std::memcpy(got[1].rows.data() + 8, ref[1].rows.data() + 16, 8);
  auto r2 = ep::check(c.p, ref, got);
  CHECK_FALSE(r2.ok);
  CHECK(r2.first_difference.find("rank 1, local expert 0 (global 2)") != std::string::npos);
  // One bit of one output element.
  got = ref;
  got[1].out[5] ^= std::byte{1};
  auto r3 = ep::check(c.p, ref, got);
  CHECK_FALSE(r3.ok);
  CHECK(r3.first_difference.find("rank 1: out") != std::string::npos);
}

TEST_CASE("ep reference: out against a double formulation of combine's rule; rows per expert as the ids say") {
  // A second formulation: out[t] = S * sum_j w[t, j] * x[t] in double, against
  // the reference's f32 result to 1e-6 relative, over random shapes.
  std::uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  for (int trial = 0; trial < 20; ++trial) {
    const int R = int(next() % 4) + 1, E = R * (int(next() % 5) + 1), K = int(next() % std::uint64_t(E)) + 1;
    const std::int64_t T = std::int64_t(next() % 9), H = std::int64_t(next() % 5) + 1;
    Case c;
    c.p = ep::make_problem(R, T, K, E, H, combine::DType::f32, 1.5f);
    std::vector<std::int64_t> per_expert(std::size_t(E), 0);
    for (int s = 0; s < R; ++s) {
      std::vector<float> h(std::size_t(T * H)), w(std::size_t(T * K));
      std::vector<std::int32_t> ids(std::size_t(T * K));
      for (auto& v : h) v = float(std::int64_t(next() % 2001) - 1000) / 64.f;
      for (auto& v : w) v = float(next() % 1000) / 1000.f;
      for (auto& v : ids) {
        v = std::int32_t(next() % std::uint64_t(E + 1)) - 1;  // -1: dropped
        if (v >= 0) ++per_expert[std::size_t(v)];
      }
      c.hidden.push_back(h);
      c.ids.push_back(ids);
      c.w.push_back(w);
    }
    const auto ref = ep::reference(c.p, c.in());
    for (int r = 0; r < R; ++r) {
      const auto map = ep::expert_map(c.p, r);
      for (int e = 0; e < E; ++e)
        if (map[std::size_t(e)] >= 0) {
          const auto i = std::size_t(map[std::size_t(e)]);
          CHECK(ref[std::size_t(r)].offsets[i + 1] - ref[std::size_t(r)].offsets[i] == per_expert[std::size_t(e)]);
        }
      const auto out = floats(ref[std::size_t(r)].out);
      for (std::int64_t t = 0; t < T; ++t) {
        double ws = 0;
        for (int j = 0; j < K; ++j)
          if (c.ids[std::size_t(r)][std::size_t(t * K + j)] >= 0) ws += c.w[std::size_t(r)][std::size_t(t * K + j)];
        for (std::int64_t k = 0; k < H; ++k) {
          const double want = 1.5 * ws * c.hidden[std::size_t(r)][std::size_t(t * H + k)];
          CHECK(std::abs(out[std::size_t(t * H + k)] - want) <= 1e-5 * (std::abs(want) + 1e-3));
        }
      }
    }
  }
}

TEST_CASE("ep reference, partials: a hand-listed token where rounding each rank's partial changes out") {
  // bf16, one token of one element 1.0 on rank 0, slot 0 to expert 0 (rank 0)
  // with weight 1 + 2^-8, slot 1 to expert 1 (rank 1) with weight 2^-8, S 1.
  // Combine's rule: 1.00390625 + 0.00390625 = 1.0078125, a bf16 value. Per
  // rank: P0 = bf16(1.00390625) = 1.0 (a tie, to even), P1 = 2^-8, and
  // 1.0 + 2^-8 is again a tie that rounds to 1.0.
  const ep::Problem p = ep::make_problem(2, 1, 2, 2, 1, combine::DType::bf16, 1.0f);
  const std::vector<std::uint16_t> one = {0x3F80};  // bf16 1.0
  const std::vector<std::uint16_t> other = {0x0000};
  const std::vector<std::int32_t> ids0 = {0, 1}, ids1 = {-1, -1};
  const std::vector<float> w0 = {1.0f + 1.0f / 256, 1.0f / 256}, w1 = {1.f, 1.f};
  const std::vector<ep::RankInputs> in = {{std::as_bytes(std::span(one)), ids0, w0},
                                          {std::as_bytes(std::span(other)), ids1, w1}};
  auto bits = [](const std::vector<std::byte>& b) {
    std::uint16_t v;
    std::memcpy(&v, b.data(), 2);
    return v;
  };
  const auto slots = ep::reference(p, in);
  const auto partials = ep::reference(p, in, ep::Return::partials);
  CHECK(bits(slots[0].out) == 0x3F81);     // 1.0078125
  CHECK(bits(partials[0].out) == 0x3F80);  // 1.0
  CHECK(bits(partials[1].out) == 0x0000);  // rank 1's token sent nothing: 0
  // The rows each rank's experts receive do not depend on what comes back.
  CHECK(slots[1].rows == partials[1].rows);
  // So the exact checker tells the two apart.
  CHECK_FALSE(ep::check(p, slots, partials).ok);
}

TEST_CASE("ep reference, partials: equal to combine's rule for one rank and S 1, within docs/ep.md's bound always") {
  std::uint64_t state = 777;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull; };
  int differed = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int R = trial < 10 ? 1 : int(next() % 4) + 1, E = R * (int(next() % 5) + 1);
    const int K = int(next() % std::uint64_t(E)) + 1;
    const std::int64_t T = std::int64_t(next() % 9) + 1, H = std::int64_t(next() % 5) + 1;
    const combine::DType dt = trial % 3 == 0 ? combine::DType::f32 : trial % 3 == 1 ? combine::DType::bf16
                                                                                       : combine::DType::f16;
    const float S = trial < 5 ? 1.0f : 2.5f;
    const ep::Problem p = ep::make_problem(R, T, K, E, H, dt, S);
    const std::size_t es = dt == combine::DType::f32 ? 4 : 2;
    std::vector<std::vector<std::byte>> hidden;
    std::vector<std::vector<std::int32_t>> ids;
    std::vector<std::vector<float>> w;
    for (int s = 0; s < R; ++s) {
      std::vector<std::byte> h(std::size_t(T * H) * es);
      for (std::size_t i = 0; i < std::size_t(T * H); ++i) {
        const float v = float(std::int64_t(next() % 20001) - 10000) / 997.f;
        if (es == 4) std::memcpy(&h[i * 4], &v, 4);
        else {
          const std::uint16_t b = dt == combine::DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
          std::memcpy(&h[i * 2], &b, 2);
        }
      }
      std::vector<std::int32_t> id(std::size_t(T * K));
      std::vector<float> ww(id.size());
      for (auto& v : id) v = std::int32_t(next() % std::uint64_t(E + 1)) - 1;
      for (auto& v : ww) v = float(next() % 100000) / 70000.f;
      hidden.push_back(std::move(h));
      ids.push_back(std::move(id));
      w.push_back(std::move(ww));
    }
    std::vector<ep::RankInputs> in;
    for (int s = 0; s < R; ++s) in.push_back({hidden[std::size_t(s)], ids[std::size_t(s)], w[std::size_t(s)]});
    const auto slots = ep::reference(p, in);
    const auto partials = ep::reference(p, in, ep::Return::partials);
    auto value = [&](const std::vector<std::byte>& b, std::size_t i) -> double {
      if (es == 4) {
        float f;
        std::memcpy(&f, &b[i * 4], 4);
        return f;
      }
      std::uint16_t u;
      std::memcpy(&u, &b[i * 2], 2);
      return dt == combine::DType::bf16 ? bf16_bits_to_f32(u) : f16_bits_to_f32(u);
    };
    // docs/ep.md: |partials - rule| <= S * sum_j |w_j y| * (u + (2K + R + 3) * 2^-24) + one spacing of the
    // dtype at the larger of the two; u = 2^-8 (bf16), 2^-11 (f16), 2^-24 (f32).
    const double u = dt == combine::DType::bf16 ? 0x1p-8 : dt == combine::DType::f16 ? 0x1p-11 : 0x1p-24;
    for (int s = 0; s < R; ++s)
      for (std::int64_t t = 0; t < T; ++t) {
        double ws = 0;
        for (int j = 0; j < K; ++j)
          if (ids[std::size_t(s)][std::size_t(t * K + j)] >= 0) ws += std::abs(w[std::size_t(s)][std::size_t(t * K + j)]);
        for (std::int64_t k = 0; k < H; ++k) {
          const std::size_t i = std::size_t(t * H + k);
          const double a = value(slots[std::size_t(s)].out, i), b = value(partials[std::size_t(s)].out, i);
          const double y = std::abs(value(hidden[std::size_t(s)], i));
          const double big = std::max(std::abs(a), std::abs(b));
          const double spacing = dt == combine::DType::bf16 ? bf16_spacing(big)
                                 : dt == combine::DType::f16 ? f16_spacing(big)
                                                             : std::abs(big) * 0x1p-23;
          const double bound = S * ws * y * (u + (2 * K + R + 3) * 0x1p-24) + spacing;
          if (R == 1 && S == 1.0f) CHECK(a == b);  // one partial, rounded once: the rule itself
          CHECK_MESSAGE(std::abs(a - b) <= bound, "trial ", trial, " rank ", s, " t ", t, " k ", k, ": ", a, " vs ", b);
          differed += a != b;
        }
      }
  }
  CHECK(differed > 0);  // the bound is exercised, not vacuous: the two formulations do differ
}

// ---- --experts ffn ----------------------------------------------------------

namespace {

// bf16 rows of R ranks (random, so no two rows are equal), ids without
// dropped slots (moe-path's reference takes ids in [0, E)), the FFN I 24.
struct FfnCase {
  ep::Problem p;
  std::vector<std::vector<std::uint16_t>> hidden;
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<std::vector<float>> w;
  std::vector<ep::RankInputs> in() const {
    std::vector<ep::RankInputs> v;
    for (std::size_t s = 0; s < hidden.size(); ++s)
      v.push_back({std::as_bytes(std::span<const std::uint16_t>(hidden[s])), ids[s], w[s]});
    return v;
  }
};

FfnCase ffn_case(int R, std::int64_t T, int K, int E, std::int64_t H, std::uint32_t seed, float scaling = 2.5f) {
  FfnCase c;
  const experts::FfnArgs f{24, experts::Act::silu, experts::W1Layout::gate_up};
  c.p = ep::make_problem(R, T, K, E, H, combine::DType::bf16, scaling, {}, &f);
  std::uint32_t x = seed;
  const auto next = [&] { return x = x * 1664525u + 1013904223u; };
  for (int s = 0; s < R; ++s) {
    std::vector<std::uint16_t> h(std::size_t(T * H));
    for (auto& v : h) v = f32_to_bf16_bits(float(int(next() >> 20) - 2048) / 1024.f);
    c.hidden.push_back(h);
    std::vector<std::int32_t> ids;
    std::vector<float> w;
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<std::int32_t> e(static_cast<std::size_t>(E), 0);
      std::iota(e.begin(), e.end(), 0);
      for (int j = 0; j < K; ++j) {
        std::swap(e[std::size_t(j)], e[std::size_t(j) + next() % std::uint32_t(E - j)]);
        ids.push_back(e[std::size_t(j)]);
        w.push_back(float(next() >> 24) / 256.f);
      }
    }
    c.ids.push_back(ids);
    c.w.push_back(w);
  }
  return c;
}

ep::FfnInputs every_token(std::uint64_t seed) {
  ep::FfnInputs f;
  f.weight_seed = f.sample_seed = seed;
  f.all_tokens = true;
  return f;
}

}  // namespace

TEST_CASE("ep make_problem with the FFN: each rank's FFN lays out what its receive side lays out") {
  const experts::FfnArgs f{64, experts::Act::silu, experts::W1Layout::gate_up};
  std::vector<std::int32_t> place{0, 0, 0, 2, 2, 0};  // rank 1 owns nothing
  const ep::Problem p = ep::make_problem(3, 50, 3, 6, 128, combine::DType::f16, 1.f, place, &f);
  REQUIRE(p.ffn);
  for (int r = 0; r < 3; ++r) {
    const permute::Problem &a = p.layout(r), &b = p.ffn_problem(r).permute;
    CHECK(a.layout == b.layout);
    CHECK(a.row_bytes == b.row_bytes);
    CHECK(a.align.numel == b.align.numel);
    CHECK(a.align.num_experts == b.align.num_experts);
    CHECK(a.align.map_size == b.align.map_size);
    CHECK(a.align.block_size == b.align.block_size);
    CHECK(a.align.max_num_tokens_padded == b.align.max_num_tokens_padded);
    CHECK(p.ffn_problem(r).rows() == a.align.max_num_tokens_padded);
    CHECK(p.ffn_problem(r).experts == std::max(p.local[std::size_t(r)], 1));
    CHECK(p.ffn_problem(r).inter == 64);
    CHECK(p.ffn_problem(r).dtype == experts::DType::f16);
  }
  CHECK_THROWS_AS(ep::make_problem(2, 4, 2, 4, 8, combine::DType::f32, 1.f, {}, &f), ProblemError);
  const experts::FfnArgs none{0, experts::Act::silu, experts::W1Layout::gate_up};
  CHECK_THROWS_AS(ep::make_problem(2, 4, 2, 4, 8, combine::DType::bf16, 1.f, {}, &none), ProblemError);
  CHECK_FALSE(ep::make_problem(2, 4, 2, 4, 8, combine::DType::bf16, 1.f).ffn);
}

TEST_CASE("ep reference with the FFN: R ranks' out is moe-path's out over all their tokens on one GPU") {
  // A second formulation: moe-path's chain (permute's reference, the experts
  // reference per slot in permute's row order, combine's reference) over the
  // R * T tokens stacked, the weights generated from the same seed for the
  // E experts of one GPU. Combine's rule reads each slot's y alone, so each
  // rank's out is bit for bit those tokens' rows.
  // R 0 stands for one rank with p2p-reduce's rule and S 1: its one partial,
  // rounded once, is combine's rule, so it too is moe-path's out.
  for (const int case_r : {1, 2, 3, 0}) {
    const int R = case_r == 0 ? 1 : case_r;
    const float S = case_r == 0 ? 1.f : 2.5f;
    const ep::Return how = case_r == 0 ? ep::Return::partials : ep::Return::slots;
    const FfnCase c = ffn_case(R, 5, 3, 6, 40, 11u + std::uint32_t(R), S);
    const ep::FfnInputs f = every_token(7);
    const auto ref = ep::reference(c.p, c.in(), how, &f);
    std::vector<std::uint16_t> all_hidden;
    std::vector<std::int32_t> all_ids;
    std::vector<float> all_w;
    for (int s = 0; s < R; ++s) {
      all_hidden.insert(all_hidden.end(), c.hidden[std::size_t(s)].begin(), c.hidden[std::size_t(s)].end());
      all_ids.insert(all_ids.end(), c.ids[std::size_t(s)].begin(), c.ids[std::size_t(s)].end());
      all_w.insert(all_w.end(), c.w[std::size_t(s)].begin(), c.w[std::size_t(s)].end());
    }
    const experts::FfnArgs fa{24, experts::Act::silu, experts::W1Layout::gate_up};
    const moe_path::Problem mp =
        moe_path::make_problem(5 * R, 3, 6, 40, combine::DType::bf16, permute::Layout::compact, 1, S, nullptr, &fa);
    moe_path::Inputs mi;
    mi.hidden = reinterpret_cast<const std::byte*>(all_hidden.data());
    mi.ids = all_ids;
    mi.weights = all_w;
    mi.w.generated = true;
    mi.w.seed = 7;
    const moe_path::Outputs mo = moe_path::reference(mp, mi);
    for (int s = 0; s < R; ++s) {
      const std::size_t bytes = 5 * 40 * 2;
      REQUIRE(ref[std::size_t(s)].out.size() == bytes);
      CHECK_MESSAGE(std::memcmp(ref[std::size_t(s)].out.data(), mo.out.data() + std::size_t(s) * bytes, bytes) == 0,
                    "R " << R << " rank " << s << (case_r == 0 ? " (partials)" : ""));
      // Every received row carries its slot's y: y rows as many as rows.
      CHECK(ref[std::size_t(s)].y.size() == ref[std::size_t(s)].rows.size());
    }
  }
}

TEST_CASE("ep checker with the FFN: y paired through the rows, out from got's own y; wrong answers caught") {
  const FfnCase c = ffn_case(2, 6, 3, 4, 16, 5u);
  const auto in = c.in();
  const ep::FfnInputs f = every_token(3);
  for (const ep::Return how : {ep::Return::slots, ep::Return::partials}) {
    const auto ref = ep::reference(c.p, in, how, &f);
    const std::size_t rb = 32;
    CHECK(ep::check(c.p, ref, ref, how, in).ok);
    // Two rows of one expert swapped together with their y: the same answer.
    auto got = ref;
    REQUIRE(got[0].offsets[1] >= 2);
    std::swap_ranges(got[0].rows.begin(), got[0].rows.begin() + rb, got[0].rows.begin() + rb);
    std::swap_ranges(got[0].y.begin(), got[0].y.begin() + rb, got[0].y.begin() + rb);
    CHECK(ep::check(c.p, ref, got, how, in).ok);
    // The rows swapped but not their y: each y now sits with another slot's row.
    got = ref;
    std::swap_ranges(got[0].rows.begin(), got[0].rows.begin() + rb, got[0].rows.begin() + rb);
    auto r1 = ep::check(c.p, ref, got, how, in);
    CHECK_FALSE(r1.ok);
    CHECK(r1.first_difference.find("y") != std::string::npos);
    // One y element far off.
    got = ref;
    got[1].y[3] ^= std::byte{0x40};
    auto r2 = ep::check(c.p, ref, got, how, in);
    CHECK_FALSE(r2.ok);
    CHECK(r2.first_difference.find("y of slot") != std::string::npos);
    // One bit of out: out is formed from got's own y, bit for bit.
    got = ref;
    got[1].out[4] ^= std::byte{1};
    auto r3 = ep::check(c.p, ref, got, how, in);
    CHECK_FALSE(r3.ok);
    CHECK(r3.first_difference.find("rank 1: out") != std::string::npos);
    // y missing.
    got = ref;
    got[0].y.clear();
    CHECK_FALSE(ep::check(c.p, ref, got, how, in).ok);
  }
}

// The receive layout's pick (fake sm_90 device): permute's auto, but with
// R > 1 not `fused` past kernels/ep/policy.hpp's 1024 slots, where the next
// auto row takes over (gather below permute's tma threshold of 8192 slots,
// tma from it). permute's own fused rule: at most 2048 slots and 16 a local
// expert (E 256 / R local experts). Expected picks listed by hand from the
// two policies' numbers.
TEST_CASE("ep layout_variant: permute's auto without fused past the ep policy's slot count") {
  const DeviceCaps sm90 = test::fake_sm90();
  struct Case {
    int R;
    std::int64_t T;
    const char* want;  // R * T * 8 slots (K 8)
  };
  for (const Case& c : {Case{1, 1, "fused"}, Case{2, 1, "fused"}, Case{2, 16, "fused"}, Case{2, 64, "fused"},
                        Case{2, 65, "gather"}, Case{2, 128, "gather"}, Case{4, 16, "fused"}, Case{4, 32, "fused"},
                        Case{4, 128, "gather"}, Case{4, 256, "tma"}, Case{8, 8, "fused"}, Case{8, 16, "gather"},
                        Case{1, 128, "fused"}, Case{1, 256, "fused"}, Case{1, 257, "gather"}}) {
    const ep::Problem p = ep::make_problem(c.R, c.T, 8, 256, 7168, combine::DType::bf16, 1.0f);
    for (int r = 0; r < c.R; ++r) {
      CAPTURE(c.R);
      CAPTURE(c.T);
      CHECK(std::string(ep::layout_variant(p, r, sm90).info.name) == c.want);
    }
  }
  // Without the ep rule: permute's own auto keeps fused up to its 2048 slots (the rule is ep's alone).
  const ep::Problem p = ep::make_problem(2, 128, 8, 256, 7168, combine::DType::bf16, 1.0f);
  CHECK(std::string(permute::registry().pick_auto(p.layout(0), sm90, false).info.name) == "fused");
  CHECK(std::string(permute::registry().pick_auto_except(p.layout(0), sm90, false, "fused").info.name) == "gather");
  // Skipping the table's last row ("else": gather) where no earlier row holds (the padded layout keeps
  // fused out, 64 slots keep tma out): the last other row (tma) is the fallback, never the skipped one.
  const permute::Problem padded = permute::make_problem(8, 8, 64, 16, 64, permute::Layout::padded);
  CHECK(std::string(permute::registry().pick_auto(padded, sm90, false).info.name) == "gather");
  CHECK(std::string(permute::registry().pick_auto_except(padded, sm90, false, "gather").info.name) == "tma");
}

// Every p2p variant takes K <= 64, as its limits say: the pack looks a
// token's owners up one a thread. p2p-reduce's combine of partials has K = R,
// so before this check it took K up to 255 (and the pack, one thread a slot
// of 128, would have missed slots past the block).
TEST_CASE("ep p2p variants refuse K > 64, the reduce ones included") {
  DeviceCaps sm90 = test::fake_sm90();
  sm90.ordinal = -1;  // no device here: the peer checks (which ask the driver) stay out
  for (const char* name : {"p2p", "p2p-signal", "p2p-reduce", "p2p-reduce-signal"}) {
    const ep::Variant* v = ep::registry().find(name);
    REQUIRE(v != nullptr);
    const std::string n = name;
    CAPTURE(n);
    const char* ok = v->not_applicable(ep::make_problem(2, 4, 64, 256, 64, combine::DType::bf16, 1.0f), sm90);
    CHECK(std::string(ok ? ok : "") == "");
    for (int K : {65, 129, 200}) {
      const char* why = v->not_applicable(ep::make_problem(2, 4, K, 256, 64, combine::DType::bf16, 1.0f), sm90);
      REQUIRE(why != nullptr);
      CHECK_MESSAGE(std::string(why).find("K > 64") != std::string::npos, why);
    }
  }
}
