// probe_align stripe: `stripe` over rows per block (1024-8192) and at 512
// threads, next to micro, solo and tiny.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/stripe.cuh"
#include "common/device.hpp"

namespace moekit::align_probe {

int stripe_mode(const char*) {
  std::mt19937_64 rng(17);
  spin_ms(20);
  std::printf("| E, topk | tokens | micro | solo | tiny | stripe | grid | r1024 | r2048 | r4096 | r8192 | t512 |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  struct Row {
    Shape sh;
    int tokens;
  };
  for (const Row& r : {Row{{8, 2, false}, 64}, Row{{8, 2, false}, 256}, Row{{64, 8, false}, 4}, Row{{64, 8, false}, 16},
                       Row{{64, 8, false}, 64}, Row{{64, 8, false}, 128}, Row{{128, 8, false}, 4}, Row{{128, 8, false}, 16}, Row{{128, 8, false}, 64},
                       Row{{256, 8, false}, 4}, Row{{256, 8, false}, 16}, Row{{256, 8, false}, 64},
                       Row{{512, 8, false}, 16}, Row{{512, 8, false}, 64}, Row{{1024, 8, false}, 16},
                       Row{{4096, 8, false}, 16}, Row{{128, 1, false}, 128}, Row{{128, 1, false}, 512},
                       Row{{64, 6, false}, 64}, Row{{64, 6, false}, 128}, Row{{8, 2, false}, 512}}) {
    if (!token_in_range(r.tokens)) continue;
    Setup su(r.sh, r.tokens, rng);
    const auto prod = [&](const char* v) { return time_product(su, v); };
    const auto at = [&](int rows, int threads) {
      if (ad::stripe_not_applicable(su.p, device_caps()) != nullptr) return 1e9;
      ad::StripePlan pl = ad::stripe_plan_rows(su.p, device_caps(), rows);
      if (threads > 0) {
        if (threads < pl.threads) return 1e9;
        pl.threads = threads;
      }
      const auto f = [&su, pl](cudaStream_t s, int c) { ad::launch_stripe<std::int32_t>(su.p, su.buffers(c), s, su.pdl, pl); };
      return su.verify(f) ? bench_like(f, su.copies) : 1e9;
    };
    const int def_rows = align::policy_for(device_caps()).stripe_rows_per_block;
    std::printf("| %d, %d | %d | %.2f | %.2f | %.2f | %.2f | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.sh.E,
                r.sh.topk, r.tokens, prod("micro"), prod("solo"), prod("tiny"), prod("stripe"),
                ad::stripe_plan(su.p, device_caps()).grid, at(1024, 0), at(2048, 0), at(4096, 0), at(8192, 0),
                at(def_rows, 512));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace moekit::align_probe
