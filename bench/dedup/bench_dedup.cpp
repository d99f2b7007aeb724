// Benchmark of the dedup variants: one JSON record per (shape, variant) cell
// (bench/common/record.hpp); bench/render.py turns them into docs/bench/dedup.md.
//
//   bench_dedup --json bench/results/dedup.jsonl   (make bench; stdout without --json)
//
// Timings are medians of CUDA-graph replays (moekit::time_launches); every timed
// configuration's output is also checked once against the CPU reference, so a
// fast-but-wrong kernel gets status "fail" (rendered "wrong").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "dedup/buffers.hpp"
#include "dedup/dedup.hpp"
#include "dedup/reference.hpp"
#include "record.hpp"
#include "timing.hpp"
#include "dedup_tuning.hpp"

namespace dd = moekit::dedup;
using moekit::WorkspaceNeed;

namespace {

enum class Values { kUniform, kRealistic };

// (a) uniform in [0, 2^31) (the distribution of the original timing script); (b) top-k-like rows:
// distinct values < 131072 per row, each row sharing 80% of the previous row.
std::vector<std::int32_t> generate(Values kind, int bs, int m, int k, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> v(std::size_t(bs) * m * k);
  if (kind == Values::kUniform) {
    for (auto& x : v) x = static_cast<std::int32_t>(rng() & 0x7fffffffu);
    return v;
  }
  constexpr std::uint32_t kRange = 131072;
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  for (int b = 0; b < bs; ++b) {
    std::int32_t* row = v.data() + std::size_t(b) * m * k;
    const std::uint32_t a = static_cast<std::uint32_t>(rng()) | 1u, c = static_cast<std::uint32_t>(rng());
    for (int i = 0; i < k; ++i) row[i] = static_cast<std::int32_t>((std::uint32_t(i) * a + c) % kRange);
    std::shuffle(row, row + k, rng);
    for (int r = 1; r < m; ++r) {
      std::int32_t* cur = row + std::size_t(r) * k;
      std::copy(cur - k, cur, cur);
      std::shuffle(cur, cur + k, rng);
      for (int i = 0; i < k; ++i)
        if (u01(rng) >= 0.8) cur[i] = static_cast<std::int32_t>(rng() % kRange);
    }
  }
  return v;
}

struct Bench {
  dd::Problem p;
  std::vector<std::int32_t> host;
  std::vector<std::int32_t> ref;
  std::optional<dd::DeviceBuffers> d;  // the rows in rotated copies, the output; a workspace per variant

  Bench(Values kind, int bs, int m, int k) {
    p.batch = bs;
    p.mtp_step = m;
    p.k = k;
    p.max_index = kind == Values::kRealistic ? 131072 : -1;
    host = generate(kind, bs, m, k, 42 + std::uint64_t(bs) * 131 + std::uint64_t(m) * 7 + std::uint64_t(k));
    ref = dd::reference(p, host);
    d.emplace(p, host, WorkspaceNeed{}, moekit::SetOptions::run(moekit::rotation_copies(host.size() * 4, false)));
  }

  // Checks the output once (unless verify is false), then times the launches (without PDL).
  moekit::bench::Measurement time(moekit::LaunchStatus (*launch)(const dd::Problem&, const dd::Buffers&,
                                                                 moekit::Stream, bool pdl),
                                  WorkspaceNeed ws, bool verify = true) {
    bool ok = true;
    try {
      d->replace_workspace(ws);
      d->poison();
      moekit::cuda_check(launch(p, d->buffers(0), moekit::process_stream(), false), "dedup launch");
      moekit::cuda_sync("dedup kernel");
      std::vector<std::int32_t> got;
      (void)d->download(got);  // no guards in a run's set
      ok = !verify || dd::check(p, ref, got).ok;
    } catch (const std::exception& e) {
      moekit::bench::Measurement m;
      m.status = "error";
      m.reason = e.what();
      return m;
    }
    moekit::bench::Measurement m = moekit::bench::measure(
        [&](moekit::Stream s, int copy) { moekit::cuda_check(launch(p, d->buffers(copy), s, false), "dedup launch"); },
        d->copies(), moekit::TimingOptions{});
    if (m.status == "ok" && !ok) m.status = "fail";
    return m;
  }

  moekit::bench::Measurement time(const dd::Variant& v) {
    const moekit::DeviceCaps& caps = moekit::device_caps();
    if (const char* why = v.not_applicable(p, caps)) {
      moekit::bench::Measurement m;
      m.status = "n/a";
      m.reason = why;
      return m;
    }
    return time(v.launch, WorkspaceNeed::of(v, p, caps));
  }

  moekit::bench::Fields params(Values kind) const {
    return {{"bs", p.batch},
            {"M", p.mtp_step},
            {"k", p.k},
            {"values", kind == Values::kUniform ? "uniform" : "realistic"}};
  }
};

const char* kind_name(Values v) {
  return v == Values::kUniform ? "(a) uniform values in [0, 2^31)"
                               : "(b) realistic rows: values < 131072, consecutive rows share 80%";
}

void write(moekit::bench::Writer& w, std::string table, std::string variant, moekit::bench::Fields params,
           moekit::bench::Measurement m) {
  if (m.status == "error") std::fprintf(stderr, "bench_dedup: %s: %s\n", variant.c_str(), m.reason.c_str());
  moekit::bench::Record r{std::move(table), std::move(variant), std::move(params), std::move(m), {}};
  r.dtype = "int32";
  w.write(r);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string json = moekit::bench::take_json_arg(argc, argv);
  if (moekit::cuda_device_count() == 0) {
    std::fputs("bench_dedup: no CUDA device\n", stderr);
    return 77;
  }
  moekit::bench::Writer w("bench_dedup", "dedup", json);
  const auto vs = dd::registry().variants();
  for (Values kind : {Values::kUniform, Values::kRealistic}) {
    const std::string table = fmt::format("bs=115, k=2048, M = 1..4 — {}", kind_name(kind));
    std::vector<Bench> benches;
    for (int m = 1; m <= 4; ++m) benches.emplace_back(kind, 115, m, 2048);
    for (const auto& v : vs)
      for (auto& b : benches) write(w, table, std::string(v.info.name), b.params(kind), b.time(v));
  }
  for (Values kind : {Values::kUniform, Values::kRealistic}) {
    const std::string table = fmt::format("M=2, k=2048, bs sweep — {}", kind_name(kind));
    std::vector<Bench> benches;
    for (int bs : {1, 8, 32, 256}) benches.emplace_back(kind, bs, 2, 2048);
    for (const auto& v : vs)
      for (auto& b : benches) write(w, table, std::string(v.info.name), b.params(kind), b.time(v));
  }
  // Tuning configurations (bench/tune/dedup_tuning.cu): tile = row length built for.
  {
    std::vector<Bench> uni, real;
    for (int m : {1, 2, 4}) {
      uni.emplace_back(Values::kUniform, 115, m, 2048);
      real.emplace_back(Values::kRealistic, 115, m, 2048);
    }
    for (const auto& c : dd::tune::configs()) {
      const std::size_t idx = c.tile == 2048 ? 0 : c.tile == 4096 ? 1 : 2;
      for (auto* set : {&uni, &real}) {
        Bench& b = (*set)[idx];
        auto params = b.params(set == &uni ? Values::kUniform : Values::kRealistic);
        params.emplace_back("tile", c.tile);
        write(w, "tuning", c.name, std::move(params), b.time(c.launch, WorkspaceNeed{}, c.checks));
      }
    }
  }
  w.finish();
  return 0;
}
