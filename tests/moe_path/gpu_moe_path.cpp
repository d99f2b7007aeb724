// GPU test: every moe-path variant against the path's checker (route's
// checker, permute's rules, combine bit for bit on the run's own rows, the
// identity formula) over routers shaped like DeepSeek-V3, Qwen3 and Mixtral
// and given ids, T {0, 1, 3, 77, 1000} x H {7, 1030, 7168} x dtype x layout,
// PDL on and off. Each case runs three ways: the variant's launch, the same
// launch captured into a CUDA graph and replayed (it must be one capturable
// stream of launches), and its stages launched one by one (per-stage timing
// relies on that). Outputs are poisoned between guard zones before each.
//
// With the expert FFN (--experts ffn): the path's checker (route, permute,
// combine bit for bit on the run's own y rows, the FFN's y on a sample of
// tokens against the experts reference) over the same routers, T {0, 1, 24, 37,
// 300}, bf16 and f16, both layouts, silu / gelu / swiglu-oai (interleaved W1),
// weights generated on the device or uploaded, PDL on and off.
//
// MOEKIT_GPU_SUBSET=sanitizer runs T <= 77 and H <= 1030 only.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "cuda_util.hpp"
#include "gpu_case.hpp"
#include "half.hpp"
#include "moe_path/buffers.hpp"
#include "moe_path/reference.hpp"
#include "timing.hpp"

using namespace moekit;
using permute::Layout;

namespace {

struct Router {
  const char* name;
  std::int32_t E, K, G, KG;
  route::Scoring scoring;
  bool bias, renormalize, routed;
};
const Router kRouters[] = {
    {"deepseek-v3", 256, 8, 8, 4, route::Scoring::sigmoid, true, true, true},
    {"qwen3", 128, 8, 1, 1, route::Scoring::softmax, false, true, true},
    {"mixtral", 8, 2, 1, 1, route::Scoring::softmax, false, true, true},
    {"given ids", 64, 6, 1, 1, route::Scoring::softmax, false, false, false},
};
// The route problem of a row (its scoring and grouping; the sizes come from make_problem).
route::Problem router_of(const Router& r) {
  route::Problem router;
  router.groups = r.G;
  router.topk_groups = r.KG;
  router.scoring = r.scoring;
  router.bias = r.bias;
  router.renormalize = r.renormalize;
  return router;
}
const std::int64_t kTokens[] = {0, 1, 3, 77, 1000};
const std::int64_t kHidden[] = {7, 1030, 7168};

struct Host {
  std::vector<float> logits, bias, weights;  // weights: given (not routed)
  std::vector<std::int32_t> ids;             // given (not routed)
  std::vector<std::byte> hidden;
  std::vector<std::uint16_t> w1, w2;         // ffn: given expert weights (empty: generated from wseed)
  std::uint64_t wseed = 0;
};

// The case's host inputs as the reference and the checker read them.
moe_path::Inputs inputs(const Host& h) {
  moe_path::Inputs in;
  in.logits = h.logits.data();
  in.bias = h.bias.empty() ? nullptr : h.bias.data();
  in.hidden = h.hidden.data();
  in.ids = h.ids;
  in.weights = h.weights;
  in.w = experts::WeightSource::of(h.w1, h.w2, h.wseed);
  in.sample_seed = h.wseed;
  return in;
}

// The case's device buffers: outputs between guard zones, a garbage workspace.
moe_path::DeviceBuffers upload(const moe_path::Problem& p, const Host& h, const moe_path::Variant& v) {
  const moe_path::HostInputs in{std::as_bytes(std::span(h.logits)), h.bias, h.hidden, h.ids, h.weights};
  const moe_path::HostWeights w{std::as_bytes(std::span(h.w1)), std::as_bytes(std::span(h.w2)), h.wseed};
  return moe_path::DeviceBuffers(p, in, WorkspaceNeed::of(v, p, device_caps()), SetOptions::checked(), w);
}

Host make_inputs(const Router& r, std::int64_t T, std::int64_t H, combine::DType dt, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  Host h;
  if (r.routed) {
    h.logits.resize(std::size_t(T) * r.E);
    for (float& x : h.logits) x = nd(rng);
    if (r.bias) {
      h.bias.resize(std::size_t(r.E));
      for (float& x : h.bias) x = 0.1f * nd(rng);
    }
  } else {
    for (std::int64_t t = 0; t < T; ++t) {  // distinct experts per token
      std::vector<std::int32_t> pick;
      while (std::int32_t(pick.size()) < r.K) {
        const auto e = static_cast<std::int32_t>(rng() % std::uint64_t(r.E));
        if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
      }
      h.ids.insert(h.ids.end(), pick.begin(), pick.end());
      for (int j = 0; j < r.K; ++j) h.weights.push_back(static_cast<float>(rng() % 1000) / 999.0f);
    }
  }
  const std::size_t es = dt == combine::DType::f32 ? 4 : 2;
  h.hidden.resize(std::size_t(T * H) * es);
  for (std::int64_t i = 0; i < T * H; ++i) {
    const float x = nd(rng);
    if (es == 4) std::memcpy(h.hidden.data() + i * 4, &x, 4);
    else {
      const std::uint16_t b = dt == combine::DType::bf16 ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
      std::memcpy(h.hidden.data() + i * 2, &b, 2);
    }
  }
  return h;
}

// The outputs checked after `run` (which launches on the default stream or
// replays a graph, and returns its status).
template <class Run>
std::string check_after(const moe_path::Problem& p, const Host& h, moe_path::DeviceBuffers& d,
                        const moe_path::Outputs& ref, const Run& run, int times = 1) {
  d.poison();
  if (std::string e = test::launch_and_sync(run, times); !e.empty()) return e;
  moe_path::Outputs got;
  if (std::string e = d.download(got); !e.empty()) return e;
  const moe_path::CheckReport rep = moe_path::check(p, inputs(h), ref, got);
  return rep.result.ok ? std::string() : rep.result.first_difference;
}

// Every launch below with PDL when `pdl` (every stage).
std::string run_case(const moe_path::Variant& v, const moe_path::Problem& p, const Host& h, bool pdl) {
  const DeviceCaps& caps = device_caps();
  if (v.not_applicable(p, caps) != nullptr) return {};
  // With the FFN, check() computes it on a sample with the run's own ids.
  const moe_path::Outputs ref = moe_path::reference(p, inputs(h), false);
  moe_path::DeviceBuffers d = upload(p, h, v);
  const moe_path::Buffers b = d.buffers(0);
  // 1. the variant's launch (with PDL twice back to back: the second overlaps the first's tail)
  std::string why = check_after(p, h, d, ref, [&] { return v.launch(p, b, nullptr, pdl); }, pdl ? 2 : 1);
  if (!why.empty()) return "launch: " + why;
  // 2. captured into a graph and replayed (what the CLI times)
  why = check_after(p, h, d, ref, [&] {
    int first = 0;
    TimingOptions t;
    t.warmup = 1;
    t.samples = 2;
    t.launches_per_graph = 2;
    (void)time_launches(
        [&](Stream s, int) {
          const int e = v.launch(p, b, s, pdl);
          if (first == 0) first = e;
        },
        1, t);
    return first;
  });
  if (!why.empty()) return "graph replay: " + why;
  // 3. stage by stage
  why = check_after(p, h, d, ref, [&] {
    for (moe_path::Stage s : moe_path::stages(p))
      if (const int e = moe_path::launch_stage(p, b, s, nullptr, pdl); e != 0) return e;
    return 0;
  });
  if (!why.empty()) return "stage by stage: " + why;
  if (needs_zeroed_workspace(v, p, caps) && !d.workspace_zero()) return "left its zeroed workspace non-zero";
  return {};
}

}  // namespace

TEST_CASE("moe-path: every variant against the path's checker, launched, replayed and stage by stage") {
  const bool subset = test::sanitizer_subset();
  const DeviceCaps& caps = device_caps();
  std::uint64_t seed = 15;
  int runs = 0;
  for (const Router& r : kRouters)
    for (std::int64_t T : kTokens)
      for (std::int64_t H : kHidden) {
        if (subset && (T > 77 || H > 1030)) continue;
        if (T * r.K * H > (std::int64_t(1) << 25)) continue;
        ++seed;
        std::mt19937_64 rng(seed);
        const combine::DType dt = seed % 3 == 0 ? combine::DType::f32
                                  : seed % 3 == 1 ? combine::DType::bf16 : combine::DType::f16;
        const Host h = make_inputs(r, T, H, dt, rng);
        const route::Problem router = router_of(r);
        for (Layout layout : {Layout::padded, Layout::compact}) {
          const int B = (seed & 2) ? 16 : 64;
          const float S = (seed & 4) ? 2.5f : 1.0f;
          moe_path::Problem p = moe_path::make_problem(T, r.K, r.E, H, dt, layout, B, S, r.routed ? &router : nullptr);
          const bool pdl = caps.pdl && (seed & 1);  // every stage with PDL, every other case
          for (const moe_path::Variant& v : moe_path::registry().variants()) {
            const std::string what =
                "variant " + std::string(v.info.name) + ", " + r.name + " T=" + std::to_string(T) + " H=" +
                std::to_string(H) + " dtype " + std::to_string(int(dt)) + ", " +
                (layout == Layout::padded ? "padded B=" + std::to_string(B) : std::string("compact")) + ", S " +
                std::to_string(S) + (pdl ? ", PDL" : "") + ", seed " + std::to_string(seed);
            test::expect_ok(what, run_case(v, p, h, pdl));
            ++runs;
          }
        }
      }
  MESSAGE(runs << " runs");
}

TEST_CASE("moe-path --experts ffn: every variant against the path's checker, launched, replayed and stage by stage") {
  const bool subset = test::sanitizer_subset();
  const DeviceCaps& caps = device_caps();
  std::uint64_t seed = 1500;
  int runs = 0;
  // 24: 192 slots at one row group (DeepSeek-like, Qwen-like, given ids), fused
  // on parts like the H100 (experts' auto past 32 slots).
  const std::int64_t kFfnTokens[] = {0, 1, 24, 37, 300};
  struct Shape {
    std::int64_t H, I;
  };
  const Shape kShapes[] = {{40, 24}, {1030, 200}};
  for (const Router& r : kRouters)
    for (std::int64_t T : kFfnTokens)
      for (const Shape& sh : kShapes) {
        if (subset && (T > 77 || sh.H > 1030)) continue;
        ++seed;
        std::mt19937_64 rng(seed);
        const combine::DType dt = seed % 2 == 0 ? combine::DType::bf16 : combine::DType::f16;
        Host h = make_inputs(r, T, sh.H, dt, rng);
        h.wseed = seed;
        const int acts = int(seed / 2 % 3);  // silu, gelu, swiglu-oai (interleaved W1)
        moe_path::FfnArgs f{sh.I, acts == 0 ? experts::Act::silu : acts == 1 ? experts::Act::gelu : experts::Act::swiglu_oai,
                            acts == 2 || (seed & 8) ? experts::W1Layout::interleaved : experts::W1Layout::gate_up};
        if ((seed & 4) && r.E * 3 * sh.I * sh.H <= (std::int64_t(1) << 24)) {  // uploaded weights, small ones
          std::normal_distribution<double> nd(0.0, 1.0);
          auto fill = [&](std::vector<std::uint16_t>& w, std::size_t n, double scale) {
            w.resize(n);
            for (auto& b : w)
              b = dt == combine::DType::bf16 ? f64_to_bf16_bits(scale * nd(rng)) : f64_to_f16_bits(scale * nd(rng));
          };
          fill(h.w1, std::size_t(r.E) * std::size_t(2 * sh.I * sh.H), 1.0 / std::sqrt(double(sh.H)));
          fill(h.w2, std::size_t(r.E) * std::size_t(sh.H * sh.I), 1.0 / std::sqrt(double(sh.I)));
        }
        const route::Problem router = router_of(r);
        for (Layout layout : {Layout::padded, Layout::compact}) {
          const int B = (seed & 2) ? 16 : 64;
          const float S = (seed & 4) ? 2.5f : 1.0f;
          const moe_path::Problem p =
              moe_path::make_problem(T, r.K, r.E, sh.H, dt, layout, B, S, r.routed ? &router : nullptr, &f);
          const bool pdl = caps.pdl && (seed & 1);
          for (const moe_path::Variant& v : moe_path::registry().variants()) {
            const std::string what =
                "variant " + std::string(v.info.name) + " with the FFN (" +
                std::string(moe_path::stage_variant(p, moe_path::Stage::ffn, caps)) + "), " + r.name +
                " T=" + std::to_string(T) + " H=" + std::to_string(sh.H) + " I=" + std::to_string(sh.I) + " act " +
                std::to_string(acts) + (f.w1_layout == experts::W1Layout::interleaved ? " interleaved" : "") +
                (h.w1.empty() ? " generated" : " uploaded") + " weights, dtype " + std::to_string(int(dt)) + ", " +
                (layout == Layout::padded ? "padded B=" + std::to_string(B) : std::string("compact")) + ", S " +
                std::to_string(S) + (pdl ? ", PDL" : "") + ", seed " + std::to_string(seed);
            test::expect_ok(what, run_case(v, p, h, pdl));
            ++runs;
          }
        }
      }
  MESSAGE(runs << " runs");
}
