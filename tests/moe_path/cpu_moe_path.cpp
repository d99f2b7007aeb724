// The moe-path CPU reference and checker: the chained references against the
// identity formula and (--experts ffn) against the expert FFN written out
// here, and a wrong output caught at each stage, named by it.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "combine/reference.hpp"
#include "experts/weights.hpp"
#include "fake_caps.hpp"
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

// A check that failed, its first difference starting with `prefix` (the stage and the place).
void expect_caught(const CheckResult& c, const std::string& prefix) {
  INFO("expected a failure starting with: " << prefix << "; got: " << c.first_difference);
  CHECK_FALSE(c.ok);
  CHECK(c.first_difference.rfind(prefix, 0) == 0);
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
  expect_caught(c, "route stage: ");

  bad = ref;
  bad.permuted.permuted[bad.permuted.inverse[2] * H * 2 + 3] ^= std::byte{1};  // a permuted row
  c = first(bad);
  expect_caught(c, "permute stage: ");

  bad = ref;
  bad.out[7 * 2] ^= std::byte{1};  // out[0, 7]: one bit
  c = first(bad);
  expect_caught(c, "combine stage: out[0, 7]");

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
  expect_caught(c, "out[1, 2] = ");

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

// ---- the expert FFN (--experts ffn) -------------------------------------------

namespace {

// The FFN written out here, per slot, in double: h = x . W1[e]^T rounded to
// the dtype, a = act(gate) * up rounded, y = a . W2[e]^T rounded (docs/experts.md's
// formula, read independently of src/experts/reference.cpp).
struct Ffn {
  std::int64_t E, H, I;
  bool bf16;
  experts::Act act;
  bool interleaved;
  std::vector<std::uint16_t> w1, w2;  // [E, 2I, H], [E, H, I] dtype bits
  double val(std::uint16_t b) const { return bf16 ? bf16_bits_to_f64(b) : f16_bits_to_f64(b); }
  double rnd(double v) const { return val(bf16 ? f64_to_bf16_bits(v) : f64_to_f16_bits(v)); }
  std::vector<double> y(const std::uint16_t* x, std::int64_t e) const {
    std::vector<double> a(I), out(H);
    for (std::int64_t i = 0; i < I; ++i) {
      const std::int64_t gr = interleaved ? 2 * i : i, ur = interleaved ? 2 * i + 1 : I + i;
      double g = 0, u = 0;
      for (std::int64_t c = 0; c < H; ++c) {
        g += val(x[c]) * val(w1[(e * 2 * I + gr) * H + c]);
        u += val(x[c]) * val(w1[(e * 2 * I + ur) * H + c]);
      }
      g = rnd(g);
      u = rnd(u);
      const double f = act == experts::Act::silu ? g / (1 + std::exp(-g)) : 0.5 * g * (1 + std::erf(g / std::sqrt(2.0)));
      a[i] = rnd(f * u);
    }
    for (std::int64_t c = 0; c < H; ++c) {
      double s = 0;
      for (std::int64_t i = 0; i < I; ++i) s += a[i] * val(w2[(e * H + c) * I + i]);
      out[c] = rnd(s);
    }
    return out;
  }
};

// Random given weights (normal * 0.3, the dtype's bits).
std::vector<std::uint16_t> weights16(std::size_t n, bool bf16, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 0.3);
  std::vector<std::uint16_t> v(n);
  for (auto& b : v) b = bf16 ? f64_to_bf16_bits(nd(rng)) : f64_to_f16_bits(nd(rng));
  return v;
}

std::uint16_t bits_at(const std::vector<std::byte>& v, std::size_t i) {
  std::uint16_t b;
  std::memcpy(&b, v.data() + i * 2, 2);
  return b;
}

}  // namespace

TEST_CASE("moe-path make_problem with the FFN: the experts plan is the path's, stages, refusals") {
  const moe_path::FfnArgs f{24, experts::Act::silu, experts::W1Layout::gate_up};
  const auto p = moe_path::make_problem(5, 2, 8, 40, combine::DType::bf16, Layout::padded, 16, 2.5f, nullptr, &f);
  CHECK(p.ffn);
  CHECK(p.experts.inter == 24);
  CHECK(p.experts.hidden == 40);
  CHECK(p.experts.combine.scaling == 2.5f);
  CHECK(p.permute.align.max_num_tokens_padded == p.experts.permute.align.max_num_tokens_padded);
  CHECK(p.permute.row_bytes == 80);
  CHECK(p.combine.rows == p.experts.rows());
  CHECK(std::vector<moe_path::Stage>(moe_path::stages(p).begin(), moe_path::stages(p).end()) ==
        std::vector<moe_path::Stage>{moe_path::Stage::permute, moe_path::Stage::ffn, moe_path::Stage::combine});
  CHECK(moe_path::stage_name(moe_path::Stage::ffn) == "ffn");
  const route::Problem router = deepseek_like();
  const auto pr = moe_path::make_problem(5, 2, 16, 40, combine::DType::f16, Layout::compact, 1, 1.0f, &router, &f);
  CHECK(std::vector<moe_path::Stage>(moe_path::stages(pr).begin(), moe_path::stages(pr).end()) ==
        std::vector<moe_path::Stage>{moe_path::Stage::route, moe_path::Stage::permute, moe_path::Stage::ffn,
                                     moe_path::Stage::combine});
  // identity experts: no ffn stage
  const auto pi = moe_path::make_problem(5, 2, 8, 40, combine::DType::bf16, Layout::padded, 16, 1.0f);
  CHECK_FALSE(pi.ffn);
  CHECK(moe_path::stages(pi).size() == 2);
  CHECK_THROWS_WITH(moe_path::make_problem(5, 2, 8, 40, combine::DType::f32, Layout::padded, 16, 1.0f, nullptr, &f),
                    doctest::Contains("bf16 or f16"));
  const moe_path::FfnArgs oai{24, experts::Act::swiglu_oai, experts::W1Layout::gate_up};
  CHECK_THROWS(moe_path::make_problem(5, 2, 8, 40, combine::DType::bf16, Layout::padded, 16, 1.0f, nullptr, &oai));
  const moe_path::FfnArgs none{0, experts::Act::silu, experts::W1Layout::gate_up};
  CHECK_THROWS(moe_path::make_problem(5, 2, 8, 40, combine::DType::bf16, Layout::padded, 16, 1.0f, nullptr, &none));
  // the CPU limit's count: 3 I H per slot, and per used expert when generated
  CHECK(moe_path::ffn_reference_macs(p, false) == 5.0 * 2 * 3 * 24 * 40);
  CHECK(moe_path::ffn_reference_macs(p, true) == (10.0 + 8.0) * 3 * 24 * 40);
  CHECK_FALSE(experts::registry().auto_reads_pdl());  // the experts pick sizes the path's workspace too
}

// Where experts' auto takes `fused` (sm_90, small T*K), which lists the slots
// and combines itself, the path drops its permute and combine stages: route
// and ffn, hand-listed; at 40 slots decode and the four stages again on a part
// whose DRAM peak is not known (or high), fused on one like the H100.
TEST_CASE("moe-path with the FFN: route and ffn alone where experts' auto takes fused") {
  const DeviceCaps sm90 = test::fake_sm90();
  const moe_path::FfnArgs f{256, experts::Act::silu, experts::W1Layout::gate_up};
  const route::Problem router = deepseek_like();
  using S = moe_path::Stage;
  for (const std::int64_t T : {1, 4, 5}) {
    INFO("T " << T);
    const auto p = moe_path::make_problem(T, 8, 256, 7168, combine::DType::bf16, Layout::compact, 64, 2.5f, nullptr, &f);
    const auto pr = moe_path::make_problem(T, 8, 16, 7168, combine::DType::bf16, Layout::compact, 64, 2.5f, &router, &f);
    const bool fused = T * 8 <= 32;
    CHECK(moe_path::ffn_lists_slots(p, sm90) == fused);
    CHECK(moe_path::stage_variant(p, S::ffn, sm90) == (fused ? "fused" : "decode"));
    const auto st = moe_path::stages(p, sm90);
    CHECK(std::vector<S>(st.begin(), st.end()) ==
          (fused ? std::vector<S>{S::ffn} : std::vector<S>{S::permute, S::ffn, S::combine}));
    // 16 experts, K 8: 8 and 32 slots over at most 8 and 16 experts (few rows), 40 slots past fused's row
    CHECK(moe_path::ffn_lists_slots(pr, sm90) == fused);
    const auto sr = moe_path::stages(pr, sm90);
    CHECK(std::vector<S>(sr.begin(), sr.end()) ==
          (fused ? std::vector<S>{S::route, S::ffn} : std::vector<S>{S::route, S::permute, S::ffn, S::combine}));
    // fused keeps its counters zero: the path's zeroed prefix reaches into the FFN's slice
    const moe_path::Variant& v = moe_path::registry().variants()[0];
    CHECK(needs_zeroed_workspace(v, p, sm90) == fused);
    if (fused) CHECK(moe_path::zeroed_workspace_bytes(p, sm90) > 0);
  }
  // The H100's DRAM peak (25 GB/s an SM): 40 slots at about a row an expert are fused's too.
  DeviceCaps h100 = sm90;
  h100.dram_peak_gbps = 3352.0;
  const auto p5 = moe_path::make_problem(5, 8, 256, 7168, combine::DType::bf16, Layout::compact, 64, 2.5f, &router, &f);
  CHECK(moe_path::ffn_lists_slots(p5, h100));
  const auto s5 = moe_path::stages(p5, h100);
  CHECK(std::vector<S>(s5.begin(), s5.end()) == std::vector<S>{S::route, S::ffn});
  // Not on sm_80: experts' auto keeps decode there.
  DeviceCaps sm80 = sm90;
  sm80.cc_major = 8;
  const auto p1 = moe_path::make_problem(1, 8, 256, 7168, combine::DType::bf16, Layout::compact, 64, 2.5f, nullptr, &f);
  CHECK_FALSE(moe_path::ffn_lists_slots(p1, sm80));
  CHECK(moe_path::stages(p1, sm80).size() == 3);
}

// A small path case with the FFN: T tokens of two slots, slot (t, j) on
// expert id(t, j) with weight w[j], bf16 hidden rows from `rows_seed`,
// generated weights from `weights_seed`. `in` points into the case, which
// therefore stays where it was made.
struct FfnCase {
  std::vector<std::byte> hidden;
  std::vector<std::int32_t> ids;
  std::vector<float> w;
  moe_path::Inputs in;
  template <class Id>
  FfnCase(std::int64_t T, std::int64_t H, Id id, std::array<float, 2> wj, std::uint64_t rows_seed,
          std::uint64_t weights_seed)
      : hidden(rows(T * H, combine::DType::bf16, rows_seed)) {
    for (std::int64_t t = 0; t < T; ++t)
      for (int j = 0; j < 2; ++j) {
        ids.push_back(id(t, j));
        w.push_back(wj[std::size_t(j)]);
      }
    in.hidden = hidden.data();
    in.ids = ids;
    in.weights = w;
    in.w.generated = true;
    in.w.seed = weights_seed;
  }
  FfnCase(const FfnCase&) = delete;
  FfnCase& operator=(const FfnCase&) = delete;
};

// A run whose FFN listed the slots (Outputs::slot_rows): no permute outputs,
// an inverse map that is the identity on kept slots, y in slot order. The
// reference rearranged so passes; a wrong inverse entry, a wrong y row and a
// wrong out bit fail at their stages.
TEST_CASE("moe-path check of slot rows: identity inverse, y in slot order") {
  const std::int64_t T = 5, H = 16, I = 8;
  const std::int32_t E = 8, K = 2;
  const moe_path::FfnArgs f{I, experts::Act::silu, experts::W1Layout::gate_up};
  const auto p = moe_path::make_problem(T, K, E, H, combine::DType::bf16, Layout::padded, 16, 1.5f, nullptr, &f);
  const FfnCase fc(T, H, [&](std::int64_t t, int j) { return static_cast<std::int32_t>((3 * t + 5 * j) % E); },
                   {0.75f, 0.25f}, 4, 5);
  const moe_path::Inputs& in = fc.in;
  const moe_path::Outputs ref = moe_path::reference(p, in);
  moe_path::Outputs got;
  got.slot_rows = true;
  got.routed = ref.routed;
  got.out = ref.out;
  got.y.assign(ref.y.size(), 0);
  for (std::size_t s = 0; s < std::size_t(T * K); ++s) {
    got.permuted.inverse.push_back(static_cast<std::int32_t>(s));
    std::copy_n(ref.y.begin() + std::ptrdiff_t(ref.permuted.inverse[s] * H), H, got.y.begin() + std::ptrdiff_t(s * H));
  }
  REQUIRE(moe_path::check(p, in, ref, got).result.ok);
  auto bad = got;
  bad.permuted.inverse[3] = 4;
  CheckResult c = moe_path::check(p, in, ref, bad).result;
  expect_caught(c, "ffn stage: inverse[1, 1] = 4, expected 3");
  bad = got;  // slot (3, 0)'s y row replaced by slot (3, 1)'s, out recomputed from it
  std::copy_n(got.y.begin() + 7 * H, H, bad.y.begin() + 6 * H);
  combine::reference(p.combine, bad.y.data(), bad.permuted.inverse.data(), bad.routed.weights.data(), bad.out.data());
  c = moe_path::check(p, in, ref, bad).result;
  expect_caught(c, "ffn stage: y of slot (3, 0)");
  bad = got;
  bad.out[(2 * H + 5) * 2] ^= std::byte{1};
  c = moe_path::check(p, in, ref, bad).result;
  expect_caught(c, "combine stage: out[2, 5]");
}

TEST_CASE("moe-path reference with the FFN: y and out against the FFN written out, given and generated weights") {
  struct Case {
    bool bf16, generated, routed;
    experts::Act act;
    experts::W1Layout w1l;
    Layout layout;
  };
  const Case cases[] = {
      {true, false, false, experts::Act::silu, experts::W1Layout::gate_up, Layout::padded},
      {false, false, true, experts::Act::silu, experts::W1Layout::gate_up, Layout::compact},
      {true, true, false, experts::Act::gelu, experts::W1Layout::interleaved, Layout::compact},
      {false, true, true, experts::Act::gelu, experts::W1Layout::interleaved, Layout::padded},
  };
  const std::int64_t T = 7, H = 12, I = 10;
  const std::int32_t E = 8, K = 3;
  std::uint64_t seed = 40;
  for (const Case& cs : cases) {
    ++seed;
    CAPTURE(seed);
    const combine::DType dt = cs.bf16 ? combine::DType::bf16 : combine::DType::f16;
    const moe_path::FfnArgs f{I, cs.act, cs.w1l};
    const route::Problem router = deepseek_like();  // 4 groups of 2, keep 2: 4 candidates >= K
    const auto p = moe_path::make_problem(T, K, E, H, dt, cs.layout, 4, 1.5f, cs.routed ? &router : nullptr, &f);
    const auto hidden = rows(T * H, dt, seed);
    const std::vector<float> lg = logits(T * E, seed + 100), bias = logits(E, seed + 200);
    std::vector<std::int32_t> ids;
    std::vector<float> w;
    for (std::int64_t t = 0; t < T; ++t)
      for (int j = 0; j < K; ++j) {
        ids.push_back(static_cast<std::int32_t>((t * 5 + j * 3) % E));
        w.push_back(j == 2 ? -0.25f : 0.75f - 0.25f * float(j));  // 0.75, 0.5, -0.25
      }
    Ffn ffn{E, H, I, cs.bf16, cs.act, cs.w1l == experts::W1Layout::interleaved, {}, {}};
    moe_path::Inputs in;
    in.hidden = hidden.data();
    if (cs.routed) {
      in.logits = lg.data();
      in.bias = bias.data();
    } else {
      in.ids = ids;
      in.weights = w;
    }
    if (cs.generated) {
      in.w.generated = true;
      in.w.seed = seed;
      // the generator's definition (weights.hpp): element (matrix, e, row, col) rounded to the dtype
      for (int m = 0; m < 2; ++m) {
        const std::int64_t R = m == 0 ? 2 * I : H, C = m == 0 ? H : I;
        auto& dst = m == 0 ? ffn.w1 : ffn.w2;
        for (std::int64_t e = 0; e < E; ++e)
          for (std::int64_t r = 0; r < R; ++r)
            for (std::int64_t c = 0; c < C; ++c) {
              const double v = experts::weight_value(seed, m, e, r, c, R, C, experts::weight_scale(C));
              dst.push_back(cs.bf16 ? f64_to_bf16_bits(v) : f64_to_f16_bits(v));
            }
      }
    } else {
      ffn.w1 = weights16(std::size_t(E * 2 * I * H), cs.bf16, seed + 300);
      ffn.w2 = weights16(std::size_t(E * H * I), cs.bf16, seed + 400);
      in.w.generated = false;
      in.w.w1 = ffn.w1;
      in.w.w2 = ffn.w2;
    }
    in.sample_seed = seed;
    const moe_path::Outputs o = moe_path::reference(p, in);
    REQUIRE(o.y.size() == std::size_t(p.experts.rows() * H));
    REQUIRE(o.out.size() == std::size_t(T * H * 2));
    const auto* x = reinterpret_cast<const std::uint16_t*>(hidden.data());
    int y_off_by_one = 0;
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<double> want(H, 0.0);
      for (int j = 0; j < K; ++j) {
        const std::int32_t e = o.routed.ids[t * K + j];
        if (!cs.routed) CHECK(e == ids[t * K + j]);
        const std::vector<double> y = ffn.y(x + t * H, e);
        const std::int32_t row = o.permuted.inverse[t * K + j];
        REQUIRE(row >= 0);
        for (std::int64_t c = 0; c < H; ++c) {
          // two double evaluations of one formula: equal, or one rounding apart at a tie-close sum
          const std::uint16_t got = o.y[std::size_t(row * H + c)];
          const std::uint16_t mine = cs.bf16 ? f64_to_bf16_bits(y[c]) : f64_to_f16_bits(y[c]);
          const std::int64_t d = ulp_distance16(got, mine);
          CHECK(d <= 1);
          y_off_by_one += d == 1;
          want[c] += double(o.routed.weights[t * K + j]) * ffn.val(got);
        }
      }
      for (std::int64_t c = 0; c < H; ++c) {  // out = S * sum_j w y, one rounding (f32 sum: within 1 ULP)
        const std::uint16_t wb = cs.bf16 ? f64_to_bf16_bits(1.5 * want[c]) : f64_to_f16_bits(1.5 * want[c]);
        CAPTURE(t);
        CAPTURE(c);
        CHECK(ulp_distance16(bits_at(o.out, std::size_t(t * H + c)), wb) <= 1);
      }
    }
    CHECK(y_off_by_one <= 2);
    // the reference passes its own check, every token sampled at this size
    const moe_path::CheckReport rep = moe_path::check(p, in, o, o);
    CHECK_MESSAGE(rep.result.ok, rep.result.first_difference);
    CHECK(rep.ffn_tokens == T);
    CHECK(rep.result.error_unit == "bound");
    // a GPU run's reference: no FFN, no combine
    const moe_path::Outputs lean = moe_path::reference(p, in, false);
    CHECK(lean.y.empty());
    CHECK(lean.out.empty());
    CHECK(lean.permuted.inverse == o.permuted.inverse);
    CHECK(moe_path::check(p, in, lean, o).result.ok);
  }
}

TEST_CASE("moe-path check with the FFN: a wrong y is caught at the ffn stage, a wrong out at combine") {
  const std::int64_t T = 6, H = 16, I = 8;
  const std::int32_t E = 8, K = 2;
  const moe_path::FfnArgs f{I, experts::Act::silu, experts::W1Layout::gate_up};
  const auto p = moe_path::make_problem(T, K, E, H, combine::DType::bf16, Layout::compact, 1, 1.0f, nullptr, &f);
  // the two slots of a token: experts 4 apart
  const FfnCase fc(T, H, [&](std::int64_t t, int j) { return static_cast<std::int32_t>((t + 4 * j) % E); },
                   {0.625f, 0.375f}, 9, 3);
  const moe_path::Inputs& in = fc.in;
  const moe_path::Outputs ref = moe_path::reference(p, in);
  REQUIRE(moe_path::check(p, in, ref, ref).result.ok);
  // y changed and out recomputed from it by combine's rule: only the FFN check can see it
  auto with_y = [&](moe_path::Outputs got) {
    combine::reference(p.combine, got.y.data(), got.permuted.inverse.data(), got.routed.weights.data(), got.out.data());
    return moe_path::check(p, in, ref, got).result;
  };
  // (1) slot (2, 1) computed by another expert: its row takes slot (2, 0)'s y
  auto bad = ref;
  const std::int32_t r0 = ref.permuted.inverse[2 * K + 0], r1 = ref.permuted.inverse[2 * K + 1];
  std::copy_n(ref.y.begin() + r0 * H, H, bad.y.begin() + r1 * H);
  CheckResult c = with_y(bad);
  expect_caught(c, "ffn stage: y of slot (2, 1)");
  // (2) one element 10 % and 0.05 off
  bad = ref;
  std::uint16_t& e = bad.y[std::size_t(ref.permuted.inverse[5 * K + 0] * H + 3)];
  e = f64_to_bf16_bits(bf16_bits_to_f64(e) * 1.1 + 0.05);
  c = with_y(bad);
  expect_caught(c, "ffn stage: y of slot (5, 0)");
  // (3) out off by one bit with y right: combine's bit-for-bit check
  bad = ref;
  bad.out[(1 * H + 2) * 2] ^= std::byte{1};
  c = moe_path::check(p, in, ref, bad).result;
  expect_caught(c, "combine stage: out[1, 2]");
  // (4) y missing
  bad = ref;
  bad.y.clear();
  c = moe_path::check(p, in, ref, bad).result;
  CHECK_FALSE(c.ok);
  CHECK(c.first_difference.find("y holds 0 elements") != std::string::npos);
}
