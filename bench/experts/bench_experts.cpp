// Benchmark of the experts family: one JSON record per (model, PDL mode,
// tokens, variant) cell (bench/common/record.hpp); bench/experts/render.py
// turns them into docs/bench/experts.md.
//
//   bench_experts [--quick] [--models LIST] --json bench/results/experts.jsonl
//   (make bench runs all; stdout without --json; --models splits a run, e.g.
//   under a time limit per command: the files' lines concatenate)
//
// Models (issue 32's table): Mixtral (E 8, K 2, H 4096, I 14336), Qwen3-235B
// (128, 8, 4096, 1536), DeepSeek-V3's TP8 expert shard (256, 8, 7168, 256)
// and DeepSeek-V3 (256, 8, 7168, 2048; 22 GB of weights), bf16, silu, gate/up
// W1; T {1, 4, 16, 64, 256, 1024, 4096, 16384} (--quick: {1, 64, 1024}), PDL
// off and on. Each model's weights are generated on the device once
// (experts::generate_weights) and shared by all its cells; routing is K
// distinct uniform experts per token with weights summing to 1, hidden rows
// standard normal, both seeded per (model, T). Each variant runs on the
// compact layout, or where it refuses that, the padded one at B 64, then B 16
// (params "layout" and, padded, "B"; extra "refused_compact" says why).
//
// A cell is timed as the other benches (median µs per launch, CUDA-graph
// replay; events where the launch cannot be captured), with fewer samples
// and launches per graph as the launch gets longer (about half a second of
// timing per cell). Time rule: once a (variant, model, PDL mode)'s launch
// takes over 50 ms (the second of a cell, timed on the host), its larger T
// are not run (n/a, "skipped by the bench"): naive past T 256 or so at
// DeepSeek-V3's sizes.
// Each stage is also timed alone (stage_us: layout, ffn, combine).
//
// Extra fields: bytes_moved (experts::bytes_moved: the active experts'
// weights read once, rows read and written), active_experts, weight_tbps
// (active weight bytes / median time, TB/s), tflops (experts::flops / median
// time), checked_tokens and what `auto` picks (auto_pick). Check: every
// cell's out against the CPU reference on a seeded sample of tokens
// (experts::sample_tokens, one reference per (model, T) shared by its
// cells); a mismatch makes the cell "fail". Not a test.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cell.hpp"
#include "cuda_util.hpp"
#include "experts/buffers.hpp"
#include "experts/experts.hpp"
#include "experts/reference.hpp"
#include "record.hpp"
#include "rows_gen.hpp"
#include "timing.hpp"

using namespace moekit;
using experts::DType;

namespace {

struct Model {
  const char* key;   // the CLI's --model name
  const char* name;  // the table's
  std::int32_t E, K;
  std::int64_t H, I;
  float scaling;
};

const Model kModels[] = {
    {"mixtral", "Mixtral", 8, 2, 4096, 14336, 1.0f},
    {"qwen3-235b", "Qwen3-235B", 128, 8, 4096, 1536, 1.0f},
    {"deepseek-v3-tp8", "DeepSeek-V3 TP8 shard", 256, 8, 7168, 256, 2.5f},
    {"deepseek-v3", "DeepSeek-V3", 256, 8, 7168, 2048, 2.5f},
};
const std::vector<std::int64_t> kTokens = {1, 4, 16, 64, 256, 1024, 4096, 16384};
const std::vector<std::int64_t> kQuickTokens = {1, 64, 1024};

constexpr double kSkipAfterMs = 50.0;       // the time rule (see the top)
constexpr double kCellTimingS = 0.5;        // about this long timing one cell
constexpr double kStageTimingS = 0.2;       // and each of its stages
constexpr double kReferenceMacs = 1.5e9;    // the reference's tokens per (model, T)
constexpr std::uint64_t kWeightSeed = 32;   // every model's generated weights

struct LayoutChoice {
  permute::Layout layout;
  std::int32_t B;
  const char* name;
};
constexpr LayoutChoice kLayouts[] = {
    {permute::Layout::compact, 64, "compact"}, {permute::Layout::padded, 64, "padded"}, {permute::Layout::padded, 16, "padded"}};

experts::Problem problem(const Model& m, std::int64_t T, const LayoutChoice& l) {
  return experts::make_problem(T, m.K, m.E, m.H, m.I, DType::bf16, experts::Act::silu, experts::W1Layout::gate_up,
                               l.layout, l.B, m.scaling);
}

// Host inputs of one (model, T): K distinct uniform experts per token,
// weights summing to 1, standard-normal bf16 hidden rows.
struct Inputs {
  npy::Array hidden;
  std::vector<std::int32_t> ids;
  std::vector<float> weights;
  std::int64_t active = 0;  // experts with at least one slot
};
Inputs make_inputs(const Model& m, std::int64_t T, std::uint64_t seed) {
  Inputs in;
  in.hidden = gen::normal_rows(T, m.H, npy::DType::bf16, seed, "hidden rows");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  std::vector<std::int32_t> perm(std::size_t(m.E));
  std::vector<char> used(std::size_t(m.E), 0);
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int32_t e = 0; e < m.E; ++e) perm[std::size_t(e)] = e;
    float sum = 0;
    const std::size_t at = in.weights.size();
    for (std::int32_t j = 0; j < m.K; ++j) {  // a partial Fisher-Yates draw
      const auto k = j + static_cast<std::int32_t>(rng() % std::uint64_t(m.E - j));
      std::swap(perm[std::size_t(j)], perm[std::size_t(k)]);
      in.ids.push_back(perm[std::size_t(j)]);
      used[std::size_t(perm[std::size_t(j)])] = 1;
      in.weights.push_back(u(rng));
      sum += in.weights.back();
    }
    for (std::size_t i = at; i < in.weights.size(); ++i) in.weights[i] /= sum;
  }
  in.active = std::count(used.begin(), used.end(), 1);
  return in;
}

// Timing options for a launch of about `launch_ms`: all of TimingOptions' defaults
// for short launches, fewer launches per graph and samples for long ones, so
// that a cell takes about `budget_s`.
TimingOptions timing_for(double launch_ms, double budget_s) {
  TimingOptions o;
  const double us = std::max(launch_ms * 1000.0, 1.0);
  o.launches_per_graph = static_cast<int>(std::clamp(20000.0 / us, 1.0, double(o.launches_per_graph)));
  o.samples = static_cast<int>(std::clamp(budget_s * 1e6 / (us * o.launches_per_graph), 10.0, double(o.samples)));
  o.warmup = static_cast<int>(std::clamp(0.1 * budget_s * 1e6 / us, 2.0, double(o.warmup)));
  return o;
}

// bench::measure with graph replay, and with events where the launch cannot
// be captured (a variant that reads counts on the host).
template <class Launch>
bench::Measurement measure(const Launch& launch, int copies, TimingOptions o, double bytes = 0) {
  bench::Measurement m = bench::measure(launch, copies, o, bytes);
  if (m.status == "error") {  // the capture's error is cleared by the harness
    o.graph = false;
    bench::Measurement e = bench::measure(launch, copies, o, bytes);
    if (e.status == "ok") return e;
  }
  return m;
}

struct Reference {
  std::vector<std::int64_t> tokens;
  experts::Outputs out;
};

// Every variant at one (model, T), PDL off and on. `slow`: (variant, PDL)
// pairs the time rule has stopped, with the T that stopped them.
void measure_cells(bench::Writer& out, const Model& m, std::int64_t T, std::uint64_t seed, const void* w1,
                   const void* w2, std::map<std::pair<std::string, bool>, std::string>& slow) {
  const DeviceCaps& caps = device_caps();
  const Inputs in = make_inputs(m, T, seed);
  std::optional<Reference> ref;  // made by the first cell that needs it
  const int copies = rotation_copies(in.hidden.data.size(), false);

  for (bool pdl : {false, true}) {
    const bool use_pdl = pdl && caps.pdl;
    std::string auto_pick;
    try {
      auto_pick = experts::registry().pick_auto(problem(m, T, kLayouts[0]), caps, use_pdl).info.name;
    } catch (const std::exception&) {
      // no auto row takes the shape: the column stays empty
    }
    for (const experts::Variant& v : experts::registry().variants()) {
      // The first layout the variant takes.
      const LayoutChoice* lc = nullptr;
      const char* refusal = nullptr;
      for (const LayoutChoice& l : kLayouts) {
        const char* why = v.not_applicable(problem(m, T, l), caps);
        if (why == nullptr) {
          lc = &l;
          break;
        }
        if (refusal == nullptr) refusal = why;
      }
      const experts::Problem p = problem(m, T, lc != nullptr ? *lc : kLayouts[0]);
      bench::Record rec;
      rec.table = fmt::format("{} (E {}, K {}, H {}, I {}), PDL {}", m.name, m.E, m.K, m.H, m.I, pdl ? "on" : "off");
      rec.variant = std::string(v.info.name);
      rec.params = {{"model", m.key}, {"tokens", T}, {"E", m.E}, {"K", m.K}, {"H", m.H}, {"I", m.I},
                    {"layout", lc != nullptr ? lc->name : "compact"}};
      if (lc != nullptr && lc->layout == permute::Layout::padded) rec.params.push_back({"B", lc->B});
      rec.params.insert(rec.params.end(), {{"scaling", double(m.scaling)}, {"dtype", "bf16"}, {"act", "silu"}});
      rec.dtype = "bfloat16";
      rec.pdl = use_pdl ? "on" : "off";
      if (!auto_pick.empty()) rec.extra.push_back({"auto_pick", auto_pick});
      const auto stopped = slow.find({rec.variant, pdl});
      std::string skip_reason;
      if (lc != nullptr && stopped != slow.end())
        skip_reason = fmt::format("skipped by the bench: its launch took over {:g} ms at {}", kSkipAfterMs,
                                  stopped->second);
      const char* na = lc == nullptr ? refusal : (skip_reason.empty() ? nullptr : skip_reason.c_str());
      bench::write_cell(out, std::move(rec), na, [&](bench::Record& r) {
        experts::HostInputs hi;
        hi.hidden = in.hidden.data;
        hi.ids = in.ids;
        hi.weights = in.weights;
        hi.device_w1 = w1;
        hi.device_w2 = w2;
        experts::DeviceBuffers d(p, hi, WorkspaceNeed::of(v, p, caps), SetOptions::run(copies));
        std::vector<experts::Buffers> bufs;
        for (int k = 0; k < copies; ++k) bufs.push_back(d.buffers(k));
        auto launch = [&](Stream s, int copy) { cuda_check(v.launch(p, bufs[copy], s, use_pdl), "experts launch"); };
        bench::launch_once(launch);
        // The check, against the reference of this (model, T).
        std::vector<std::uint16_t> got;
        std::string why = d.download(got);
        if (!ref) {
          experts::Inputs ri;
          ri.hidden = in.hidden.as<std::uint16_t>();
          ri.ids = in.ids;
          ri.weights = in.weights;
          ri.w.generated = true;
          ri.w.seed = kWeightSeed;
          Reference rf;
          rf.tokens = experts::sample_tokens(p, kReferenceMacs, seed);
          rf.out = experts::reference(p, ri, rf.tokens);
          ref = std::move(rf);
        }
        if (why.empty())
          if (const CheckResult c = experts::check(p, ref->out, got); !c.ok) why = c.first_difference;
        // A second launch, timed on the host, for the time rule and the
        // timing options (the first one may load modules or a library's handle).
        const auto t0 = std::chrono::steady_clock::now();
        bench::launch_once(launch);
        const double launch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (launch_ms > kSkipAfterMs) slow[{std::string(v.info.name), pdl}] = fmt::format("T {}", T);
        r.extra.push_back({"checked_tokens", std::int64_t(ref->tokens.size())});
        if (lc->layout == permute::Layout::padded) r.extra.push_back({"refused_compact", refusal != nullptr ? refusal : ""});
        const std::int64_t kept = T * m.K;
        const double bytes = experts::bytes_moved(p, in.active, kept);
        r.m = measure(launch, copies, timing_for(launch_ms, kCellTimingS), bytes);
        if (r.m.stats && r.m.stats->median_us > 0) {
          const double s = r.m.stats->median_us * 1e-6;
          const double wbytes = double(in.active) * 3.0 * double(m.H) * double(m.I) * 2.0;
          r.extra.push_back({"bytes_moved", bytes});
          r.extra.push_back({"active_experts", in.active});
          r.extra.push_back({"weight_tbps", wbytes / s * 1e-12});
          r.extra.push_back({"tflops", experts::flops(p, kept) / s * 1e-12});
        }
        // Each stage alone, as its own graph (stage_us).
        for (experts::Stage st : experts::stages(v)) {
          auto stage = [&](Stream s, int copy) {
            cuda_check(experts::launch_stage(v, p, bufs[copy], st, s, use_pdl), "stage launch");
          };
          const bench::Measurement sm = measure(stage, copies, timing_for(launch_ms, kStageTimingS));
          if (sm.stats) r.stages.emplace_back(std::string(experts::stage_name(st)), *sm.stats);
        }
        return why;
      });
    }
  }
}

constexpr const char* kUsage =
    "bench_experts [--quick] [--models LIST] [--json FILE]: every experts variant x model x T\n"
    "  --quick        T 1, 64, 1024 only\n"
    "  --models LIST  comma-separated, of mixtral, qwen3-235b, deepseek-v3-tp8, deepseek-v3 (default: all;\n"
    "                 a model's cells and seeds are the same whichever others run)\n";

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<std::string> models;
  int w = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--quick") {
      quick = true;
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--models" && i + 1 < argc) {
      std::string_view list = argv[++i];
      while (!list.empty()) {
        const std::size_t c = list.find(',');
        models.emplace_back(list.substr(0, c));
        list = c == std::string_view::npos ? std::string_view() : list.substr(c + 1);
      }
      for (const std::string& name : models)
        if (std::none_of(std::begin(kModels), std::end(kModels), [&](const Model& m) { return name == m.key; })) {
          std::fprintf(stderr, "bench_experts: unknown model '%s'\n%s", name.c_str(), kUsage);
          return 2;
        }
    } else if (a == "--json" && i + 1 < argc) {
      argv[w++] = argv[i++];
      argv[w++] = argv[i];
    } else if (a.starts_with("--json=")) {
      argv[w++] = argv[i];
    } else {
      std::fprintf(stderr, "bench_experts: unknown argument '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  argc = w;
  return bench::run_bench(argc, argv, "experts", [&](bench::Writer& out) {
    std::uint64_t seed = 1;
    for (const Model& m : kModels) {
      seed += 100;  // a model's seeds do not depend on which models run
      if (!models.empty() && std::find(models.begin(), models.end(), m.key) == models.end()) continue;
      // The model's weights, once: [E, 2I, H] and [E, H, I] bf16.
      const experts::Problem shape = problem(m, 1, kLayouts[0]);
      DeviceBuffer w1(shape.w1_elements() * 2), w2(shape.w2_elements() * 2);
      cuda_check(experts::generate_weights(shape, kWeightSeed, w1.get(), w2.get(), process_stream()),
                 "generating the expert weights");
      cuda_sync("generating the expert weights");
      std::fprintf(stderr, "bench_experts: %s, %.1f GB of weights\n", m.name,
                   double(shape.w1_elements() + shape.w2_elements()) * 2e-9);
      std::map<std::pair<std::string, bool>, std::string> slow;
      std::uint64_t cell_seed = seed;
      for (std::int64_t t : quick ? kQuickTokens : kTokens) measure_cells(out, m, t, ++cell_seed, w1.get(), w2.get(), slow);
    }
  });
}
