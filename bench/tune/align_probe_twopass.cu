// probe_align twopass: `twopass` over grid x counting warps per block, the
// fitted default (twopass_plan) against the best point.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/twopass.cuh"
#include "common/device.hpp"

namespace moekit::align_probe {

namespace {

// twopass with `grid` blocks and up to `rows` counting warps (the sweep's
// points; twopass_plan() is the fitted default).
ad::TwoPassPlan twopass_plan_at(const align::Problem& p, int grid, int rows) {
  return ad::twopass_plan_of<std::int32_t>(p, std::min(ad::twopass_rows(p.num_experts), rows), grid);
}

}  // namespace

int twopass_mode(const char*) {
  std::mt19937_64 rng(11);
  const std::vector<Shape> shapes = {{8, 2, false}, {64, 8, false}, {256, 8, false},
                                     {512, 8, false}};
  const std::vector<int> tokens = {1, 256, 1024, 4096, 16384, 65536};
  spin_ms(20);
  std::printf("| E, topk | tokens | default (grid, rows) | best (grid, rows) | all (grid/rows: us) |\n"
              "|---|---:|---:|---:|---|\n");
  for (const Shape& sh : shapes)
    for (int tok : tokens) {
      Setup su(sh, tok, rng);
      const auto time_plan = [&](const ad::TwoPassPlan& pl) {
        const auto f = [&su, pl](cudaStream_t s, int c) {
          ad::launch_twopass<std::int32_t>(su.p, su.buffers(c), s, su.pdl, pl);
        };
        return su.verify(f) ? bench_like(f, su.copies) : 1e9;
      };
      const ad::TwoPassPlan def = ad::twopass_plan<std::int32_t>(su.p, device_caps());
      const double t_def = time_plan(def);
      double best = t_def;
      ad::TwoPassPlan bp = def;
      std::string all;
      for (int g : {4, 8, 16, 32, 64, 128})
        for (int r : {8, 16, 32}) {
          const ad::TwoPassPlan pl = twopass_plan_at(su.p, g, r);
          if (static_cast<std::int64_t>(g) * sh.E > 65536) continue;
          const double us = time_plan(pl);
          char buf[64];
          std::snprintf(buf, sizeof buf, " %d/%d: %.2f", g, pl.rows, us);
          all += buf;
          if (us < best) {
            best = us;
            bp = pl;
          }
        }
      std::printf("| %d, %d | %d | %.2f (%d, %d) | %.2f (%d, %d) |%s |\n", sh.E, sh.topk, tok,
                  t_def, def.grid, def.rows, best, bp.grid, bp.rows, all.c_str());
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace moekit::align_probe
