// Benchmark of the route family: one JSON record per (config, PDL mode,
// tokens, variant) cell (bench/common/record.hpp); bench/render.py turns them
// into docs/bench/route.md.
//
//   bench_route --json bench/results/route.jsonl   (make bench; stdout without --json)
//
// Configs: the routers of DeepSeek-V3, Qwen3, Mixtral and Llama-4, plus one
// large-E row. Median microseconds per launch (CUDA-graph replay), GB/s
// counting logits (and bias) read once and ids + weights written once. Inputs
// are standard-normal f32 logits (bf16 for one config; `moekit gen route`'s generator), rotated through copies
// so the rotation exceeds L2. Each cell's output is checked in full against
// the CPU reference; a mismatch makes its status "fail". The route+align rows
// time route followed by align (auto) in one graph. Not a test.
#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "align/align.hpp"
#include "cuda_util.hpp"
#include "record.hpp"
#include "route/buffers.hpp"
#include "route/gen.hpp"
#include "route/reference.hpp"
#include "route/route.hpp"
#include "route/then_align.hpp"
#include "timing.hpp"

using namespace moekit;
using route::Problem;

namespace {

struct Config {
  const char* name;
  int E, K, G, KG;
  route::Scoring scoring;
  bool bias, renorm;
  float scaling;
  route::DType dtype = route::DType::f32;
};

const Config kConfigs[] = {
    {"DeepSeek-V3 (E 256, K 8, G 8, KG 4, sigmoid + bias, renorm, S 2.5)", 256, 8, 8, 4, route::Scoring::sigmoid,
     true, true, 2.5f},
    {"Qwen3 (E 128, K 8, softmax, renorm)", 128, 8, 1, 1, route::Scoring::softmax, false, true, 1.0f},
    {"Mixtral (E 8, K 2, softmax)", 8, 2, 1, 1, route::Scoring::softmax, false, false, 1.0f},
    {"Llama-4 (E 128, K 1, sigmoid)", 128, 1, 1, 1, route::Scoring::sigmoid, false, false, 1.0f},
    {"DeepSeek-V3, bf16 logits", 256, 8, 8, 4, route::Scoring::sigmoid, true, true, 2.5f, route::DType::bf16},
    {"E 1024, K 16, softmax, renorm", 1024, 16, 1, 1, route::Scoring::softmax, false, true, 1.0f},
};
const std::int64_t kTokens[] = {1, 16, 64, 256, 1024, 4096, 16384, 65536};

const char* name(route::DType d) { return d == route::DType::f32 ? "f32" : d == route::DType::bf16 ? "bf16" : "f16"; }

void measure(bench::Writer& out, const Config& c, std::int64_t T, bool pdl, bool then_align, std::uint64_t seed) {
  Problem p{.tokens = T, .experts = c.E, .topk = c.K, .groups = c.G, .topk_groups = c.KG, .scoring = c.scoring,
            .bias = c.bias, .renormalize = c.renorm, .scaling = c.scaling, .dtype = c.dtype};
  const bool use_pdl = pdl && device_caps().pdl;  // every launch's pdl (route's and align's)
  // The CLI's generator: standard-normal logits, 0.1 x normal bias.
  const npy::Array logits = gen::route_logits(T, c.E, c.dtype == route::DType::f32 ? npy::DType::f4 : npy::DType::bf16,
                                              "uniform", seed);
  const std::vector<float> wide = gen::logits_as_f32(logits, "bench logits");
  const npy::Array bias_arr = gen::route_bias(c.E, seed);
  const std::vector<float> bias(bias_arr.as<float>().begin(), bias_arr.as<float>().end());
  const route::Outputs ref = route::reference(p, wide.data(), c.bias ? bias.data() : nullptr);

  align::Problem ap;
  const align::Variant* av = nullptr;
  std::optional<WorkspaceNeed> align_ws;
  if (then_align) {
    ap = route::plan_then_align(p, 64);
    av = &align::registry().pick_auto(ap, use_pdl);
    align_ws = WorkspaceNeed::of(*av, ap, device_caps());
  }
  // The logits in rotated copies, the bias, the outputs (the align outputs
  // with then_align) and align's workspace, once; each variant gets its own workspace.
  route::DeviceBuffers dev(p, {logits.data, bias}, {}, SetOptions::run(rotation_copies(logits.data.size(), false)),
                           align_ws);
  const double bytes = route::bytes_moved(p);

  const std::string auto_pick(route::registry().pick_auto(p, use_pdl).info.name);
  for (const route::Variant& v : route::registry().variants()) {
    bench::Record rec;
    rec.table = fmt::format("{}{}, PDL {}", c.name, then_align ? ", then align (B 64)" : "", pdl ? "on" : "off");
    rec.variant = std::string(v.info.name);
    rec.params = {{"tokens", T},          {"E", c.E},        {"K", c.K},
                  {"G", c.G},             {"KG", c.KG},      {"scoring", c.scoring == route::Scoring::softmax ? "softmax" : "sigmoid"},
                  {"bias", c.bias},       {"renorm", c.renorm}, {"scaling", double(c.scaling)},
                  {"dtype", name(c.dtype)}, {"then_align", then_align}};
    rec.pdl = use_pdl ? "on" : "off";  // the record's own field, as a --pdl run reports it
    rec.dtype = c.dtype == route::DType::f32 ? "float32" : c.dtype == route::DType::bf16 ? "bfloat16" : "float16";
    rec.extra = {{"auto_pick", auto_pick}};
    if (const char* why = v.not_applicable(p, device_caps())) {
      rec.m.status = "n/a";
      rec.m.reason = why;
      out.write(rec);
      continue;
    }
    try {
      const bool fused = route::fuses_align(v);
      dev.replace_workspace(WorkspaceNeed::of(v, p, device_caps()));
      auto launch = [&](Stream s, int copy) {
        const route::Buffers b = dev.buffers(copy);
        if (then_align)
          cuda_check(route::launch_then_align(v, p, av, ap, b, dev.align_workspace(), s, use_pdl),
                     "route + align launch");
        else
          cuda_check(v.launch(p, b, s, use_pdl), "route launch");
      };
      dev.poison();
      launch(process_stream(), 0);
      cuda_check_last("launch");
      cuda_sync("kernel");
      route::Outputs got;
      (void)dev.download(got);  // no guards in a run's set
      const auto rep = route::check(p, wide.data(), c.bias ? bias.data() : nullptr, ref, got);
      rec.extra.push_back({"near_tie_rows", rep.near_tie_rows});
      if (then_align) rec.extra.push_back({"align_variant", fused ? std::string("fused") : std::string(av->info.name)});
      rec.m = bench::measure(launch, dev.copies(), TimingOptions{}, bytes);
      if (rec.m.status == "ok" && !rep.result.ok) {
        rec.m.status = "fail";
        rec.m.reason = rep.result.first_difference;
      }
    } catch (const std::exception& e) {
      rec.m.status = "error";
      rec.m.reason = e.what();
    }
    if (rec.m.status == "error" || rec.m.status == "fail")
      std::fprintf(stderr, "%s %s T=%lld: %s %s\n", rec.variant.c_str(), c.name, static_cast<long long>(T),
                   rec.m.status.c_str(), rec.m.reason.c_str());
    out.write(rec);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string json = bench::take_json_arg(argc, argv);
    if (cuda_device_count() == 0) {
      std::fprintf(stderr, "bench_route: no CUDA device\n");
      return 3;
    }
    bench::Writer out("bench_route", "route", json);
    out.set_copy_gbps(measured_copy_bandwidth_gbps());
    std::uint64_t seed = 1;
    for (const Config& c : kConfigs)
      for (bool pdl : {false, true})
        for (std::int64_t t : kTokens) measure(out, c, t, pdl, false, ++seed);
    // route + align (DeepSeek-V3 and Qwen3 shapes), PDL off.
    for (int i : {0, 1})
      for (std::int64_t t : {1, 16, 64, 256, 1024, 4096}) measure(out, kConfigs[i], t, false, true, ++seed);
    std::fprintf(stderr, "bench_route: done\n");
    out.finish();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_route: %s\n", e.what());
    return 3;
  }
}
