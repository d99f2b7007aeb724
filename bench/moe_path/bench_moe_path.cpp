// Benchmark of the moe_path family: one JSON record per (model, PDL mode,
// tokens, variant) cell (bench/common/record.hpp); bench/render.py turns them
// into docs/bench/moe-path.md.
//
//   bench_moe_path --json bench/results/moe_path.jsonl   (make bench; stdout without --json)
//
// Models: the routers and shapes of DeepSeek-V3, Qwen3-235B and Mixtral (as
// `moekit moe-path --model` fills them in), the compact layout, T {1, 16, 256,
// 4096}, PDL off and on: the cells of the CLI sweep
// bench/results/moe-path-cli.jsonl. Standard-normal f32 logits (and a bias for
// DeepSeek-V3) and bf16 hidden rows from the CLI's generators. The buffers are
// the CLI's (src/moe_path/buffers.hpp), inputs rotated through copies so the
// rotation exceeds L2. Median microseconds per path launch (CUDA-graph
// replay); each stage is also timed alone as its own graph (extra
// "stage_us.<stage>", with the variant it ran). GB/s from moe_path::bytes_moved
// (each stage's least traffic). Each cell's outputs are checked by the path's
// checker first; a mismatch makes its status "fail". Not a test.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cell.hpp"
#include "cuda_util.hpp"
#include "moe_path/buffers.hpp"
#include "moe_path/moe_path.hpp"
#include "moe_path/reference.hpp"
#include "record.hpp"
#include "route/gen.hpp"
#include "rows_gen.hpp"
#include "timing.hpp"

using namespace moekit;

namespace {

struct Model {
  const char* name;
  std::int32_t E, K;
  std::int64_t H;
  std::int32_t G, KG;
  route::Scoring scoring;
  bool bias, renormalize;
  float scaling;
};

const Model kModels[] = {
    {"DeepSeek-V3", 256, 8, 7168, 8, 4, route::Scoring::sigmoid, true, true, 2.5f},
    {"Qwen3-235B", 128, 8, 4096, 1, 1, route::Scoring::softmax, false, true, 1.0f},
    {"Mixtral", 8, 2, 4096, 1, 1, route::Scoring::softmax, false, true, 1.0f},
};
const std::int64_t kTokens[] = {1, 16, 256, 4096};

// Every variant at one (model, T), with PDL off and on: the inputs and the
// reference are made once.
void measure(bench::Writer& out, const Model& m, std::int64_t T, std::uint64_t seed) {
  const DeviceCaps& caps = device_caps();
  const route::Problem router{
      .groups = m.G, .topk_groups = m.KG, .scoring = m.scoring, .bias = m.bias, .renormalize = m.renormalize};
  const moe_path::Problem p0 = moe_path::make_problem(T, m.K, m.E, m.H, combine::DType::bf16,
                                                      permute::Layout::compact, 64, m.scaling, &router);
  const npy::Array logits = gen::route_logits(T, m.E, npy::DType::f4, "uniform", seed);
  const std::vector<float> wide = gen::logits_as_f32(logits, "bench logits");
  std::vector<float> bias;
  if (m.bias) {
    const npy::Array b = gen::route_bias(m.E, seed);
    bias.assign(b.as<float>().begin(), b.as<float>().end());
  }
  const npy::Array hidden = gen::normal_rows(T, m.H, npy::DType::bf16, seed, "hidden rows");
  moe_path::Inputs in;
  in.logits = wide.data();
  in.bias = bias.empty() ? nullptr : bias.data();
  in.hidden = hidden.data.data();
  const moe_path::Outputs ref = moe_path::reference(p0, in);
  const int copies = rotation_copies(logits.data.size() + hidden.data.size(), false);

  for (bool pdl : {false, true}) {
    const moe_path::Problem& p = p0;
    const bool use_pdl = pdl && caps.pdl;  // every launch's pdl, every stage's
    for (const moe_path::Variant& v : moe_path::registry().variants()) {
      bench::Record rec;
      rec.table = fmt::format("{}, compact, PDL {}", m.name, pdl ? "on" : "off");
      rec.variant = std::string(v.info.name);
      rec.params = {{"model", m.name},  {"tokens", T},         {"E", m.E},
                    {"K", m.K},         {"H", m.H},            {"layout", "compact"},
                    {"scaling", double(m.scaling)}, {"dtype", "bf16"}};
      rec.dtype = "bfloat16";
      rec.pdl = use_pdl ? "on" : "off";
      bench::write_cell(out, std::move(rec), v.not_applicable(p, caps), [&](bench::Record& r) {
        moe_path::DeviceBuffers d(p, {logits.data, bias, hidden.data, {}, {}}, WorkspaceNeed::of(v, p, caps),
                                  SetOptions::run(copies));
        std::vector<moe_path::Buffers> bufs;
        for (int k = 0; k < copies; ++k) bufs.push_back(d.buffers(k));
        auto launch = [&](Stream s, int copy) { cuda_check(v.launch(p, bufs[copy], s, use_pdl), "moe-path launch"); };
        bench::launch_once(launch);
        moe_path::Outputs got;
        std::string why = d.download(got);
        if (why.empty()) {
          const moe_path::CheckReport chk = moe_path::check(p, in, ref, got);
          r.extra.push_back({"near_tie_rows", chk.near_tie_rows});
          if (!chk.result.ok) why = chk.result.first_difference;
        }
        r.m = bench::measure(launch, copies, TimingOptions{}, moe_path::bytes_moved(p, logits.data.size(), bias.size()));
        // Each stage alone, as its own graph: the record's stage_us, as `moekit moe-path --bench` reports it.
        for (moe_path::Stage st : moe_path::stages(p)) {
          const std::string sn(moe_path::stage_name(st));
          auto stage = [&](Stream s, int copy) { cuda_check(moe_path::launch_stage(p, bufs[copy], st, s, use_pdl), "stage launch"); };
          const bench::Measurement sm = bench::measure(stage, copies, TimingOptions{});
          if (sm.stats) r.stages.emplace_back(sn, *sm.stats);
          r.extra.push_back({"stage_variant." + sn, std::string(moe_path::stage_variant(p, st, caps))});
        }
        return why;
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_bench(argc, argv, "moe_path", [](bench::Writer& out) {
    std::uint64_t seed = 1;
    for (const Model& m : kModels)
      for (std::int64_t t : kTokens) measure(out, m, t, ++seed);
  });
}
