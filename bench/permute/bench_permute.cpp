// Benchmark of the permute family: one JSON record per (config, PDL mode,
// tokens, variant) cell (bench/common/record.hpp); bench/render.py turns them
// into docs/bench/permute.md.
//
//   bench_permute --json bench/results/permute.jsonl   (make bench; stdout without --json)
//
// Configs: the compact layout at the shapes of DeepSeek-V3, Qwen3 and
// Mixtral, and DeepSeek-V3's padded layout (B 64): the cells of the CLI sweep
// bench/results/permute-cli.jsonl, each with PDL off and on. bf16 hidden rows
// and uniform ids (distinct per token) from the CLI's generators. The buffers
// are the CLI's (src/permute/buffers.hpp), inputs rotated through copies so the
// rotation exceeds L2. Median microseconds per launch (CUDA-graph replay);
// GB/s from permute::bytes_moved (ids and hidden read once, one row written per
// slot, inverse written). Each cell's output is checked against the CPU
// reference first; a mismatch makes its status "fail". Not a test.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "align/gen.hpp"
#include "cell.hpp"
#include "cuda_util.hpp"
#include "permute/buffers.hpp"
#include "permute/permute.hpp"
#include "permute/reference.hpp"
#include "record.hpp"
#include "rows_gen.hpp"
#include "timing.hpp"

using namespace moekit;
using permute::Layout;

namespace {

struct Config {
  const char* name;
  int E, K;
  std::int64_t H;
  Layout layout;
  int B;  // padded only
};

const Config kConfigs[] = {
    {"DeepSeek-V3 (E 256, K 8, H 7168)", 256, 8, 7168, Layout::compact, 1},
    {"Qwen3 (E 128, K 8, H 4096)", 128, 8, 4096, Layout::compact, 1},
    {"Mixtral (E 8, K 2, H 4096)", 8, 2, 4096, Layout::compact, 1},
    {"DeepSeek-V3 (E 256, K 8, H 7168)", 256, 8, 7168, Layout::padded, 64},
};
const std::int64_t kTokens[] = {1, 16, 256, 4096, 8192, 16384};

const char* name(Layout l) { return l == Layout::padded ? "padded" : "compact"; }

// Every variant at one (config, T), with PDL off and on: the inputs and the
// reference are made once.
void measure(bench::Writer& out, const Config& c, std::int64_t T, std::uint64_t seed) {
  const DeviceCaps& caps = device_caps();
  const npy::Array hidden = gen::normal_rows(T, c.H, npy::DType::bf16, seed, "hidden rows");
  const npy::Array ids = gen::align_ids(T, c.K, c.E, gen::parse_dist("uniform"), seed, false);
  const auto ids32 = ids.as<std::int32_t>();
  const std::vector<std::int64_t> wide(ids32.begin(), ids32.end());
  const permute::Problem p0 = permute::make_problem(T, c.K, c.E, c.B, c.H * 2, c.layout);
  const permute::Outputs ref = permute::reference(p0, hidden.data.data(), wide);
  const int copies = rotation_copies(hidden.data.size() + ids.data.size(), false);

  for (bool pdl : {false, true}) {
    const permute::Problem& p = p0;
    const bool use_pdl = pdl && caps.pdl;  // every launch's pdl
    const std::string auto_pick(permute::registry().pick_auto(p, caps, use_pdl).info.name);
    for (const permute::Variant& v : permute::registry().variants()) {
      bench::Record rec;
      rec.table = fmt::format("{}, {}{}, PDL {}", c.name, name(c.layout),
                              c.layout == Layout::padded ? fmt::format(" (B {})", c.B) : std::string(), pdl ? "on" : "off");
      rec.variant = std::string(v.info.name);
      rec.params = {{"tokens", T},        {"E", c.E},          {"K", c.K},    {"H", c.H},
                    {"layout", name(c.layout)}, {"B", c.layout == Layout::padded ? c.B : 1},
                    {"dtype", "bf16"}};
      rec.dtype = "bfloat16";
      rec.pdl = use_pdl ? "on" : "off";
      rec.extra = {{"auto_pick", auto_pick}};
      bench::write_cell(out, std::move(rec), v.not_applicable(p, caps), [&](bench::Record& r) {
        permute::DeviceBuffers d(p, {hidden.data, ids32, {}}, WorkspaceNeed::of(v, p, caps), SetOptions::run(copies));
        std::vector<permute::Buffers> bufs;
        for (int k = 0; k < copies; ++k) bufs.push_back(d.buffers(k));
        auto launch = [&](Stream s, int copy) { cuda_check(v.launch(p, bufs[copy], s, use_pdl), "permute launch"); };
        bench::launch_once(launch);
        permute::Outputs got;
        std::string why = d.download(got);
        if (why.empty()) {
          const CheckResult chk = permute::check(p, hidden.data.data(), wide, ref, got);
          if (!chk.ok) why = chk.first_difference;
        }
        r.extra.push_back({"rows", got.aligned.num_tokens_post_pad});
        r.m = bench::measure(launch, copies, TimingOptions{}, permute::bytes_moved(p));
        return why;
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_bench(argc, argv, "permute", [](bench::Writer& out) {
    std::uint64_t seed = 1;
    for (const Config& c : kConfigs)
      for (std::int64_t t : kTokens) measure(out, c, t, ++seed);
  });
}
