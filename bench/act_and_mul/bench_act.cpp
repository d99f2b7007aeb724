// Benchmark of the act-and-mul family: one JSON record per (shape, variant)
// cell (bench/common/record.hpp); bench/render.py turns them into
// docs/bench/act-and-mul.md.
//
//   bench_act_and_mul --json bench/results/act_and_mul.jsonl   (make bench; stdout without --json)
//
// Median microseconds per launch (CUDA-graph replay, moekit::time_launches),
// GB/s counting the input read once and the output written once, and that as
// a percentage of the device's measured copy bandwidth (the record's gbps, peak_gbps, pct_of_peak). Inputs are random
// normal. Small inputs rotate through copies so that the rotation exceeds L2;
// inputs above L2 stream from DRAM anyway and use one copy. Each variant's
// output is checked against the CPU reference on sampled rows once per shape;
// a mismatch makes the cell's status "fail". Not a test: timings never gate.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "act_and_mul/act_and_mul.hpp"
#include "act_and_mul/buffers.hpp"
#include "act_and_mul_tuning.hpp"
#include "cuda_util.hpp"
#include "half.hpp"
#include "act_and_mul/reference.hpp"
#include "record.hpp"
#include "timing.hpp"

using namespace moekit;
using act::Activation;
using act::DType;
using act::Problem;

namespace {

const std::vector<std::int64_t> kTokens = {1, 16, 128, 1024, 4096, 16384};

const char* name(DType t) { return t == DType::f16 ? "f16" : t == DType::bf16 ? "bf16" : "f32"; }
// The record's dtype, in the words of the CLI's report.
const char* report_name(DType t) { return t == DType::f16 ? "float16" : t == DType::bf16 ? "bfloat16" : "float32"; }
const char* name(Activation a) {
  return a == Activation::silu ? "silu" : a == Activation::gelu ? "gelu" : "gelu-tanh";
}
std::size_t esize(DType t) { return t == DType::f32 ? 4 : 2; }

template <class F>
void parallel_for(std::int64_t n, F f) {
  const std::int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t workers = std::min<std::int64_t>(hw, std::max<std::int64_t>(1, n / 64));
  std::vector<std::thread> ts;
  for (std::int64_t w = 0; w < workers; ++w) ts.emplace_back([&, w] { f(n * w / workers, n * (w + 1) / workers); });
  for (auto& t : ts) t.join();
}

// Random normal input, rows taken as windows of a pool (fast for 1e9 elements).
std::vector<unsigned char> make_input(const Problem& p, std::uint64_t seed) {
  const std::size_t es = esize(p.dtype);
  constexpr std::int64_t kPool = std::int64_t{1} << 20;
  std::vector<unsigned char> pool(kPool * es);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (std::int64_t i = 0; i < kPool; ++i) {
    const float v = nd(rng);
    if (p.dtype == DType::f32) {
      std::memcpy(pool.data() + i * 4, &v, 4);
    } else {
      const std::uint16_t b = p.dtype == DType::f16 ? f32_to_f16_bits(v) : f32_to_bf16_bits(v);
      std::memcpy(pool.data() + i * 2, &b, 2);
    }
  }
  const std::int64_t w = 2 * p.d;
  std::vector<std::int64_t> offs(p.tokens);
  for (auto& o : offs) o = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(kPool - w));
  std::vector<unsigned char> in(static_cast<std::size_t>(p.tokens * w) * es);
  parallel_for(p.tokens, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r)
      std::memcpy(in.data() + static_cast<std::size_t>(r * w) * es, pool.data() + offs[r] * es,
                  static_cast<std::size_t>(w) * es);
  });
  return in;
}

// Checks `out` against the reference on up to 16 rows (first, last, random).
bool check_rows(const Problem& p, const std::vector<unsigned char>& in, const std::vector<unsigned char>& out) {
  const std::size_t es = esize(p.dtype);
  std::vector<std::int64_t> rows{0, p.tokens - 1};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 14 && p.tokens > 2; ++i) rows.push_back(static_cast<std::int64_t>(rng() % p.tokens));
  Problem q = p;
  q.tokens = 1;
  std::vector<unsigned char> ref(static_cast<std::size_t>(p.d) * es);
  for (std::int64_t r : rows) {
    act::reference(q, in.data() + static_cast<std::size_t>(r * 2 * p.d) * es, ref.data());
    if (!act::check(q, ref.data(), out.data() + static_cast<std::size_t>(r * p.d) * es).ok) return false;
  }
  return true;
}

// Every variant of vs on one shape: one record each, written to out.
void measure(bench::Writer& out, const std::string& table, DType dt, Activation a, std::int64_t tokens,
             std::int64_t d, std::uint64_t seed, std::span<const act::Variant> vs = act::registry().variants()) {
  const Problem p{tokens, d, dt, a};
  const std::size_t es = esize(dt);
  const std::vector<unsigned char> in = make_input(p, seed);
  const std::size_t out_bytes = static_cast<std::size_t>(tokens * d) * es;
  // The input in rotated copies and the output, once; each variant gets its own workspace.
  act::DeviceBuffers dev(p, std::as_bytes(std::span(in)), {}, SetOptions::run(rotation_copies(in.size(), false)));
  std::vector<unsigned char> host_out(out_bytes);
  const double bytes = act::bytes_moved(p);
  TimingOptions opt;
  // Big shapes are slow to replay and steady: fewer samples.
  if (bytes > 256e6) {
    opt.samples = 30;
    opt.launches_per_graph = 5;
  }
  // Every variant launches as its name says (pdl false: spread and flat
  // without PDL); auto picks as the CLI does by default (--pdl on).
  const std::string auto_pick(act::registry().pick_auto(p, device_caps().pdl).info.name);
  for (const auto& v : vs) {
    bench::Record rec;
    rec.table = table;
    rec.variant = std::string(v.info.name);
    rec.dtype = report_name(dt);
    rec.params = {{"dtype", name(dt)},
                  {"act", name(a)},
                  {"tokens", tokens},
                  {"d", d}};
    rec.extra = {{"auto_pick", auto_pick}};
    try {
      dev.replace_workspace(WorkspaceNeed::of(v, p, device_caps()));
      auto launch = [&](Stream s, int copy) { cuda_check(v.launch(p, dev.buffers(copy), s, false), "launch"); };
      dev.poison();
      launch(process_stream(), 0);
      cuda_check_last("launch");  // launch() checks its status
      cuda_sync("kernel");
      (void)dev.download(host_out.data());  // no guards in a run's set
      const bool ok = check_rows(p, in, host_out);
      rec.m = bench::measure(launch, dev.copies(), opt, bytes);
      if (rec.m.status == "ok" && !ok) rec.m.status = "fail";
    } catch (const std::exception& e) {
      rec.m.status = "error";
      rec.m.reason = e.what();
    }
    if (rec.m.status == "error")
      std::fprintf(stderr, "%s %s %s %lldx%lld: %s\n", rec.variant.c_str(), name(dt), name(a),
                   static_cast<long long>(tokens), static_cast<long long>(d), rec.m.reason.c_str());
    out.write(rec);
  }
  std::fprintf(stderr, "measured %s %s %lld x %lld\n", name(dt), name(a), static_cast<long long>(tokens),
               static_cast<long long>(d));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string json = bench::take_json_arg(argc, argv);
    if (cuda_device_count() == 0) {
      std::fprintf(stderr, "bench_act: no CUDA device\n");
      return 3;
    }
    bench::Writer out("bench_act", "act-and-mul", json);
    out.set_copy_gbps(measured_copy_bandwidth_gbps());
    auto title = [](DType dt, Activation a, std::int64_t d) {
      return fmt::format("{}, {}, d = {}", name(dt), name(a), d);
    };
    std::uint64_t seed = 1;
    for (std::int64_t d : {4096, 14336, 18432})
      for (std::int64_t t : kTokens)
        measure(out, title(DType::bf16, Activation::silu, d), DType::bf16, Activation::silu, t, d, ++seed);
    for (auto [dt, a] : {std::pair{DType::f16, Activation::silu}, std::pair{DType::f32, Activation::silu},
                         std::pair{DType::bf16, Activation::gelu}, std::pair{DType::bf16, Activation::gelu_tanh}})
      for (std::int64_t t : kTokens) measure(out, title(dt, a, 14336), dt, a, t, 14336, ++seed);

    // Tuning candidates of the flat grid (bench/tune/, not variants), bf16
    // silu; the renderer puts the table "flat grid configurations" in its own section.
    for (std::int64_t d : {4096, 14336, 18432})
      for (std::int64_t t : {1, 16, 128, 1024, 4096, 16384})
        measure(out, "flat grid configurations", DType::bf16, Activation::silu, t, d, ++seed,
                act::tune::flat_grid_candidates());
    out.finish();
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_act: %s\n", e.what());
    return 3;
  }
}
