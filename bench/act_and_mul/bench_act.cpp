// Benchmark of the act-and-mul family: prints the Markdown of
// docs/bench/act-and-mul.md.
//
//   bench_act > docs/bench/act-and-mul.md
//
// Median microseconds per launch (CUDA-graph replay, moekit::time_launches),
// GB/s counting the input read once and the output written once, and that as
// a percentage of the device's measured copy bandwidth. Inputs are random
// normal. Small inputs rotate through copies so that the rotation exceeds L2;
// inputs above L2 stream from DRAM anyway and use one copy. Each variant's
// output is checked against the CPU reference on sampled rows once per shape;
// a mismatch shows as FAIL in its cell. Not a test: timings never gate.
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
#include "act_and_mul/tuning.hpp"
#include "cuda_util.hpp"
#include "half.hpp"
#include "act_and_mul/reference.hpp"
#include "timing.hpp"

using namespace moekit;
using act::Activation;
using act::DType;
using act::Problem;

namespace {

const std::vector<std::int64_t> kTokens = {1, 16, 128, 1024, 4096, 16384};

const char* name(DType t) { return t == DType::f16 ? "f16" : t == DType::bf16 ? "bf16" : "f32"; }
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

struct Cell {
  double us = 0, gbps = 0;
  bool ok = true;
  std::string error;
};

struct Row {
  std::int64_t tokens, d;
  std::vector<Cell> cells;  // one per variant
  std::string auto_pick;
};

double g_copy_gbps = 0;

std::string fmt_cell(const Cell& c) {
  if (!c.error.empty()) return "error";
  std::string s = fmt::format("{:.2f} µs · {:.0f} GB/s ({:.0f}%)", c.us, c.gbps, 100.0 * c.gbps / g_copy_gbps);
  if (!c.ok) s += " FAIL";
  return s;
}

Row measure(DType dt, Activation a, std::int64_t tokens, std::int64_t d, std::uint64_t seed,
            std::span<const act::Variant> vs = act::variants()) {
  const Problem p{tokens, d, dt, a};
  const std::size_t es = esize(dt);
  const std::vector<unsigned char> in = make_input(p, seed);
  const std::size_t out_bytes = static_cast<std::size_t>(tokens * d) * es;
  const int copies = rotation_copies(in.size(), false);
  std::vector<DeviceBuffer> din;
  for (int c = 0; c < copies; ++c) {
    din.emplace_back(in.size());
    din.back().upload(in.data(), in.size());
  }
  DeviceBuffer dout(out_bytes);
  std::vector<unsigned char> out(out_bytes);
  const double bytes = static_cast<double>(in.size() + out_bytes);
  TimingOptions opt;
  // Big shapes are slow to replay and steady: fewer samples.
  if (bytes > 256e6) {
    opt.samples = 30;
    opt.launches_per_graph = 5;
  }
  Row row{tokens, d, {}, std::string(act::pick_auto(p).info.name)};
  for (const auto& v : vs) {
    Cell cell;
    try {
      DeviceBuffer ws(std::max<std::size_t>(v.workspace_bytes(p, device_caps()), 1));
      auto launch = [&](Stream s, int copy) {
        act::Buffers b;
        b.input = din[copy].get();
        b.out = dout.get();
        b.workspace = ws.get();
        cuda_check(v.launch(p, b, s), "launch");
      };
      dout.fill_bytes(0xff);
      launch(nullptr, 0);
      cuda_check_last("launch");  // launch() checks its status
      cuda_sync("kernel");
      dout.download(out.data(), out_bytes);
      cell.ok = check_rows(p, in, out);
      const TimingStats st = time_launches(launch, copies, opt);
      cell.us = st.median_us;
      cell.gbps = bytes / (st.median_us * 1e-6) / 1e9;
    } catch (const std::exception& e) {
      cell.error = e.what();
      std::fprintf(stderr, "%s %s %s %lldx%lld: %s\n", std::string(v.info.name).c_str(), name(dt), name(a),
                   static_cast<long long>(tokens), static_cast<long long>(d), e.what());
    }
    row.cells.push_back(cell);
  }
  std::fprintf(stderr, "measured %s %s %lld x %lld\n", name(dt), name(a), static_cast<long long>(tokens),
               static_cast<long long>(d));
  return row;
}

int variant_index(std::string_view n) {
  const auto vs = act::variants();
  for (std::size_t i = 0; i < vs.size(); ++i)
    if (vs[i].info.name == n) return static_cast<int>(i);
  return -1;
}

void print_table(const std::string& title, const std::vector<Row>& rows,
                 std::span<const act::Variant> vs = act::variants()) {
  std::printf("\n### %s\n\n| tokens | d |", title.c_str());
  for (const auto& v : vs) std::printf(" %s |", std::string(v.info.name).c_str());
  std::printf(" auto → |\n|---:|---:|");
  for (std::size_t i = 0; i < vs.size(); ++i) std::printf("---|");
  std::printf("---|\n");
  for (const Row& r : rows) {
    std::printf("| %lld | %lld |", static_cast<long long>(r.tokens), static_cast<long long>(r.d));
    double best = 1e30;
    for (const Cell& c : r.cells)
      if (c.error.empty() && c.ok) best = std::min(best, c.us);
    for (const Cell& c : r.cells) {
      const bool is_best = c.error.empty() && c.ok && c.us == best;
      std::printf(is_best ? " **%s** |" : " %s |", fmt_cell(c).c_str());
    }
    std::printf(" %s |\n", r.auto_pick.c_str());
  }
}

const Cell* find_cell(const std::vector<Row>& rows, std::int64_t t, std::int64_t d, std::string_view v) {
  const int vi = variant_index(v);
  for (const Row& r : rows)
    if (r.tokens == t && r.d == d && vi >= 0) return &r.cells[vi];
  return nullptr;
}

const Cell* auto_cell(const std::vector<Row>& rows, std::int64_t t, std::int64_t d) {
  for (const Row& r : rows)
    if (r.tokens == t && r.d == d) return find_cell(rows, t, d, r.auto_pick);
  return nullptr;
}

}  // namespace

int main() {
  try {
    if (cuda_device_count() == 0) {
      std::fprintf(stderr, "bench_act: no CUDA device\n");
      return 3;
    }
    const DeviceProps dp = device_props();
    g_copy_gbps = measured_copy_bandwidth_gbps();
    const auto vs = act::variants();

    std::vector<Row> bf16_silu;
    std::uint64_t seed = 1;
    for (std::int64_t d : {4096, 14336, 18432})
      for (std::int64_t t : kTokens) bf16_silu.push_back(measure(DType::bf16, Activation::silu, t, d, ++seed));
    std::vector<Row> f16_silu, f32_silu, bf16_gelu, bf16_gelu_tanh;
    for (std::int64_t t : kTokens) f16_silu.push_back(measure(DType::f16, Activation::silu, t, 14336, ++seed));
    for (std::int64_t t : kTokens) f32_silu.push_back(measure(DType::f32, Activation::silu, t, 14336, ++seed));
    for (std::int64_t t : kTokens) bf16_gelu.push_back(measure(DType::bf16, Activation::gelu, t, 14336, ++seed));
    for (std::int64_t t : kTokens)
      bf16_gelu_tanh.push_back(measure(DType::bf16, Activation::gelu_tanh, t, 14336, ++seed));

    std::printf("# act-and-mul benchmark\n\n");
    std::printf("Generated by `bench_act` (bench/act_and_mul/bench_act.cpp); do not edit by hand.\n\n");
    std::printf("- Device: %s, %d SMs, L2 %.0f MiB, compute capability %d.%d, driver %d, runtime %d\n",
                dp.name.c_str(), dp.sm_count, static_cast<double>(dp.l2_bytes) / (1 << 20), dp.cc_major,
                dp.cc_minor, dp.driver_version, dp.runtime_version);
    std::printf("- Measured device copy bandwidth (cudaMemcpy D2D 512 MiB, read + write): **%.0f GB/s**\n",
                g_copy_gbps);
    std::printf(
        "- Cells: median µs per launch (CUDA-graph replay of 20 launches, 100 samples; 5 launches x 30 samples "
        "above 256 MB), GB/s = (input read once + output written once) / time, and %% of the copy bandwidth. "
        "Inputs below 2x L2 rotate through copies so the rotation exceeds L2. Bold: fastest. `auto →`: what "
        "`auto` picks. FAIL: output differs from the CPU reference on sampled rows.\n");
    std::printf("- Variants:");
    for (const auto& v : vs) std::printf(" `%s`", std::string(v.info.name).c_str());
    std::printf(" (see docs/act-and-mul.md).\n");

    std::printf("\n## Targets and reference points (bf16, silu)\n\n");
    std::printf("| shape (tokens x d) | FlashInfer | torch.compile | vectorized (seed) | auto | auto vs FlashInfer |\n");
    std::printf("|---|---|---|---|---|---|\n");
    struct RefPoint {
      std::int64_t t, d;
      const char* fi;
      const char* tc;
      double fi_us, fi_tbs;
    };
    const RefPoint refs[] = {{1, 4096, "1.85 µs", "1.32 µs", 1.85, 0},
                             {1, 14336, "4.33 µs", "", 4.33, 0},
                             {16384, 4096, "3.07 TB/s", "3.02 TB/s", 0, 3.07},
                             {16384, 14336, "2.27 TB/s", "", 0, 2.27},
                             {16384, 18432, "2.51 TB/s", "", 0, 2.51}};
    for (const RefPoint& r : refs) {
      const Cell* a = auto_cell(bf16_silu, r.t, r.d);
      const Cell* s = find_cell(bf16_silu, r.t, r.d, "vectorized");
      std::string ratio;
      if (a && a->error.empty()) {
        ratio = r.fi_us > 0 ? fmt::format("{:.2f}x faster", r.fi_us / a->us)
                            : fmt::format("{:.2f}x bandwidth", a->gbps / 1000.0 / r.fi_tbs);
      }
      std::printf("| %lld x %lld | %s | %s | %s | %s | %s |\n", static_cast<long long>(r.t),
                  static_cast<long long>(r.d), r.fi, r.tc, s ? fmt_cell(*s).c_str() : "", a ? fmt_cell(*a).c_str() : "",
                  ratio.c_str());
    }
    std::printf("\nFlashInfer and torch.compile numbers are the issue's (same H100 model, graph replay), not re-measured here.\n\n");
    std::printf("Targets (auto, bf16 silu):\n\n");
    for (std::int64_t d : {4096, 14336, 18432}) {
      double worst_tbs = 1e30;
      for (std::int64_t t : {4096, 16384}) {
        const Cell* a = auto_cell(bf16_silu, t, d);
        if (a && a->error.empty()) worst_tbs = std::min(worst_tbs, a->gbps / 1000.0);
      }
      const Cell* one = auto_cell(bf16_silu, 1, d);
      const double one_us = one && one->error.empty() ? one->us : 1e30;
      std::printf("- d = %lld: >= 4096 tokens at least %.2f TB/s (target 2.9: %s); 1 token %.2f µs (target 1.3: %s)\n",
                  static_cast<long long>(d), worst_tbs, worst_tbs >= 2.9 ? "met" : "missed", one_us,
                  one_us <= 1.3 ? "met" : "missed");
    }

    std::printf("\n## Every variant\n");
    std::vector<Row> by_d[3];
    for (const Row& r : bf16_silu) by_d[r.d == 4096 ? 0 : r.d == 14336 ? 1 : 2].push_back(r);
    print_table("bf16, silu, d = 4096", by_d[0]);
    print_table("bf16, silu, d = 14336", by_d[1]);
    print_table("bf16, silu, d = 18432", by_d[2]);
    print_table("f16, silu, d = 14336", f16_silu);
    print_table("f32, silu, d = 14336", f32_silu);
    print_table("bf16, gelu, d = 14336", bf16_gelu);
    print_table("bf16, gelu-tanh, d = 14336", bf16_gelu_tanh);

    // Tuning candidates of the flat grid (not variants), bf16 silu.
    std::vector<Row> tune;
    for (std::int64_t d : {4096, 14336, 18432})
      for (std::int64_t t : {1, 16, 128, 1024, 4096, 16384})
        tune.push_back(measure(DType::bf16, Activation::silu, t, d, ++seed, act::tuning_variants()));
    std::printf("\n## Tuning candidates of the flat grid (bf16, silu; not variants)\n\n");
    std::printf("`nN-uU-bB-pP`: N elements per vector, U vectors per thread, B threads per block, grid capped at P "
                "blocks per SM with grid-stride (0: one block per chunk). `flat` is n8-u1-b256-p0, `spread` "
                "n2-u1-b128-p0.\n");
    print_table("flat grid configurations", tune, act::tuning_variants());
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_act: %s\n", e.what());
    return 3;
  }
}
