// probe_align onepass: `onepass` over threads x loads per thread x grid,
// with and without the cooperative attribute (what the attribute costs: the
// grid fits one wave either way), next to tiny, twopass and auto.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/onepass.cuh"
#include "common/device.hpp"
#include "primitives/launch.cuh"

namespace moekit::align_probe {

namespace {

// onepass with `threads` x `loads` and the fitted grid (grid 0) or `grid`
// clamped to [blocks the slots need, one wave]; loads == 0 when that shape
// does not hold the slots in one wave.
ad::OnePassPlan onepass_plan_at(const align::Problem& p, int threads, int loads, int grid = 0) {
  const DeviceCaps& caps = device_caps();
  const align::Policy& pol = align::policy_for(caps);
  const std::int64_t sms = std::int64_t{pol.onepass_blocks_per_sm} * caps.sm_count;
  const std::int64_t need = ceil_div<std::int64_t>(std::max<std::int64_t>(p.numel, 1),
                                                   std::int64_t{threads} * loads * ad::kVec<std::int32_t>);
  if (ad::onepass_smem(p.num_experts) > caps.smem_optin || need > sms) return ad::OnePassPlan{};
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const std::int64_t pad =
      std::min(ceil_div<std::int64_t>(rows, std::int64_t{threads} * pol.onepass_pad_rows_per_thread), sms);
  return ad::onepass_plan_of(p, threads, loads,
                             grid > 0 ? std::clamp<std::int64_t>(grid, need, sms) : std::max(need, pad));
}

// launch_onepass, optionally without the cooperative attribute (to measure
// what the attribute costs; the grid fits one wave either way).
cudaError_t launch_onepass_as(const Setup& su, int copy, cudaStream_t s, const ad::OnePassPlan& pl,
                              bool cooperative) {
  if (cooperative) return ad::launch_onepass<std::int32_t>(su.p, su.buffers(copy), s, su.pdl, pl);
  const ad::Args a = ad::make_args(su.p, su.buffers(copy));
  unsigned* ws = static_cast<unsigned*>(su.buffers(copy).workspace);
  const auto go = [&](auto kernel) {
    return prim::launch_with_smem(kernel, dim3(pl.grid), dim3(pl.threads), pl.smem, s, prim::LaunchAttrs{}, a, ws,
                                  pl.chunk);
  };
  switch (pl.loads) {
    case 1: return go(ad::onepass_kernel<std::int32_t, 1>);
    case 2: return go(ad::onepass_kernel<std::int32_t, 2>);
    default: return go(ad::onepass_kernel<std::int32_t, 4>);
  }
}

}  // namespace

int onepass_mode(const char*) {
  std::mt19937_64 rng(12);
  const std::vector<Shape> shapes = {{8, 2, false},   {64, 8, false},  {128, 8, false},
                                     {256, 8, false}, {512, 8, false}, {256, 8, true},
                                     {1024, 8, false}, {4096, 8, false}, {16384, 8, false}};
  std::vector<int> tokens = {16, 64, 256, 1024, 2048, 4096, 16384, 65536};
  token_filter(tokens);
  spin_ms(20);
  std::printf("| E, topk, ids | tokens | default (thr, K, grid) | not coop | best (thr, K, grid) | "
              "tiny | twopass | auto | all (thr/K/grid: us) |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (const Shape& sh : shapes)
    for (int tok : tokens) {
      Setup su(sh, tok, rng);
      const auto time_plan = [&](const ad::OnePassPlan& pl, bool coop) {
        const auto f = [&su, pl, coop](cudaStream_t s, int c) {
          launch_onepass_as(su, c, s, pl, coop);
        };
        return su.verify(f) ? bench_like(f, su.copies) : 1e9;
      };
      const ad::OnePassPlan def = ad::onepass_plan<std::int32_t>(su.p, device_caps());
      if (def.loads == 0) continue;
      const double t_def = time_plan(def, true);
      const double t_nc = time_plan(def, false);
      double best = t_def;
      ad::OnePassPlan bp = def;
      std::string all;
      for (int thr : {128, 256, 512, 1024})
        for (int k : {1, 2, 4})
          for (int gm : {1, 2}) {
            ad::OnePassPlan pl = onepass_plan_at(su.p, thr, k);
            if (pl.loads == 0) continue;
            if (gm == 2) {
              if (2 * pl.grid > device_caps().sm_count) continue;
              pl = onepass_plan_at(su.p, thr, k, 2 * pl.grid);
            }
            const double us = time_plan(pl, true);
            char buf[64];
            std::snprintf(buf, sizeof buf, " %d/%d/%d: %.2f", pl.threads, pl.loads, pl.grid, us);
            all += buf;
            if (us < best) {
              best = us;
              bp = pl;
            }
          }
      double other[3];
      const char* names[3] = {"tiny", "twopass", "auto"};
      for (int k = 0; k < 3; ++k) {
        const align::Variant* v = align::registry().find(names[k]);
        other[k] = v->not_applicable(su.p, moekit::device_caps()) ? 0
                   : su.verify(variant_launch(su, names[k]))
                       ? bench_like(variant_launch(su, names[k]), su.copies)
                       : 1e9;
      }
      std::printf("| %d, %d, %s | %d | %.2f (%d, %d, %d) | %.2f | %.2f (%d, %d, %d) | %.2f | %.2f "
                  "| %.2f |%s |\n",
                  sh.E, sh.topk, sh.zipf ? "zipf" : "uniform", tok, t_def, def.threads, def.loads,
                  def.grid, t_nc, best, bp.threads, bp.loads, bp.grid, other[0], other[1],
                  other[2], all.c_str());
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace moekit::align_probe
