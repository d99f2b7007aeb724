// The probe's harness (align_probe.hpp): the device input, its check, timing.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdlib>

#include "align/relay.cuh"
#include "bench_ids.hpp"
#include "common/device.hpp"
#include "timing.hpp"

namespace moekit::align_probe {

namespace {

__global__ void spin_kernel(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > ns) break;
  }
}

}  // namespace

void spin_ms(double ms) {
  // Everything on the process's one stream (docs/timing.md "One stream").
  spin_kernel<<<std::max(device_caps().sm_count, 1), 32, 0, process_stream()>>>(static_cast<long long>(ms * 1e6));
  cuda_sync("spin");
}

// Local variant of time_launches: warm-up by graph replays for warm_ms, then

double bench_like(const Launch& launch, int copies, int per_graph) {
  TimingOptions opt;
  opt.warmup = 5;
  opt.samples = 25;
  opt.launches_per_graph = per_graph;
  return time_launches([&](Stream s, int c) { launch(reinterpret_cast<cudaStream_t>(s), c); },
                       copies, opt)
      .median_us;
}

Setup::Setup(const Shape& c, int tokens, std::mt19937_64& rng, int block_size) {
  const auto h = bench::align_ids(c.E, c.topk, c.zipf, tokens, rng);
  p = align::make_problem(static_cast<std::int64_t>(h.size()), c.E, block_size, false, 0, false);
  const std::vector<std::int64_t> h64(h.begin(), h.end());
  ref = align::reference(p, h64, {});
  copies = rotation_copies(h.size() * 4, false);
  for (int k = 0; k < copies; ++k) {
    ids.emplace_back(std::max<std::size_t>(h.size() * 4, 16));
    if (!h.empty()) ids.back().upload(h.data(), h.size() * 4);
  }
  sorted = DeviceBuffer(std::max<std::int64_t>(p.max_num_tokens_padded, 1) * 4);
  eids = DeviceBuffer(std::max<std::int64_t>(p.max_num_blocks, 1) * 4);
  total = DeviceBuffer(4);
  ws = DeviceBuffer(std::size_t(64) << 20);
}

bool Setup::numel_ok(int threads) const { return p.numel <= std::int64_t{threads} * ad::kRelayLoads; }

align::Buffers Setup::buffers(int copy) const {
  align::Buffers b;
  b.topk_ids = ids[static_cast<std::size_t>(copy)].get();
  b.sorted_token_ids = sorted.as<std::int32_t>();
  b.expert_ids = eids.as<std::int32_t>();
  b.num_tokens_post_pad = total.as<std::int32_t>();
  b.workspace = ws.get();
  return b;
}

bool Setup::verify(const Launch& launch) {
  ws.fill_bytes(0);
  sorted.fill_bytes(0xAB);
  eids.fill_bytes(0xAB);
  total.fill_bytes(0xAB);
  launch(process_stream(), 0);
  cuda_check_last("verify launch");
  cuda_sync("verify");
  align::Outputs got;
  got.sorted_token_ids.resize(static_cast<std::size_t>(p.max_num_tokens_padded));
  got.expert_ids.resize(static_cast<std::size_t>(p.max_num_blocks));
  sorted.download(got.sorted_token_ids.data(), got.sorted_token_ids.size() * 4);
  eids.download(got.expert_ids.data(), got.expert_ids.size() * 4);
  total.download(&got.num_tokens_post_pad, 4);
  return align::check(p, ref, got, false).ok;
}

Launch variant_launch(const Setup& su, const char* name) {
  const align::Variant* v = align::registry().find(name);
  return [&su, v](cudaStream_t s, int c) {
    v->launch(su.p, su.buffers(c), reinterpret_cast<Stream>(s), su.pdl);
  };
}

double time_product(Setup& su, const char* name) {
  if (align::registry().find(name)->not_applicable(su.p, device_caps()) != nullptr) return 1e9;
  const Launch f = variant_launch(su, name);
  return su.verify(f) ? bench_like(f, su.copies) : 1e9;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool token_in_range(int t) {
  const char* lo = std::getenv("PROBE_MIN_TOKENS");
  const char* hi = std::getenv("PROBE_MAX_TOKENS");
  return !(lo && t < std::atoi(lo)) && !(hi && t > std::atoi(hi));
}

void token_filter(std::vector<int>& tokens) {
  std::erase_if(tokens, [](int t) { return !token_in_range(t); });
}

std::vector<Cell> issue_cells() {
  std::vector<Cell> cells;
  for (const Shape sh : {Shape{8, 2, false}, Shape{64, 8, false}, Shape{128, 8, false}, Shape{256, 8, false},
                         Shape{512, 8, false}, Shape{4096, 8, false}})
    for (int t : {1, 16, 64, 256, 1024}) cells.push_back({sh, t, 128});
  cells.push_back({{128, 1, false}, 128, 16});  // Llama-4-Maverick decode rows
  cells.push_back({{128, 1, false}, 135, 16});
  for (int t : {1, 16, 64, 256, 1024}) cells.push_back({{64, 6, false}, t, 64});  // DeepSeek-V2-Lite prefixes
  return cells;
}

}  // namespace moekit::align_probe
