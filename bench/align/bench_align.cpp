// Benchmark of the align family: prints the Markdown of docs/bench/align.md.
//
//   bench_align > docs/bench/align.md
//   bench_align VARIANTS [TOKENS]     e.g. `bench_align micro,tiny 1,4`:
//                                     only those columns / rows (exploration)
//
// Median microseconds per launch (CUDA-graph replay, moekit::time_launches),
// B = 128, int32 ids, every variant x tokens x (E, topk). Every token picks
// topk distinct experts (uniformly, or zipf(1.2) in the zipf set). Each
// variant's output is checked against the CPU reference once per shape; a
// mismatch shows as "FAIL" in its cell. Not a test: timings never gate.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "align/align.hpp"
#include "bench_ids.hpp"
#include "cuda_util.hpp"
#include "align/reference.hpp"
#include "timing.hpp"

using namespace moekit;

namespace {

constexpr int kBlockSize = 128;
std::vector<int> g_tokens = {1, 4, 16, 64, 256, 1024, 2048, 4096, 16384, 65536};
std::vector<std::string> g_only;  // empty: every variant

struct Config {
  int E, topk;
  bool zipf;
  int max_tokens = 1 << 30;  // rows past this are skipped (large E: minutes otherwise)
};

// SGLang reference points from issue #5 (same H100, graph replay, B=128).
double sglang_us(int E, int topk, int tokens) {
  static const std::map<std::pair<int, int>, std::map<int, double>> ref = {
      {{256, 8}, {{1, 3.75}, {1024, 7.0}, {4096, 13.0}, {16384, 42.3}}},
      {{64, 8}, {{1, 3.64}, {16384, 60.9}}},
      {{512, 8}, {{1, 3.84}, {16384, 45.8}}},
      {{8, 2}, {{1, 2.94}, {16384, 16.4}}},
  };
  const auto it = ref.find({E, topk});
  if (it == ref.end()) return 0;
  const auto jt = it->second.find(tokens);
  return jt == it->second.end() ? 0 : jt->second;
}

std::vector<std::int32_t> make_ids(const Config& c, int tokens, std::mt19937_64& rng) {
  return bench::align_ids(c.E, c.topk, c.zipf, tokens, rng);
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

// One table: rows = tokens, columns = variants.
void run_config(const Config& c, std::mt19937_64& rng) {
  const auto vars = align::variants();
  fmt::print("\n### E = {}, topk = {}, {} ids\n\n", c.E, c.topk, c.zipf ? "zipf(1.2)" : "uniform");
  std::string head = "| tokens |", rule = "|---:|";
  for (const auto& v : vars) {
    if (!wanted(v.info.name)) continue;
    head += fmt::format(" {} |", v.info.name);
    rule += "---:|";
  }
  head += " auto picks | SGLang (issue) | auto / SGLang |";
  rule += "---|---:|---:|";
  fmt::print("{}\n{}\n", head, rule);

  for (int tokens : g_tokens) {
    if (tokens > c.max_tokens) continue;
    const std::int64_t numel = static_cast<std::int64_t>(tokens) * c.topk;
    const align::Problem p = align::make_problem(numel, c.E, kBlockSize, false, 0, false);
    const auto ids = make_ids(c, tokens, rng);
    const std::vector<std::int64_t> ids64(ids.begin(), ids.end());
    const align::Outputs ref = align::reference(p, ids64, {});

    const int copies = rotation_copies(ids.size() * 4, false);
    std::vector<DeviceBuffer> d_ids;
    for (int k = 0; k < copies; ++k) {
      d_ids.emplace_back(std::max<std::size_t>(ids.size() * 4, 16));
      if (!ids.empty()) d_ids.back().upload(ids.data(), ids.size() * 4);
    }
    DeviceBuffer sorted(std::max<std::int64_t>(p.max_num_tokens_padded, 1) * 4);
    DeviceBuffer eids(std::max<std::int64_t>(p.max_num_blocks, 1) * 4);
    DeviceBuffer total(4);

    std::string line = fmt::format("| {} |", tokens);
    double auto_us = 0;
    for (const auto& v : vars) {
      if (!wanted(v.info.name)) continue;
      const DeviceCaps& caps = device_caps();
      if (v.not_applicable(p, caps) != nullptr) {
        line += " n/a |";
        continue;
      }
      DeviceBuffer ws(std::max<std::size_t>(v.workspace_bytes(p, caps), 16));
      if (needs_zeroed_workspace(v, p, caps)) ws.fill_bytes(0);
      align::Buffers b;
      b.sorted_token_ids = sorted.as<std::int32_t>();
      b.expert_ids = eids.as<std::int32_t>();
      b.num_tokens_post_pad = total.as<std::int32_t>();
      b.workspace = ws.get();
      // Verify once.
      b.topk_ids = d_ids[0].get();
      sorted.fill_bytes(0xAB);
      eids.fill_bytes(0xAB);
      cuda_check(v.launch(p, b, nullptr), v.info.name.data());
      cuda_sync(v.info.name.data());
      align::Outputs got;
      got.sorted_token_ids.resize(static_cast<std::size_t>(p.max_num_tokens_padded));
      got.expert_ids.resize(static_cast<std::size_t>(p.max_num_blocks));
      sorted.download(got.sorted_token_ids.data(), got.sorted_token_ids.size() * 4);
      eids.download(got.expert_ids.data(), got.expert_ids.size() * 4);
      total.download(&got.num_tokens_post_pad, 4);
      const bool exact = v.stable_order || (v.info.name == "auto" && align::pick_auto(p).stable_order);
      const bool ok = align::check(p, ref, got, exact).ok;

      TimingOptions opt;
      opt.warmup = 5;
      opt.samples = 25;
      opt.launches_per_graph = 20;
      TimingStats st;
      try {
        st = time_launches(
            [&](Stream s, int copy) {
              align::Buffers bb = b;
              bb.topk_ids = d_ids[static_cast<std::size_t>(copy)].get();
              cuda_check(v.launch(p, bb, s), v.info.name.data());
            },
            copies, opt);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_align: %s: %s\n", v.info.name.data(), e.what());
        line += " ERR |";
        continue;
      }
      line += ok ? fmt::format(" {:.2f} |", st.median_us) : std::string(" FAIL |");
      if (v.info.name == "auto") auto_us = st.median_us;
    }
    const double sg = sglang_us(c.E, c.topk, tokens);
    line += fmt::format(" {} |", align::pick_auto(p).info.name);
    line += sg > 0 ? fmt::format(" {:.2f} | {:.2f} |", sg, auto_us / sg) : std::string(" | |");
    fmt::print("{}\n", line);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_only = split(argv[1]);
  if (argc > 2) {
    g_tokens.clear();
    for (const std::string& x : split(argv[2])) g_tokens.push_back(std::stoi(x));
  }
  if (cuda_device_count() == 0) {
    std::puts("bench_align: no CUDA device");
    return 77;
  }
  const DeviceProps d = device_props();
  fmt::print("# align benchmark\n\n");
  fmt::print(
      "Device: {} ({} SMs, {} MiB L2), CUDA runtime {}, driver {}. Generated by "
      "`bench_align` (bench/align/bench_align.cpp).\n\n",
      d.name, d.sm_count, d.l2_bytes >> 20, d.runtime_version, d.driver_version);
  fmt::print(
      "Median µs per launch over 25 CUDA-graph replays of 20 launches each (a variant's whole "
      "launch sequence counts as one launch), input copies rotated so ids do not sit in L2. "
      "B = 128, int32 ids, no expert map; every token picks topk distinct experts. Each cell "
      "was checked against the CPU reference once (FAIL otherwise). SGLang points are the "
      "issue's measurements of its newest kernel on the same GPU model.\n");
  fmt::print("\nauto rule: {}\n", align::auto_rule());
  std::mt19937_64 rng(42);
  for (Config c : {Config{8, 2, false}, Config{64, 8, false}, Config{128, 8, false},
                   Config{256, 8, false}, Config{512, 8, false}, Config{256, 8, true},
                   Config{4096, 8, false, 16384}, Config{16384, 8, false, 16384}})
    run_config(c, rng);
  return 0;
}
