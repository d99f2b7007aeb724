// Benchmark of the align family: one JSON record per (shape, variant) cell
// (bench/common/record.hpp); bench/render.py turns them into docs/bench/align.md.
//
//   bench_align --json bench/results/align.jsonl   (make bench; stdout without --json)
//   bench_align [--json FILE] VARIANTS [TOKENS]    e.g. `bench_align micro,tiny 1,4`:
//                                                  only those variants / rows (exploration)
// Run from the repository root: the "recorded traces" table reads data/
// (MOEKIT_TRACES=DIR elsewhere).
//
// Median microseconds per launch (CUDA-graph replay, moekit::time_launches),
// B = 128, int32 ids, every variant x tokens x (E, topk). Every token picks
// topk distinct experts (uniformly, or zipf(1.2) in the zipf set). Each
// variant's output is checked against the CPU reference once per shape; a
// mismatch makes the cell's status "fail". Not a test: timings never gate.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "align/align.hpp"
#include "align/buffers.hpp"
#include "bench_ids.hpp"
#include "cuda_util.hpp"
#include "npy.hpp"
#include "align/reference.hpp"
#include "record.hpp"
#include "timing.hpp"

using namespace moekit;

namespace {

constexpr int kBlockSize = 128;
std::vector<int> g_tokens = {1, 4, 16, 64, 256, 1024, 2048, 4096, 16384, 65536};
std::vector<std::string> g_only;  // empty: every variant
std::string g_traces = "data";    // folder of the recorded traces (run from the repository root)

struct Config {
  int E, topk;
  bool zipf;
  int max_tokens = 1 << 30;  // rows past this are skipped (large E: minutes otherwise)
};

std::vector<std::int32_t> make_ids(const Config& c, int tokens, std::mt19937_64& rng) {
  return bench::align_ids(c.E, c.topk, c.zipf, tokens, rng);
}

// Whether v's output must equal the reference bit for bit (the registry says
// it promises stable order, or it is `auto` and picks a variant that does).
bool exact_order(const align::Variant& v, const align::Problem& p) {
  return v.stable_order || (v.info.name == "auto" && align::registry().pick_auto(p, false).stable_order);
}

bool wanted(std::string_view n) {
  return g_only.empty() || n == "auto" ||
         std::find(g_only.begin(), g_only.end(), n) != g_only.end();
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t k = std::min(s.find(',', at), s.size());
    if (k > at) out.push_back(s.substr(at, k - at));
    at = k + 1;
  }
  return out;
}

// Every wanted variant on one id array: one record each.
void run_cells(const std::string& table, const bench::Fields& params, const std::vector<std::int32_t>& ids, int E,
               int block_size, bench::Writer& out) {
  const auto vars = align::registry().variants();
  const DeviceCaps& caps = device_caps();
  const std::int64_t numel = static_cast<std::int64_t>(ids.size());
  const align::Problem p = align::make_problem(numel, E, block_size, false, 0, false);
  const std::vector<std::int64_t> ids64(ids.begin(), ids.end());
  const align::Outputs ref = align::reference(p, ids64, {});

  // The ids in rotated copies and the outputs, once; each variant gets its own workspace.
  align::DeviceBuffers d(p, {std::as_bytes(std::span(ids)), {}}, {}, SetOptions::run(rotation_copies(ids.size() * 4, false)));

  for (const auto& v : vars) {
    if (!wanted(v.info.name)) continue;
    bench::Record rec;
    rec.table = table;
    rec.variant = std::string(v.info.name);
    rec.params = params;
    rec.dtype = "int32";
    if (v.info.name == "auto") {
      rec.extra = {{"picks", std::string(align::registry().pick_auto(p, false).info.name)},
                   {"auto_rule", align::registry().auto_rule()}};
    }
    if (const char* na = v.not_applicable(p, caps)) {
      rec.m.status = "n/a";
      rec.m.reason = na;
      out.write(rec);
      continue;
    }
    d.replace_workspace(WorkspaceNeed::of(v, p, caps));  // v's own launch: no expert-parallel passes
    // Verify once.
    d.poison();
    bool ok = false;
    try {
      cuda_check(v.launch(p, d.buffers(0), process_stream(), false), v.info.name.data());
      cuda_sync(v.info.name.data());
      align::Outputs got;
      (void)d.download(got);  // no guards in a run's set
      ok = align::check(p, ref, got, exact_order(v, p)).ok;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_align: %s: %s\n", v.info.name.data(), e.what());
      rec.m.status = "error";
      rec.m.reason = e.what();
      out.write(rec);
      continue;
    }

    TimingOptions opt;
    opt.warmup = 5;
    opt.samples = 25;
    opt.launches_per_graph = 20;
    rec.m = bench::measure(
        [&](Stream s, int copy) { cuda_check(v.launch(p, d.buffers(copy), s, false), v.info.name.data()); }, d.copies(),
        opt);
    if (rec.m.status == "error") std::fprintf(stderr, "bench_align: %s: %s\n", v.info.name.data(), rec.m.reason.c_str());
    if (rec.m.status == "ok" && !ok) rec.m.status = "fail";
    out.write(rec);
  }
}

// The cells of one (E, topk, ids) table: every wanted variant x tokens.
void run_config(const Config& c, std::mt19937_64& rng, bench::Writer& out) {
  const std::string table = fmt::format("E={} topk={} {}", c.E, c.topk, c.zipf ? "zipf" : "uniform");
  for (int tokens : g_tokens) {
    if (tokens > c.max_tokens) continue;
    run_cells(table,
              {{"E", c.E},
               {"topk", c.topk},
               {"ids", c.zipf ? "zipf" : "uniform"},
               {"tokens", tokens},
               {"block_size", kBlockSize},
               {"dtype", "int32"}},
              make_ids(c, tokens, rng), c.E, kBlockSize, out);
    std::fprintf(stderr, "bench_align: %s, %d tokens\n", table.c_str(), tokens);
  }
}

// The recorded router traces of data/ (data/README.md), whole and as prefixes:
// decode batches and small prefills with the block sizes engines use for them.
struct Trace {
  const char* file;
  const char* label;
  int E, block_size;
  std::vector<int> prefixes;  // token counts; 0 = the whole trace
};

void run_traces(const std::string& dir, bench::Writer& out) {
  const Trace traces[] = {
      {"llama4_maverick_l23_decode_step0.npy", "Llama-4-Maverick L23 decode batch", 128, 16, {1, 16, 64, 0}},
      {"llama4_maverick_l23_prefill.npy", "Llama-4-Maverick L23 prefill", 128, 64, {256, 1024, 0}},
      {"deepseek_v2_lite_l13_prefill1024.npy", "DeepSeek-V2-Lite L13 prefill", 64, 64, {1, 16, 64, 256, 1024}},
  };
  for (const Trace& t : traces) {
    const npy::Array a = npy::read(dir + "/" + t.file);
    if (a.dtype != npy::DType::i4 || a.shape.size() != 2)
      throw std::runtime_error(std::string(t.file) + ": expected int32 [tokens, topk]");
    const auto all = a.as<std::int32_t>();
    const int topk = static_cast<int>(a.shape[1]), rows = static_cast<int>(a.shape[0]);
    for (int n : t.prefixes) {
      const int tokens = n == 0 ? rows : std::min(n, rows);
      const std::vector<std::int32_t> ids(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(tokens) * topk);
      run_cells("recorded traces",
                {{"trace", t.label}, {"E", t.E}, {"topk", topk}, {"tokens", tokens}, {"block_size", t.block_size},
                 {"dtype", "int32"}},
                ids, t.E, t.block_size, out);
      std::fprintf(stderr, "bench_align: %s, %d tokens\n", t.label, tokens);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json = bench::take_json_arg(argc, argv);
  if (const char* d = std::getenv("MOEKIT_TRACES")) g_traces = d;
  if (argc > 1) g_only = split(argv[1]);
  if (argc > 2) {
    g_tokens.clear();
    for (const std::string& x : split(argv[2])) g_tokens.push_back(std::stoi(x));
  }
  if (cuda_device_count() == 0) {
    std::fputs("bench_align: no CUDA device\n", stderr);
    return 77;
  }
  bench::Writer out("bench_align", "align", json);
  std::mt19937_64 rng(42);
  for (Config c : {Config{8, 2, false}, Config{64, 8, false}, Config{128, 8, false},
                   Config{256, 8, false}, Config{512, 8, false}, Config{256, 8, true},
                   Config{4096, 8, false, 16384}, Config{16384, 8, false, 16384}})
    run_config(c, rng, out);
  run_traces(g_traces, out);
  out.finish();
  return 0;
}
