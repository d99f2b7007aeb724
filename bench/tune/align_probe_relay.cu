// probe_align relay: `relay` (the product launch: cooperative, policy shape)
// against plain launches of its kernel over threads x fill rows per thread,
// next to tiny and auto.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/relay.cuh"
#include "common/device.hpp"

namespace moekit::align_probe {

int relay_mode(const char*) {
  std::mt19937_64 rng(14);
  spin_ms(20);
  const DeviceCaps& caps = device_caps();
  std::printf("| E, topk | tokens | tiny | relay | auto | 256/4 | 256/16 | 512/4 | 1024/4 | 1024/1 |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Shape& sh : {Shape{8, 2, false}, Shape{64, 8, false}, Shape{256, 8, false}, Shape{512, 8, false}})
    for (int tok : {1, 16, 64, 256}) {
      Setup su(sh, tok, rng);
      const auto run = [&](auto kernel, int threads, int rpt) {
        const std::int64_t rows = std::max<std::int64_t>(su.p.max_num_tokens_padded, 1);
        const std::int64_t fills = std::min<std::int64_t>(ceil_div<std::int64_t>(rows, std::int64_t{threads} * rpt),
                                                          caps.sm_count - 1);
        const int chunk = static_cast<int>(ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, fills), 4) * 4);
        const int grid = static_cast<int>(ceil_div<std::int64_t>(rows, chunk)) + 1;
        const std::size_t smem = ad::expert_table_smem(su.p.num_experts);
        const auto f = [&su, kernel, threads, chunk, grid, smem](cudaStream_t s, int c) {
          const align::Buffers b = su.buffers(c);
          kernel<<<grid, threads, smem, s>>>(ad::make_args(su.p, b), static_cast<unsigned*>(b.workspace), chunk);
        };
        return su.numel_ok(threads) && su.verify(f) ? bench_like(f, su.copies) : 1e9;
      };
      const auto prod = [&](const char* v) { return time_product(su, v); };
      std::printf("| %d, %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", sh.E, sh.topk, tok,
                  prod("tiny"), prod("relay"), prod("auto"), run(ad::relay_kernel<std::int32_t, 256>, 256, 4),
                  run(ad::relay_kernel<std::int32_t, 256>, 256, 16), run(ad::relay_kernel<std::int32_t, 512>, 512, 4),
                  run(ad::relay_kernel<std::int32_t, 1024>, 1024, 4), run(ad::relay_kernel<std::int32_t, 1024>, 1024, 1));
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace moekit::align_probe
