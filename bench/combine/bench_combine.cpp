// Benchmark of the combine family: one JSON record per (config, PDL mode,
// tokens, variant) cell (bench/common/record.hpp); bench/render.py turns them
// into docs/bench/combine.md.
//
//   bench_combine --json bench/results/combine.jsonl   (make bench; stdout without --json)
//
// Configs: K and H of DeepSeek-V3, Qwen3 and Mixtral, S = 1 (the cells of the
// CLI sweep bench/results/combine-cli.jsonl), each with PDL off and on. P = T*K
// bf16 expert rows (standard normal), a shuffled one-to-one inverse map and
// descending weights summing to 1 (`moekit gen combine`, `gen inverse`, `gen
// topk-weights`). The buffers are the CLI's (src/combine/buffers.hpp), the
// rows rotated through copies so the rotation exceeds L2. Median microseconds
// per launch (CUDA-graph replay); GB/s from combine::bytes_moved (each used
// row read once, out written once, inverse and weights read). Each cell's
// output is checked against the CPU reference first (bit for bit where the
// variant keeps the order, else to the order-free tolerance); a mismatch makes
// its status "fail". Not a test.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cell.hpp"
#include "combine/buffers.hpp"
#include "combine/combine.hpp"
#include "combine/gen.hpp"
#include "combine/reference.hpp"
#include "cuda_util.hpp"
#include "record.hpp"
#include "rows_gen.hpp"
#include "timing.hpp"

using namespace moekit;

namespace {

struct Config {
  const char* name;
  int K;
  std::int64_t H;
};

const Config kConfigs[] = {
    {"DeepSeek-V3 (K 8, H 7168)", 8, 7168},
    {"Qwen3 (K 8, H 4096)", 8, 4096},
    {"Mixtral (K 2, H 4096)", 2, 4096},
};
const std::int64_t kTokens[] = {1, 16, 256, 4096, 8192};

// Every variant at one (config, T), with PDL off and on: the inputs and the
// reference are made once.
void measure(bench::Writer& out, const Config& c, std::int64_t T, std::uint64_t seed) {
  const DeviceCaps& caps = device_caps();
  combine::Problem p0;
  p0.tokens = T;
  p0.topk = c.K;
  p0.rows = std::max<std::int64_t>(T * c.K, 1);
  p0.hidden = c.H;
  p0.dtype = combine::DType::bf16;
  p0.scaling = 1.0f;
  const npy::Array x = gen::normal_rows(p0.rows, c.H, npy::DType::bf16, seed, "expert rows");
  const npy::Array inv_a = gen::combine_inverse(T, c.K, seed), w_a = gen::topk_weights(T, c.K, seed);
  const auto inv = inv_a.as<std::int32_t>();
  const auto w = w_a.as<float>();
  std::vector<unsigned char> ref(combine::out_bytes(p0));
  combine::reference(p0, x.data.data(), inv.data(), w.data(), ref.data());
  const int copies = rotation_copies(x.data.size(), false);

  for (bool pdl : {false, true}) {
    const combine::Problem& p = p0;
    const bool use_pdl = pdl && caps.pdl;  // every launch's pdl
    const std::string auto_pick(combine::registry().pick_auto(p, caps, use_pdl).info.name);
    for (const combine::Variant& v : combine::registry().variants()) {
      bench::Record rec;
      rec.table = fmt::format("{}, PDL {}", c.name, pdl ? "on" : "off");
      rec.variant = std::string(v.info.name);
      rec.params = {{"tokens", T}, {"K", c.K},       {"H", c.H},
                    {"rows", p.rows}, {"scaling", 1.0}, {"dtype", "bf16"}};
      rec.dtype = "bfloat16";
      rec.pdl = use_pdl ? "on" : "off";
      rec.extra = {{"auto_pick", auto_pick}};
      bench::write_cell(out, std::move(rec), v.not_applicable(p, caps), [&](bench::Record& r) {
        combine::DeviceBuffers d(p, {x.data, inv, w}, WorkspaceNeed::of(v, p, caps), SetOptions::run(copies));
        std::vector<combine::Buffers> bufs;
        for (int k = 0; k < copies; ++k) bufs.push_back(d.buffers(k));
        auto launch = [&](Stream s, int copy) { cuda_check(v.launch(p, bufs[copy], s, use_pdl), "combine launch"); };
        bench::launch_once(launch);
        std::vector<unsigned char> got(ref.size());
        std::string why = d.download(got.data());
        if (why.empty()) {
          const CheckResult chk = v.stable_order
                                    ? combine::check(p, ref.data(), got.data())
                                    : combine::check_tolerant(p, x.data.data(), inv.data(), w.data(), got.data());
          if (!chk.ok) why = chk.first_difference;
        }
        r.m = bench::measure(launch, copies, TimingOptions{}, combine::bytes_moved(p, inv));
        return why;
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_bench(argc, argv, "combine", [](bench::Writer& out) {
    std::uint64_t seed = 1;
    for (const Config& c : kConfigs)
      for (std::int64_t t : kTokens) measure(out, c, t, ++seed);
  });
}
