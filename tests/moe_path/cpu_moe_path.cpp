// The moe-path CPU reference and checker: the chained references against the
// identity formula, and a wrong output caught at each stage, named by it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "combine/reference.hpp"
#include "half.hpp"
#include "moe_path/moe_path.hpp"
#include "moe_path/reference.hpp"

using namespace moekit;
using permute::Layout;

namespace {

std::vector<std::byte> rows(std::int64_t n, combine::DType dt, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  const std::size_t es = dt == combine::DType::f32 ? 4 : 2;
  std::vector<std::byte> v(static_cast<std::size_t>(n) * es);
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = nd(rng);
    if (es == 4) std::memcpy(v.data() + i * 4, &x, 4);
    else {
      const std::uint16_t h = dt == combine::DType::bf16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
      std::memcpy(v.data() + i * 2, &h, 2);
    }
  }
  return v;
}

std::vector<float> logits(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = nd(rng);
  return v;
}

// DeepSeek-V3's routing for one token, in double, by sorting (route's
// reference ranks instead): s = sigmoid(x), c = s + bias, a group scores the
// sum of its two largest c, the KG best groups are kept, the K largest c of
// their experts are picked in descending order (ties to the lower index), and
// their s are renormalized to sum 1.
struct Routed {
  std::vector<std::int32_t> ids;
  std::vector<double> weights;
};
Routed grouped_sigmoid_topk(const float* x, const float* bias, int E, int K, int G, int KG) {
  std::vector<double> s(E), c(E);
  for (int e = 0; e < E; ++e) {
    s[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(x[e])));
    c[e] = static_cast<float>(static_cast<float>(s[e]) + bias[e]);  // f32 as route rounds c
  }
  const int per = E / G;
  std::vector<std::pair<double, int>> groups;
  for (int g = 0; g < G; ++g) {
    std::vector<double> v(c.begin() + g * per, c.begin() + (g + 1) * per);
    std::sort(v.rbegin(), v.rend());
    groups.push_back({v[0] + v[1], g});
  }
  std::stable_sort(groups.begin(), groups.end(), [](auto a, auto b) { return a.first > b.first; });
  std::vector<std::pair<double, int>> cand;
  for (int i = 0; i < KG; ++i)
    for (int e = groups[i].second * per; e < (groups[i].second + 1) * per; ++e) cand.push_back({c[e], e});
  std::sort(cand.begin(), cand.end(),
            [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  Routed r;
  double sum = 0;
  for (int j = 0; j < K; ++j) sum += s[cand[j].second];
  for (int j = 0; j < K; ++j) {
    r.ids.push_back(cand[j].second);
    r.weights.push_back(s[cand[j].second] / sum);
  }
  return r;
}

route::Problem deepseek_like() {
  route::Problem r;
  r.groups = 4;
  r.topk_groups = 2;
  r.scoring = route::Scoring::sigmoid;
  r.bias = true;
  r.renormalize = true;
  return r;
}

}  // namespace

TEST_CASE("moe-path reference: routed, every dtype and layout, out = S * sum(w) * hidden") {
  const std::int64_t T = 9, H = 33;
  const std::int32_t E = 16, K = 4;
  const route::Problem router = deepseek_like();
  const std::vector<float> lg = logits(T * E, 1), bias = logits(E, 2);
  for (combine::DType dt : {combine::DType::f32, combine::DType::bf16, combine::DType::f16})
    for (Layout layout : {Layout::padded, Layout::compact}) {
      const auto p = moe_path::make_problem(T, K, E, H, dt, layout, 4, 2.5f, &router);
      CHECK(p.routed);
      CHECK(p.route.scaling == 1.0f);  // S is combine's, applied once
      const auto hidden = rows(T * H, dt, 3);
      moe_path::Inputs in;
      in.logits = lg.data();
      in.bias = bias.data();
      in.hidden = hidden.data();
      const moe_path::Outputs o = moe_path::reference(p, in);
      // the route stage: DeepSeek-V3's rule written out here, with scaling 1
      for (std::int64_t t = 0; t < T; ++t) {
        const Routed want = grouped_sigmoid_topk(&lg[t * E], bias.data(), E, K, 4, 2);
        for (int j = 0; j < K; ++j) {
          CAPTURE(t);
          CAPTURE(j);
          CHECK(o.routed.ids[t * K + j] == want.ids[j]);
          CHECK(o.routed.weights[t * K + j] == doctest::Approx(want.weights[j]).epsilon(1e-6));
        }
      }
      for (std::int64_t t = 0; t < T; ++t) {  // renormalized: the weights sum to 1
        double sum = 0;
        for (int j = 0; j < K; ++j) sum += o.routed.weights[t * K + j];
        CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
      }
      const CheckResult id = moe_path::check_identity(p, hidden.data(), o.routed.weights.data(), o.out.data());
      CHECK_MESSAGE(id.ok, id.first_difference);
      CHECK(id.max_error <= (dt == combine::DType::f32 ? 1e-5 : 1.0));
      const moe_path::CheckReport rep = moe_path::check(p, in, o, o);
      CHECK_MESSAGE(rep.result.ok, rep.result.first_difference);
    }
}

TEST_CASE("moe-path reference: given ids and weights, T = 0 and one token") {
  for (std::int64_t T : {0, 1, 5}) {
    const std::int32_t E = 8, K = 3;
    const std::int64_t H = 8;
    const auto p = moe_path::make_problem(T, K, E, H, combine::DType::bf16, Layout::compact, 1, 1.0f);
    CHECK_FALSE(p.routed);
    std::vector<std::int32_t> ids;
    std::vector<float> w;
    for (std::int64_t t = 0; t < T; ++t)
      for (int j = 0; j < K; ++j) {
        ids.push_back(static_cast<std::int32_t>((t + 3 * j) % E));
        w.push_back(0.25f * float(j + 1));
      }
    const auto hidden = rows(T * H, combine::DType::bf16, 4);
    moe_path::Inputs in;
    in.hidden = hidden.data();
    in.ids = ids;
    in.weights = w;
    const moe_path::Outputs o = moe_path::reference(p, in);
    CHECK(o.out.size() == std::size_t(T * H * 2));
    CHECK(o.routed.ids == ids);
    CHECK(moe_path::check(p, in, o, o).result.ok);
    // out = sum(w) * hidden = 1.5 * x: every partial sum is exact in f32, so out is x * 1.5 rounded once
    for (std::int64_t i = 0; i < T * H; ++i) {
      std::uint16_t hx, ox;
      std::memcpy(&hx, hidden.data() + i * 2, 2);
      std::memcpy(&ox, o.out.data() + i * 2, 2);
      CHECK(bf16_bits_to_f32(ox) == bf16_bits_to_f32(f32_to_bf16_bits(1.5f * bf16_bits_to_f32(hx))));
    }
  }
}

TEST_CASE("moe-path check: a wrong output is caught at its stage") {
  const std::int64_t T = 6, H = 16;
  const std::int32_t E = 16, K = 4;
  const route::Problem router = deepseek_like();
  const std::vector<float> lg = logits(T * E, 5), bias = logits(E, 6);
  const auto p = moe_path::make_problem(T, K, E, H, combine::DType::bf16, Layout::padded, 4, 2.5f, &router);
  const auto hidden = rows(T * H, combine::DType::bf16, 7);
  moe_path::Inputs in;
  in.logits = lg.data();
  in.bias = bias.data();
  in.hidden = hidden.data();
  const moe_path::Outputs ref = moe_path::reference(p, in);
  auto first = [&](const moe_path::Outputs& got) { return moe_path::check(p, in, ref, got).result; };

  auto bad = ref;
  bad.routed.weights[5] *= 1.01f;  // a weight off
  CheckResult c = first(bad);
  CHECK_FALSE(c.ok);
  CHECK(c.first_difference.rfind("route stage: ", 0) == 0);

  bad = ref;
  bad.permuted.permuted[bad.permuted.inverse[2] * H * 2 + 3] ^= std::byte{1};  // a permuted row
  c = first(bad);
  CHECK_FALSE(c.ok);
  CHECK(c.first_difference.rfind("permute stage: ", 0) == 0);

  bad = ref;
  bad.out[7 * 2] ^= std::byte{1};  // out[0, 7]: one bit
  c = first(bad);
  CHECK_FALSE(c.ok);
  CHECK(c.first_difference.rfind("combine stage: out[0, 7]", 0) == 0);

  bad = ref;
  bad.out.resize(bad.out.size() - 2);
  CHECK_FALSE(first(bad).ok);
}

TEST_CASE("moe-path identity check: 1 ULP passes, 2 fail (bf16); 1e-5 relative (f32)") {
  const std::int64_t T = 2, H = 4;
  const std::int32_t K = 2;
  auto p = moe_path::make_problem(T, K, 4, H, combine::DType::bf16, Layout::compact, 1, 2.0f);
  const std::vector<float> w = {0.25f, 0.5f, 1.0f, 0.125f};
  std::vector<std::uint16_t> x(T * H), out(T * H);
  for (std::int64_t i = 0; i < T * H; ++i) {
    x[i] = f32_to_bf16_bits(0.1f * float(i + 1));
    const double sum = i < H ? 0.75 : 1.125;
    out[i] = f64_to_bf16_bits(2.0 * sum * bf16_bits_to_f64(x[i]));
  }
  auto as_bytes = [](const std::vector<std::uint16_t>& v) { return reinterpret_cast<const std::byte*>(v.data()); };
  CheckResult c = moe_path::check_identity(p, as_bytes(x), w.data(), as_bytes(out));
  CHECK(c.ok);
  CHECK(c.max_error == 0);
  CHECK(c.error_unit == "ulp");
  out[6] += 1;  // one ULP (positive values: the next pattern up)
  c = moe_path::check_identity(p, as_bytes(x), w.data(), as_bytes(out));
  CHECK(c.ok);
  CHECK(c.max_error == 1);
  out[6] += 1;
  c = moe_path::check_identity(p, as_bytes(x), w.data(), as_bytes(out));
  CHECK_FALSE(c.ok);
  CHECK(c.first_difference.rfind("out[1, 2] = ", 0) == 0);

  p = moe_path::make_problem(T, K, 4, H, combine::DType::f32, Layout::compact, 1, 2.0f);
  std::vector<float> xf(T * H), of(T * H);
  for (std::int64_t i = 0; i < T * H; ++i) {
    xf[i] = 0.1f * float(i + 1);
    of[i] = static_cast<float>(2.0 * (i < H ? 0.75 : 1.125) * xf[i]);
  }
  auto fb = [](const std::vector<float>& v) { return reinterpret_cast<const std::byte*>(v.data()); };
  c = moe_path::check_identity(p, fb(xf), w.data(), fb(of));
  CHECK(c.ok);
  CHECK(c.error_unit == "rel");
  of[3] *= 1.000002f;
  CHECK(moe_path::check_identity(p, fb(xf), w.data(), fb(of)).ok);
  of[3] *= 1.0001f;
  CHECK_FALSE(moe_path::check_identity(p, fb(xf), w.data(), fb(of)).ok);
}

// The stages' picks size the path's workspace, which has no pdl (the
// Variant contract), and the same picks launch: that holds only while no
// stage family's auto row depends on PDL.
TEST_CASE("moe-path stages: no auto row of route, permute (align) or combine depends on PDL") {
  CHECK_FALSE(route::registry().auto_reads_pdl());
  CHECK_FALSE(permute::registry().auto_reads_pdl());
  CHECK_FALSE(align::registry().auto_reads_pdl());
  CHECK_FALSE(combine::registry().auto_reads_pdl());
}

TEST_CASE("moe-path make_problem: route's and align's limits refuse") {
  const route::Problem router = deepseek_like();
  CHECK_THROWS(moe_path::make_problem(4, 9, 16, 8, combine::DType::bf16, Layout::padded, 4, 1.0f, &router));  // K > KG groups' experts
  CHECK_THROWS(moe_path::make_problem(std::int64_t(1) << 32, 8, 256, 8, combine::DType::bf16, Layout::padded, 64,
                                      1.0f));  // T*K beyond int32
  const auto p = moe_path::make_problem(3, 2, 8, 5, combine::DType::f16, Layout::padded, 16, 1.0f);
  CHECK(p.permute.row_bytes == 10);
  CHECK(p.combine.rows == p.permute.align.max_num_tokens_padded);
}
