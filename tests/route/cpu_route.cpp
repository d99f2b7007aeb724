// The route CPU reference, its checker and the logit generator: ties, groups,
// weights, and that the checker catches what it must (and forgives near-ties).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "common/problem_error.hpp"
#include "errors.hpp"
#include "npy.hpp"
#include "route/gen.hpp"
#include "route/buffers.hpp"
#include "route/then_align.hpp"
#include "route/reference.hpp"
#include "temp_dir.hpp"

using namespace moekit;
using route::Problem;

namespace {

Problem prob(std::int64_t T, int E, int K) {
  Problem p;
  p.tokens = T;
  p.experts = E;
  p.topk = K;
  return p;
}

}  // namespace

TEST_CASE("route reference: best first, ties to the lower index, softmax weights") {
  const std::vector<float> x = {1, 3, 3, 0, 3, 1};
  Problem p = prob(1, 6, 4);
  const auto o = route::reference(p, x.data(), nullptr);
  CHECK(o.ids == std::vector<std::int32_t>{1, 2, 4, 0});
  double sum = 0;
  for (float v : x) sum += std::exp(double(v));
  CHECK(o.weights[0] == doctest::Approx(std::exp(3.0) / sum).epsilon(1e-7));
  CHECK(o.weights[3] == doctest::Approx(std::exp(1.0) / sum).epsilon(1e-7));
  p.renormalize = true;
  p.scaling = 2.5f;
  const auto r = route::reference(p, x.data(), nullptr);
  CHECK(std::accumulate(r.weights.begin(), r.weights.end(), 0.0) == doctest::Approx(2.5).epsilon(1e-6));
}

TEST_CASE("route reference: sigmoid with a bias selects on s + bias, weighs with s") {
  const std::vector<float> x = {2, 0, 1, -1};
  const std::vector<float> bias = {-10, 0, 0, 5};
  Problem p = prob(1, 4, 2);
  p.scoring = route::Scoring::sigmoid;
  p.bias = true;
  const auto o = route::reference(p, x.data(), bias.data());
  CHECK(o.ids == std::vector<std::int32_t>{3, 2});
  CHECK(o.weights[0] == doctest::Approx(1 / (1 + std::exp(1.0))).epsilon(1e-7));
}

TEST_CASE("route reference: renormalizing all-zero weights leaves them 0, not 0/0 = NaN") {
  // sigmoid(-1000) is 0 in float64: the K chosen scores sum to 0. Expected by
  // hand: ties to the lower index pick experts 0 and 1, and the weights stay 0
  // (divided by 1), times S = 2.5 still 0.
  const std::vector<float> x = {-1000, -1000, -1000, -1000};
  Problem p = prob(2, 2, 2);
  p.scoring = route::Scoring::sigmoid;
  p.renormalize = true;
  p.scaling = 2.5f;
  const auto o = route::reference(p, x.data(), nullptr);
  CHECK(o.ids == std::vector<std::int32_t>{0, 1, 0, 1});
  for (const float w : o.weights) {
    CHECK(!std::isnan(w));
    CHECK(w == 0.0f);
  }
  // The checker accepts those zeros and still refuses NaN weights.
  CHECK(route::check(p, x.data(), nullptr, o, o).result.ok);
  route::Outputs nan = o;
  nan.weights[1] = std::nanf("");
  CHECK(!route::check(p, x.data(), nullptr, o, nan).result.ok);
  // A sum > 0 divides as before: sigmoid(0) = 0.5 twice -> 0.5 / 1 * 2.5 = 1.25 each.
  const std::vector<float> z = {0, 0, -1000, -1000};
  const auto q = route::reference(p, z.data(), nullptr);
  CHECK(q.weights[0] == 1.25f);
  CHECK(q.weights[1] == 1.25f);
  CHECK(q.weights[2] == 0.0f);
  CHECK(q.weights[3] == 0.0f);
}

TEST_CASE("route reference: groups by top-2 sum with a bias, by max without") {
  // Groups of 2: {0,1} {2,3} {4,5}. Max: group 2 (0.9), then group 0 (0.8).
  // Top-2 sum: group 1 (0.7 + 0.7) beats group 2 (0.9 + 0.05) and group 0 (0.8 + 0.1).
  const std::vector<float> s_like = {0.8f, 0.1f, 0.7f, 0.7f, 0.9f, 0.05f};
  std::vector<float> x(6);
  for (int i = 0; i < 6; ++i) x[i] = float(std::log(s_like[i] / (1 - s_like[i] + 1e-30) + 1e-30));
  Problem p = prob(1, 6, 2);
  p.scoring = route::Scoring::sigmoid;
  p.groups = 3;
  p.topk_groups = 1;
  CHECK(route::reference(p, x.data(), nullptr).ids == std::vector<std::int32_t>{4, 5});
  const std::vector<float> zero(6, 0.f);
  p.bias = true;
  CHECK(route::reference(p, x.data(), zero.data()).ids == std::vector<std::int32_t>{2, 3});
  p.topk_groups = 2;
  p.topk = 3;
  CHECK(route::reference(p, x.data(), zero.data()).ids == std::vector<std::int32_t>{4, 2, 3});
}

TEST_CASE("route validate: shapes that cannot work are the kernel layer's ProblemErrors") {
  Problem p = prob(4, 8, 9);
  CHECK_THROWS_WITH_AS(route::validate(p), "--topk must be in [1, E = 8], got 9", ProblemError);
  p = prob(4, 8, 2);
  p.groups = 3;
  CHECK_THROWS_AS(route::validate(p), ProblemError);
  p.groups = 4;
  p.topk_groups = 1;
  p.topk = 3;  // one group of 2 experts
  CHECK_THROWS_AS(route::validate(p), ProblemError);
  p.topk = 2;
  CHECK_NOTHROW(route::validate(p));
  p = prob(std::int64_t(1) << 30, 8, 4);
  CHECK_THROWS_WITH_AS(route::validate(p), "1073741824 tokens is too many (T*K must fit int32)", ProblemError);
}

TEST_CASE("route check: catches wrong, duplicate, out-of-range ids and weights; forgives near-ties") {
  const std::vector<float> x = {0.5f, 2.0f, -1.0f, 1.0f, 0.25f, 3.0f, -2.0f, 0.0f};
  Problem p = prob(1, 8, 3);
  const auto ref = route::reference(p, x.data(), nullptr);
  REQUIRE(ref.ids == std::vector<std::int32_t>{5, 1, 3});
  CHECK(route::check(p, x.data(), nullptr, ref, ref).result.ok);

  auto bad = ref;
  bad.ids = {5, 1, 0};  // 0.5 is no near-tie of 1.0
  CHECK_FALSE(route::check(p, x.data(), nullptr, ref, bad).result.ok);
  bad.ids = {1, 5, 3};  // order matters
  CHECK_FALSE(route::check(p, x.data(), nullptr, ref, bad).result.ok);
  bad.ids = {5, 5, 3};
  CHECK(route::check(p, x.data(), nullptr, ref, bad).result.first_difference.find("twice") != std::string::npos);
  bad.ids = {5, 1, 8};
  CHECK(route::check(p, x.data(), nullptr, ref, bad).result.first_difference.find("outside") != std::string::npos);
  bad = ref;
  bad.weights[2] *= 1.0001f;
  CHECK_FALSE(route::check(p, x.data(), nullptr, ref, bad).result.ok);
  bad.weights[2] = ref.weights[2] * (1 + 2e-6f);  // inside 1e-5
  CHECK(route::check(p, x.data(), nullptr, ref, bad).result.ok);

  // A near-tie between the 3rd and 4th value: either choice passes, and is counted.
  std::vector<float> y = x;
  y[0] = 1.0f + 1e-7f;  // ~1e-7 relative above expert 3's logit
  const auto ref2 = route::reference(p, y.data(), nullptr);
  REQUIRE(ref2.ids == std::vector<std::int32_t>{5, 1, 0});
  auto alt = ref2;  // expert 3's weight is within 1.2e-7 of expert 0's
  alt.ids = {5, 1, 3};
  const auto rep = route::check(p, y.data(), nullptr, ref2, alt);
  CHECK(rep.result.ok);
  CHECK(rep.near_tie_rows == 1);
}

TEST_CASE("route gen: deterministic; load-shaped logits pick experts in proportion to the load") {
  const auto a = gen::route_logits(5, 16, npy::DType::f4, "uniform", 9);
  const auto b = gen::route_logits(5, 16, npy::DType::f4, "uniform", 9);
  CHECK(a.data == b.data);
  CHECK(a.shape == std::vector<std::int64_t>{5, 16});
  CHECK_THROWS_AS(gen::route_logits(5, 16, npy::DType::f4, "zipf:1.1", 9), InputError);

  // Load 1:2:3:...:8 over 8 experts; the top-1 frequencies follow it.
  testing::TempDir dir;
  const std::string f = (dir.path / "load.npy").string();
  npy::Array load;
  load.dtype = npy::DType::f8;
  load.shape = {8};
  std::vector<double> w = {1, 2, 3, 4, 5, 6, 7, 8};
  load.data.resize(64);
  std::memcpy(load.data.data(), w.data(), 64);
  npy::write(f, load);
  const std::int64_t T = 36000;
  const auto lg = gen::route_logits(T, 8, npy::DType::f4, "load:" + f, 4);
  Problem p = prob(T, 8, 1);
  const auto o = route::reference(p, lg.as<float>().data(), nullptr);
  std::vector<double> count(8);
  for (auto id : o.ids) count[id] += 1;
  double chi2 = 0;
  for (int e = 0; e < 8; ++e) {
    const double want = T * w[e] / 36.0;
    chi2 += (count[e] - want) * (count[e] - want) / want;
  }
  CHECK(chi2 < 24.3);  // 7 degrees of freedom: p = 0.001
  // A uniform load would be far off.
  double chi2u = 0;
  for (int e = 0; e < 8; ++e) chi2u += (count[e] - T / 8.0) * (count[e] - T / 8.0) / (T / 8.0);
  CHECK(chi2u > 1000);
}

// The GB/s of the CLI and bench_route count this traffic: T = 3 tokens of
// E = 8 f32 logits (96 bytes) and the 8-entry bias (32) read, 3 x 2 ids and
// weights written (48); with align after it (B 4: 6 slots + min(6, E) x 3
// padding = 24 sorted ids, 6 expert ids, the count) 4 x 31 = 124 bytes more.
TEST_CASE("route bytes moved: logits and bias read once, ids and weights (and align's outputs) written once") {
  Problem p{.tokens = 3, .experts = 8, .topk = 2, .bias = true};
  CHECK(route::bytes_moved(p) == 176.0);
  p.bias = false;
  p.dtype = route::DType::bf16;  // 48 bytes of logits
  CHECK(route::bytes_moved(p) == 96.0);
  (void)route::plan_then_align(p, 4);
  CHECK(p.align_rows == 24);
  CHECK(p.align_blocks == 6);
  CHECK(route::bytes_moved(p) == 220.0);
}
