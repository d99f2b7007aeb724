// probe_align sweep FILE.csv: which launch shape (grid x threads) suits
// `tiny` per bench shape. Every point goes to the CSV; the default plan
// (tiny_plan) and the best point per shape, next to fill-overlap, oneshot,
// twopass and auto, to stdout.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/tiny.cuh"
#include "common/device.hpp"

namespace moekit::align_probe {

namespace {

std::function<void(cudaStream_t, int)> tiny_launch(const Setup& su, ad::TinyPlan pl) {
  return [&su, pl](cudaStream_t s, int c) {
    ad::launch_tiny<std::int32_t>(su.p, su.buffers(c), s, su.pdl, pl);
  };
}

}  // namespace

int sweep_mode(const char* arg) {
  const char* csv_path = arg != nullptr ? arg : "sweep.csv";
  std::FILE* csv = std::fopen(csv_path, "w");
  if (!csv) return 1;
  std::fprintf(csv, "E,topk,dist,tokens,config,grid,threads,extra,us,ok\n");
  std::mt19937_64 rng(42);
  const std::vector<Shape> shapes = {{8, 2, false},   {64, 8, false},  {128, 8, false},
                                     {256, 8, false}, {512, 8, false}, {256, 8, true},
                                     {1024, 8, false}, {16384, 8, false}};
  std::vector<int> tokens = {1, 16, 64, 256, 1024, 2048, 4096};
  token_filter(tokens);
  const std::vector<int> grids = {1, 2, 4, 8, 16, 32, 64, std::max(device_caps().sm_count, 1)};
  const std::vector<int> threads = {256, 512, 1024};
  spin_ms(20);
  std::printf("| E, topk, ids | tokens | tiny default (grid, thr) | best tiny (grid, thr) | fill-overlap | oneshot | twopass | auto |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Shape& sh : shapes) {
    for (int tok : tokens) {
      if (sh.E == 16384 && tok > 1024) continue;
      Setup su(sh, tok, rng);
      if (ad::tiny_not_applicable(su.p, device_caps())) continue;
      const char* dist = sh.zipf ? "zipf" : "uniform";
      auto row = [&](const char* cfg, const std::function<void(cudaStream_t, int)>& f, int g,
                     int thr, const char* rk) {
        const bool ok = su.verify(f);
        const double us = bench_like(f, su.copies);
        std::fprintf(csv, "%d,%d,%s,%d,%s,%d,%d,%s,%.3f,%d\n", sh.E, sh.topk, dist, tok, cfg, g,
                     thr, rk, us, ok ? 1 : 0);
        return ok ? us : 1e9;
      };
      const ad::TinyPlan def = ad::tiny_plan(su.p, device_caps());
      const double t_def = row("tiny-default", tiny_launch(su, def), def.grid, def.threads, "");
      double best = 1e9;
      ad::TinyPlan bp;
      for (int g : grids)
        for (int thr : threads) {
          const ad::TinyPlan pl = ad::tiny_plan_with(su.p, g, thr);
          if (pl.grid < g / 2) continue;  // no more rows to split
          const double us = row("tiny", tiny_launch(su, pl), pl.grid, thr, "");
          if (us < best) {
            best = us;
            bp = pl;
          }
        }
      double other[4];
      const char* names[4] = {"fill-overlap", "oneshot", "twopass", "auto"};
      for (int k = 0; k < 4; ++k) {
        const align::Variant* v = align::registry().find(names[k]);
        other[k] = v->not_applicable(su.p, moekit::device_caps()) ? 0 : row(names[k], variant_launch(su, names[k]), 0, 0, "");
      }
      std::printf("| %d, %d, %s | %d | %.2f (%d, %d) | %.2f (%d, %d) | %.2f | %.2f | %.2f | %.2f |\n",
                  sh.E, sh.topk, dist, tok, t_def, def.grid, def.threads, best, bp.grid,
                  bp.threads, other[0], other[1], other[2], other[3]);
      std::fflush(stdout);
      std::fflush(csv);
    }
  }
  std::fclose(csv);
  return 0;
}

}  // namespace moekit::align_probe
