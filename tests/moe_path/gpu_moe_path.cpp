// GPU test: every moe-path variant against the path's checker (route's
// checker, permute's rules, combine bit for bit on the run's own rows, the
// identity formula) over routers shaped like DeepSeek-V3, Qwen3 and Mixtral
// and given ids, T {0, 1, 3, 77, 1000} x H {7, 1030, 7168} x dtype x layout,
// PDL on and off. Each case runs three ways: the variant's launch, the same
// launch captured into a CUDA graph and replayed (it must be one capturable
// stream of launches), and its stages launched one by one (per-stage timing
// relies on that). Outputs are poisoned between guard zones before each.
//
// MOEKIT_GPU_SUBSET=sanitizer runs T <= 77 and H <= 1030 only.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "cuda_util.hpp"
#include "gpu_case.hpp"
#include "half.hpp"
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
const std::int64_t kTokens[] = {0, 1, 3, 77, 1000};
const std::int64_t kHidden[] = {7, 1030, 7168};

struct Host {
  std::vector<float> logits, bias, weights;  // weights: given (not routed)
  std::vector<std::int32_t> ids;             // given (not routed)
  std::vector<std::byte> hidden;
};

std::size_t slots(const moe_path::Problem& p) { return std::size_t(p.permute.align.numel); }
std::size_t out_bytes(const moe_path::Problem& p) {
  return std::size_t(p.combine.tokens * p.combine.hidden) * (p.combine.dtype == combine::DType::f32 ? 4 : 2);
}

// Device buffers of one case: inputs uploaded, outputs between guard zones.
struct Device {
  Device(const moe_path::Problem& p, const Host& h, const moe_path::Variant& v)
      : logits(h.logits.data(), h.logits.size() * 4),
        bias(h.bias.data(), h.bias.size() * 4),
        hidden(h.hidden.data(), h.hidden.size()),
        ids_in(h.ids.data(), h.ids.size() * 4),
        w_in(h.weights.data(), h.weights.size() * 4),
        ids(slots(p) * 4),
        w(slots(p) * 4),
        perm(std::size_t(p.permute.align.max_num_tokens_padded) * std::size_t(p.permute.row_bytes)),
        inv(slots(p) * 4),
        sorted(std::size_t(p.permute.align.max_num_tokens_padded) * 4),
        eids(std::size_t(p.permute.align.max_num_blocks) * 4),
        ntpp(4),
        off((std::size_t(p.permute.align.num_experts) + 1) * 8),
        out(out_bytes(p)),
        ws(v.workspace_bytes(p, device_caps()), needs_zeroed_workspace(v, p, device_caps())),
        routed(p.routed),
        has_bias(!h.bias.empty()) {}

  void poison() {
    for (test::Guarded* g : {&ids, &w, &perm, &inv, &sorted, &eids, &ntpp, &off, &out}) g->poison();
  }

  moe_path::Buffers buffers() const {
    moe_path::Buffers b;
    b.logits = routed ? logits.data() : nullptr;
    b.bias = has_bias ? bias.as<float>() : nullptr;
    b.hidden = hidden.data();
    // Given ids and weights are read only; the Buffers type is route's output's.
    b.topk_ids = routed ? ids.as<std::int32_t>() : const_cast<std::int32_t*>(ids_in.as<std::int32_t>());
    b.topk_weights = routed ? w.as<float>() : const_cast<float*>(w_in.as<float>());
    b.permuted = perm.data();
    b.inverse = inv.as<std::int32_t>();
    b.sorted_token_ids = sorted.as<std::int32_t>();
    b.expert_ids = eids.as<std::int32_t>();
    b.num_tokens_post_pad = ntpp.as<std::int32_t>();
    b.expert_offsets = off.as<std::int64_t>();
    b.out = out.data();
    b.workspace = ws.get();
    return b;
  }

  // The outputs downloaded into got, or why they could not be.
  std::string read(const moe_path::Problem& p, const Host& h, moe_path::Outputs& got) const {
    const auto ri = ids.read(), rw = w.read(), rp = perm.read(), rv = inv.read(), rs = sorted.read(),
               re = eids.read(), rn = ntpp.read(), ro = off.read(), rout = out.read();
    for (const auto* r : {&ri, &rw, &rp, &rv, &rs, &re, &rn, &ro, &rout})
      if (!r->guard_ok) return "wrote outside its outputs (guard zone changed)";
    if (routed) {
      got.routed.ids = ri.body_as<std::int32_t>();
      got.routed.weights = rw.body_as<float>();
    } else {
      got.routed.ids = h.ids;
      got.routed.weights = h.weights;
    }
    auto& a = got.permuted.aligned;
    a.num_tokens_post_pad = rn.body_as<std::int32_t>()[0];
    a.sorted_token_ids = rs.body_as<std::int32_t>();
    a.expert_ids = re.body_as<std::int32_t>();
    if (a.num_tokens_post_pad < 0 || a.num_tokens_post_pad > p.permute.align.max_num_tokens_padded)
      return "num_tokens_post_pad out of range";
    got.permuted.permuted.resize(std::size_t(a.num_tokens_post_pad) * std::size_t(p.permute.row_bytes));
    std::memcpy(got.permuted.permuted.data(), rp.body(), got.permuted.permuted.size());
    got.permuted.inverse = rv.body_as<std::int32_t>();
    if (p.permute.layout == Layout::compact) got.permuted.offsets = ro.body_as<std::int64_t>();
    got.out.resize(rout.bytes);
    std::memcpy(got.out.data(), rout.body(), rout.bytes);
    return {};
  }

  test::Uploaded logits, bias, hidden, ids_in, w_in;
  test::Guarded ids, w, perm, inv, sorted, eids, ntpp, off, out;
  test::Workspace ws;
  bool routed, has_bias;
};

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
std::string check_after(const moe_path::Problem& p, const Host& h, Device& d, const moe_path::Outputs& ref,
                        const Run& run, int times = 1) {
  d.poison();
  if (std::string e = test::launch_and_sync(run, times); !e.empty()) return e;
  moe_path::Outputs got;
  if (std::string e = d.read(p, h, got); !e.empty()) return e;
  moe_path::Inputs in;
  in.logits = h.logits.data();
  in.bias = h.bias.empty() ? nullptr : h.bias.data();
  in.hidden = h.hidden.data();
  in.ids = h.ids;
  in.weights = h.weights;
  const moe_path::CheckReport rep = moe_path::check(p, in, ref, got);
  return rep.result.ok ? std::string() : rep.result.first_difference;
}

// Every launch below with PDL when `pdl` (every stage).
std::string run_case(const moe_path::Variant& v, const moe_path::Problem& p, const Host& h, bool pdl) {
  const DeviceCaps& caps = device_caps();
  if (v.not_applicable(p, caps) != nullptr) return {};
  moe_path::Inputs in;
  in.logits = h.logits.data();
  in.bias = h.bias.empty() ? nullptr : h.bias.data();
  in.hidden = h.hidden.data();
  in.ids = h.ids;
  in.weights = h.weights;
  const moe_path::Outputs ref = moe_path::reference(p, in);
  Device d(p, h, v);
  const moe_path::Buffers b = d.buffers();
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
  if (needs_zeroed_workspace(v, p, caps) && !d.ws.all_zero()) return "left its zeroed workspace non-zero";
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
        route::Problem router;
        router.groups = r.G;
        router.topk_groups = r.KG;
        router.scoring = r.scoring;
        router.bias = r.bias;
        router.renormalize = r.renormalize;
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
