// GPU test: every route variant against the CPU reference, over configs that
// cover the paths (E from 1 to 4096, K = 1 .. E, groups with and without a
// bias, lane-group and shared-memory group scoring, vector and unaligned
// rows) x T {0, 1, 3, 77, 2000} x dtype x scoring x PDL on/off. Inputs are
// seeded standard-normal logits, plus rows of quantized logits full of exact
// ties; the logits sit 4 bytes off alignment in every other run (the scalar
// load path). Outputs are poisoned between guard zones. One assertion per
// (variant, config, T, dtype) names all of them and the seed.
//
// MOEKIT_GPU_SUBSET=sanitizer runs T <= 3 and E <= 256 only.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "cuda_util.hpp"
#include "gpu_case.hpp"
#include "half.hpp"
#include "align/align.hpp"
#include "align/reference.hpp"
#include "route/buffers.hpp"
#include "route/reference.hpp"
#include "route/route.hpp"
#include "route/then_align.hpp"

using namespace moekit;
using route::Problem;

namespace {

struct Config {
  int E, K, G = 1, KG = 1;
  bool bias = false, renorm = false;
  float scaling = 1.0f;
};

const Config kConfigs[] = {
    {1, 1},
    {2, 2},
    {8, 2},
    {8, 8, 1, 1, true, true, 2.5f},     // K = E with a bias and a scaling factor
    {5, 3, 1, 1, false, true},          // a row of no whole 16-byte vector
    {16, 3, 1, 1, true},                // two 16-byte vectors in the 2-byte dtypes
    {32, 2},                            // K 2 merged over 4 (f32) or 8 lanes
    {100, 2, 1, 1, true, true},         // 2-byte dtypes: 16 lanes, one part-filled, three empty
    {16, 4, 4, 2, false},
    {31, 5},
    {64, 6, 1, 1, false, true},
    {64, 8, 8, 4, true, true, 2.5f},
    {64, 64},
    {96, 7, 3, 2, true},
    {128, 8, 1, 1, false, true},
    {128, 1, 1, 1, true},
    {160, 6, 10, 3, true, true},
    {256, 8, 8, 4, true, true, 2.5f},   // DeepSeek-V3: lane groups in warp-regs
    {256, 8, 8, 4, false},              // group max
    {256, 32, 1, 1, false, true},
    {384, 8, 1, 1, true},
    {512, 16, 16, 4, true, true},
    {512, 8, 64, 8, true},              // groups of 8 experts: shared-memory group scores
    {1000, 10, 10, 5, true, true},
    {1024, 16},
    {2048, 8, 8, 4, true, true, 2.5f},
    {4096, 64, 64, 8, true, true},
    {4096, 4},
    {300, 300},                         // K = E
};
constexpr std::int64_t kTokens[] = {0, 1, 3, 77, 2000};
const route::DType kDtypes[] = {route::DType::f32, route::DType::bf16, route::DType::f16};

// The problem of one config at T tokens.
Problem problem_of(const Config& c, std::int64_t T, route::DType dt, route::Scoring sc) {
  const Problem p{.tokens = T, .experts = c.E, .topk = c.K, .groups = c.G, .topk_groups = c.KG, .scoring = sc,
                  .bias = c.bias, .renormalize = c.renorm, .scaling = c.scaling, .dtype = dt};
  route::validate(p);
  return p;
}

// problem_of for variant v: with its align plan where v runs align too
// (block-rank-align), at B 16.
Problem problem_for(const route::Variant& v, const Config& c, std::int64_t T, route::DType dt, route::Scoring sc) {
  Problem p = problem_of(c, T, dt, sc);
  if (route::fuses_align(v)) (void)route::plan_then_align(p, 16);
  return p;
}

const char* name(route::DType d) { return d == route::DType::f32 ? "f32" : d == route::DType::bf16 ? "bf16" : "f16"; }

// Logits of one dtype as raw bytes, and the same values widened to f32.
struct Logits {
  std::vector<unsigned char> raw;
  std::vector<float> wide;
};

// Logit i of l in dtype dt (f32, or rounded to the 2-byte dtype); the value
// as the kernel reads it.
float put_logit(Logits& l, std::size_t i, float x, route::DType dt) {
  if (dt == route::DType::f32) {
    std::memcpy(&l.raw[i * 4], &x, 4);
    return x;
  }
  const std::uint16_t h = dt == route::DType::bf16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
  std::memcpy(&l.raw[i * 2], &h, 2);
  return dt == route::DType::bf16 ? bf16_bits_to_f32(h) : f16_bits_to_f32(h);
}

Logits make_logits(std::int64_t T, int E, route::DType dt, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  Logits l;
  const std::size_t n = std::size_t(T) * E, es = dt == route::DType::f32 ? 4 : 2;
  l.raw.resize(n * es);
  l.wide.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t t = std::int64_t(i) / E;
    // Every fifth row: logits in {-1, -0.5, 0, 0.5, 1}, so exact ties abound.
    const float x = t % 5 == 4 ? 0.5f * float(int(rng() % 5) - 2) : 2.0f * nd(rng);
    l.wide[i] = put_logit(l, i, x, dt);
  }
  return l;
}

// The device side of one run: the logits `misalign` bytes off, the bias,
// every output (the align outputs when p.align_block > 0) poisoned between
// guard zones, the workspace (0xCD, or zeroed when the variant keeps it zero).
route::DeviceBuffers device_run(const Problem& p, const Logits& lg, const std::vector<float>& bias, WorkspaceNeed ws,
                                std::size_t misalign = 0) {
  return route::DeviceBuffers(p, {std::as_bytes(std::span(lg.raw)), bias}, ws, SetOptions::checked(misalign));
}

// With `pdl` v launches with programmatic dependent launch.
std::string run_case(const route::Variant& v, const Problem& p, bool pdl, const Logits& lg,
                     const std::vector<float>& bias, std::size_t misalign, std::int64_t* near_ties) {
  const DeviceCaps& caps = device_caps();
  if (v.not_applicable(p, caps) != nullptr) return {};
  const route::DeviceBuffers d = device_run(p, lg, bias, WorkspaceNeed::of(v, p, caps), misalign);
  const route::Buffers b = d.buffers(0);
  // With PDL twice back to back: the second launch overlaps the first one's tail.
  if (std::string e = test::launch_and_sync([&] { return v.launch(p, b, nullptr, pdl); }, pdl ? 2 : 1); !e.empty())
    return e;
  route::Outputs got;
  if (std::string g = d.download(got); !g.empty()) return g;
  const route::Outputs ref = route::reference(p, lg.wide.data(), p.bias ? bias.data() : nullptr);
  const route::CheckReport rep = route::check(p, lg.wide.data(), p.bias ? bias.data() : nullptr, ref, got);
  *near_ties += rep.near_tie_rows;
  return rep.result.ok ? std::string() : rep.result.first_difference;
}

}  // namespace

TEST_CASE("route: every variant against the CPU reference") {
  const bool subset = test::sanitizer_subset();
  std::int64_t near_ties = 0, runs = 0;
  std::uint64_t seed = 1;
  for (const Config& c : kConfigs) {
    if (subset && c.E > 256) continue;
    std::vector<float> bias(c.E);
    std::mt19937_64 brng(c.E * 7919 + c.K);
    std::normal_distribution<float> nd(0.f, 0.1f);
    for (float& x : bias) x = nd(brng);
    for (std::int64_t T : kTokens) {
      if (subset && T > 3) continue;
      for (route::DType dt : kDtypes) {
        for (route::Scoring sc : {route::Scoring::softmax, route::Scoring::sigmoid}) {
          ++seed;
          const Problem p = problem_of(c, T, dt, sc);
          const bool pdl = (seed & 1) && device_caps().pdl;
          const Logits lg = make_logits(T, c.E, dt, seed);
          const std::size_t misalign = (seed & 2) ? 4 : 0;
          for (const route::Variant& v : route::registry().variants()) {
            const std::string what =
                "variant " + std::string(v.info.name) + ", E=" + std::to_string(c.E) + " K=" + std::to_string(c.K) +
                " G=" + std::to_string(c.G) + " KG=" + std::to_string(c.KG) + (c.bias ? " bias" : "") +
                (c.renorm ? " renorm" : "") + ", T=" + std::to_string(T) + ", " + name(dt) + ", " +
                (sc == route::Scoring::softmax ? "softmax" : "sigmoid") + (pdl ? ", pdl" : "") +
                ", misalign " + std::to_string(misalign) + ", seed " + std::to_string(seed);
            test::expect_ok(what, run_case(v, p, pdl, lg, bias, misalign, &near_ties));
            ++runs;
          }
        }
      }
    }
  }
  MESSAGE(runs << " runs, " << near_ties << " near-tie rows (passed within the tolerance)");
}

// block-rank-align: the route outputs and the align outputs of the ids it
// produced, over T x K up to its 8192-slot limit and several block sizes;
// launched twice on the same workspace (the done-counter must come back zero).
TEST_CASE("route: block-rank-align against the route and align references") {
  const bool subset = test::sanitizer_subset();
  const route::Variant* v = route::registry().find("block-rank-align");
  REQUIRE(v != nullptr);
  const DeviceCaps& caps = device_caps();
  std::uint64_t seed = 5000;
  int runs = 0;
  for (const Config& c : kConfigs) {
    if (c.E > 1024 || c.K > 32 || (subset && c.E > 256)) continue;
    std::vector<float> bias(c.E, 0.05f);
    for (std::int64_t T : {0, 1, 3, 64, 255}) {
      if (subset && T > 3) continue;
      if (T * c.K > 8192) continue;
      for (int B : {1, 16, 64}) {
        ++seed;
        Problem p = problem_of(c, T, seed % 3 == 0 ? route::DType::bf16 : route::DType::f32,
                               seed % 2 ? route::Scoring::sigmoid : route::Scoring::softmax);
        const bool pdl = (seed & 4) && caps.pdl;
        const align::Problem ap = route::plan_then_align(p, B);
        const std::string what = "block-rank-align E=" + std::to_string(c.E) + " K=" + std::to_string(c.K) +
                                 " G=" + std::to_string(c.G) + " T=" + std::to_string(T) + " B=" +
                                 std::to_string(B) + " seed " + std::to_string(seed);
        if (v->not_applicable(p, caps) != nullptr) continue;
        const Logits lg = make_logits(T, c.E, p.dtype, seed);
        route::DeviceBuffers d = device_run(p, lg, bias, {v->workspace_bytes(p, caps), true});
        const route::Buffers b = d.buffers(0);
        for (int rep = 0; rep < 2; ++rep) {
          d.poison();
          std::string why = test::launch_and_sync([&] { return v->launch(p, b, nullptr, pdl); });
          if (why.empty() && !d.workspace_zero()) why = "the workspace was not handed back zeroed";
          route::Outputs got;
          align::Outputs agot;
          if (why.empty()) why = d.download(got, &agot);
          if (why.empty()) {
            const route::Outputs ref = route::reference(p, lg.wide.data(), p.bias ? bias.data() : nullptr);
            const auto rep_r = route::check(p, lg.wide.data(), p.bias ? bias.data() : nullptr, ref, got);
            if (!rep_r.result.ok) why = rep_r.result.first_difference;
          }
          if (why.empty()) {
            const std::vector<std::int64_t> wide(got.ids.begin(), got.ids.end());
            const CheckResult ca = align::check(ap, align::reference(ap, wide, {}), agot, false);
            if (!ca.ok) why = "align outputs: " + ca.first_difference;
          }
          test::expect_ok(what + " launch " + std::to_string(rep + 1), why);
          ++runs;
        }
      }
    }
  }
  MESSAGE(runs << " fused runs");
}

// --then-align as the CLI and the bench run it (route/then_align.hpp): every
// route variant, then align's auto pick on the ids it wrote (nothing after a
// variant that fuses align); route's outputs and the align outputs of its ids
// checked, bit for bit where the align variant is stable.
TEST_CASE("route --then-align: launch_then_align, every variant then align's auto pick") {
  const DeviceCaps& caps = device_caps();
  std::uint64_t seed = 9000;
  int runs = 0;
  for (const Config& c : {Config{8, 2}, Config{64, 8, 8, 4, true, true, 2.5f}, Config{256, 8, 8, 4, true, true, 2.5f},
                          Config{1024, 16}}) {
    std::vector<float> bias(c.E, 0.05f);
    for (std::int64_t T : {1, 77}) {
      for (int B : {1, 16}) {
        for (const route::Variant& v : route::registry().variants()) {
          Problem p = problem_of(c, T, route::DType::f32, route::Scoring::sigmoid);
          const align::Problem ap = route::plan_then_align(p, B);
          if (v.not_applicable(p, caps) != nullptr) continue;
          const align::Variant* av = route::fuses_align(v) ? nullptr : &align::registry().pick_auto(ap, caps, false);
          const Logits lg = make_logits(T, c.E, p.dtype, ++seed);
          std::optional<WorkspaceNeed> align_ws;
          if (av) align_ws = WorkspaceNeed::of(*av, ap, caps);
          route::DeviceBuffers d(p, {std::as_bytes(std::span(lg.raw)), bias}, WorkspaceNeed::of(v, p, caps),
                                 SetOptions::checked(), align_ws);
          d.poison();
          const std::string what = "variant " + std::string(v.info.name) + " then " +
                                   (av ? std::string(av->info.name) : std::string("(fused)")) + ", E=" +
                                   std::to_string(c.E) + " K=" + std::to_string(c.K) + " T=" + std::to_string(T) +
                                   " B=" + std::to_string(B);
          const route::Buffers b = d.buffers(0);
          std::string why = test::launch_and_sync(
              [&] { return route::launch_then_align(v, p, av, ap, b, d.align_workspace(), nullptr, false); });
          route::Outputs got;
          align::Outputs agot;
          if (why.empty()) why = d.download(got, &agot);
          if (why.empty()) {
            const route::Outputs ref = route::reference(p, lg.wide.data(), p.bias ? bias.data() : nullptr);
            const auto rep = route::check(p, lg.wide.data(), p.bias ? bias.data() : nullptr, ref, got);
            if (!rep.result.ok) why = rep.result.first_difference;
          }
          if (why.empty()) {
            const std::vector<std::int64_t> wide(got.ids.begin(), got.ids.end());
            const CheckResult ca = align::check(ap, align::reference(ap, wide, {}), agot, av && av->stable_order);
            if (!ca.ok) why = "align outputs: " + ca.first_difference;
          }
          test::expect_ok(what, why);
          ++runs;
        }
      }
    }
  }
  MESSAGE(runs << " route + align runs");
}

// Sigmoid + renormalize on logits of -1000: every chosen score is 0 in f32
// (and in the float64 reference), so the sum is 0. Every variant, the fused
// block-rank-align included, must leave the weights 0 (the sum is not > 0:
// divide by 1, docs/route.md "Weights"), never 0/0 = NaN, and pick the lower
// indices of the all-tied row (or the bias's best).
TEST_CASE("route: renormalized all-zero sigmoid scores give zero weights, not NaN") {
  const DeviceCaps& caps = device_caps();
  int runs = 0;
  for (const Config& c : {Config{8, 2, 1, 1, false, true}, Config{64, 8, 8, 4, true, true, 2.5f},
                          Config{256, 8, 8, 4, true, true, 2.5f}, Config{256, 32, 1, 1, false, true},
                          Config{4096, 64, 64, 8, true, true}}) {
    std::vector<float> bias(c.E);
    for (int e = 0; e < c.E; ++e) bias[e] = 0.001f * float((e * 37) % 11);
    for (std::int64_t T : {1, 77}) {
      for (route::DType dt : kDtypes) {
        for (const route::Variant& v : route::registry().variants()) {
          const Problem p = problem_for(v, c, T, dt, route::Scoring::sigmoid);
          if (v.not_applicable(p, caps) != nullptr) continue;
          Logits lg;
          const std::size_t n = std::size_t(T) * c.E, es = dt == route::DType::f32 ? 4 : 2;
          lg.wide.assign(n, -1000.0f);
          lg.raw.resize(n * es);
          for (std::size_t i = 0; i < n; ++i) (void)put_logit(lg, i, -1000.0f, dt);
          const route::DeviceBuffers d = device_run(p, lg, bias, WorkspaceNeed::of(v, p, caps));
          const std::string what = "variant " + std::string(v.info.name) + ", E=" + std::to_string(c.E) +
                                   " K=" + std::to_string(c.K) + (c.bias ? " bias" : "") + ", T=" +
                                   std::to_string(T) + ", " + name(dt) + ", logits -1000";
          std::string why = test::launch_and_sync([&] { return v.launch(p, d.buffers(0), nullptr, false); });
          if (why.empty()) {
            route::Outputs got;
            why = d.download(got);
            for (std::size_t i = 0; i < got.weights.size() && why.empty(); ++i)
              if (!(got.weights[i] == 0.0f))
                why = "topk_weights[" + std::to_string(i) + "] = " + std::to_string(got.weights[i]) + ", expected 0";
            if (why.empty()) {
              const route::Outputs ref = route::reference(p, lg.wide.data(), p.bias ? bias.data() : nullptr);
              const auto rep = route::check(p, lg.wide.data(), p.bias ? bias.data() : nullptr, ref, got);
              if (!rep.result.ok) why = rep.result.first_difference;
            }
          }
          test::expect_ok(what, why);
          ++runs;
        }
      }
    }
  }
  MESSAGE(runs << " runs on logits of -1000");
}

// Ties go to the lower index in every variant (docs/route.md), which the
// tolerance check above cannot see: rows of exactly equal logits, hand-listed
// with the ids they must give. Two equal maxima in different lanes of a
// few-lane token (warp-regs merges lane pairs at K <= 2), a tie for second
// place, a tie inside one lane, a row of all-equal logits.
TEST_CASE("route: exact ties go to the lower index, in pick order") {
  const DeviceCaps& caps = device_caps();
  struct TieCase {
    int E, K;
    std::vector<std::pair<int, float>> raised;  // (expert, logit) over a row of -1
    std::vector<int> ids;                       // the picks, best first
  };
  const TieCase cases[] = {
      {8, 2, {}, {0, 1}},                            // all equal
      {8, 2, {{5, 2.f}, {1, 2.f}}, {1, 5}},          // equal maxima, lanes 0 and 1
      {8, 2, {{6, 2.f}, {4, 1.f}, {2, 1.f}}, {6, 2}},  // a tie for second
      {8, 2, {{3, 2.f}, {2, 2.f}}, {2, 3}},          // a tie inside one lane
      {8, 1, {{7, 2.f}, {0, 2.f}}, {0}},
      {32, 2, {{30, 2.f}, {3, 2.f}}, {3, 30}},
      {32, 2, {{31, .5f}, {9, .5f}, {20, .5f}}, {9, 20}},
      {100, 2, {{93, 2.f}, {7, 2.f}}, {7, 93}},
      {100, 2, {{99, 2.f}, {50, 1.f}, {98, 1.f}}, {99, 50}},
  };
  int runs = 0;
  for (const TieCase& tc : cases)
    for (route::DType dt : {route::DType::f32, route::DType::bf16})
      for (route::Scoring sc : {route::Scoring::softmax, route::Scoring::sigmoid})
        for (const route::Variant& v : route::registry().variants()) {
          const std::int64_t T = 3;  // the same row three times: a warp of several tokens too
          const Problem p = problem_for(v, Config{tc.E, tc.K}, T, dt, sc);
          if (v.not_applicable(p, caps) != nullptr) continue;
          std::vector<float> row(tc.E, -1.f);
          for (const auto& [e, x] : tc.raised) row[e] = x;
          Logits lg;
          const std::size_t es = dt == route::DType::f32 ? 4 : 2;
          lg.raw.resize(std::size_t(T) * tc.E * es);
          for (std::int64_t t = 0; t < T; ++t)
            for (int e = 0; e < tc.E; ++e)  // -1, 0.5, 1, 2: exact in bf16
              lg.wide.push_back(put_logit(lg, std::size_t(t) * tc.E + e, row[e], dt));
          const std::vector<float> no_bias(tc.E, 0.f);
          const route::DeviceBuffers d = device_run(p, lg, no_bias, WorkspaceNeed::of(v, p, caps));
          std::string why = test::launch_and_sync([&] { return v.launch(p, d.buffers(0), nullptr, false); });
          if (why.empty()) {
            route::Outputs got;
            why = d.download(got);
            for (std::int64_t t = 0; t < T && why.empty(); ++t)
              for (int j = 0; j < tc.K && why.empty(); ++j)
                if (got.ids[std::size_t(t) * tc.K + j] != tc.ids[j])
                  why = "token " + std::to_string(t) + " pick " + std::to_string(j) + ": expert " +
                        std::to_string(got.ids[std::size_t(t) * tc.K + j]) + ", expected " + std::to_string(tc.ids[j]);
          }
          test::expect_ok("variant " + std::string(v.info.name) + ", E=" + std::to_string(tc.E) + " K=" +
                              std::to_string(tc.K) + ", " + name(dt) +
                              (sc == route::Scoring::softmax ? " softmax" : " sigmoid") + ", tie case " +
                              std::to_string(&tc - cases),
                          why);
          ++runs;
        }
  MESSAGE(runs << " tie runs");
}
