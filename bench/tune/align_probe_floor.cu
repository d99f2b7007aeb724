// probe_align floor: per issue-#12 cell, PDL off / on, what any one-launch
// align pays at least: an empty kernel, one id loaded -> one row stored, a
// one-launch kernel that loads every id and writes every row (counting and
// layout free) and a warp-local one in micro's shape, next to micro and auto.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/micro.cuh"
#include "common/device.hpp"
#include "primitives/launch.cuh"
#include "primitives/pdl.cuh"

namespace moekit::align_probe {

namespace {

// ---- floor: what any one-launch align pays at least, with the product's
// PDL placement (wait, then trigger), next to `auto`.
__global__ void floor_empty_kernel() {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
}
// The shortest dependent chain: one id loaded, one row stored.
__global__ void floor_chain_kernel(const int* ids, int* out) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  if (threadIdx.x == 0) out[0] = ids[0] + 1;
}
// Every id loaded once, every row of sorted_token_ids and every expert_ids
// entry written once (16-byte stores issued while the ids load), one barrier,
// then one store per id at a row that depends on its value: a one-launch
// align whose counting and layout cost nothing. numel <= 4 x the grid's threads.
__global__ void floor_fill_kernel(const int* ids, int n, int* sorted, int rows, int* eids, int nblocks) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  const int gi = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int gn = static_cast<int>(gridDim.x * blockDim.x);
  int id[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) id[k] = gi + k * gn < n ? __ldg(ids + gi + k * gn) : -1;
  int4* q = reinterpret_cast<int4*>(sorted);
#pragma unroll 1
  for (int j = gi; j < rows / 4; j += gn) q[j] = make_int4(n, n, n, n);
  if (gi < (rows & 3)) sorted[rows / 4 * 4 + gi] = n;
#pragma unroll 1
  for (int j = gi; j < nblocks; j += gn) eids[j] = -1;
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int i = gi + k * gn, row = i + (id[k] & 1);
    if (id[k] >= 0 && row < rows) sorted[row] = i;
  }
}

// The same memory work without a block barrier, in micro's launch shape and
// with micro's own slice and fill (`chunk` rows per block of 128 threads):
// each warp fills its slice while its lanes load up to 32 ids, then
// __syncwarp and one dependent store per id.
__global__ void __launch_bounds__(128) floor_warp_kernel(ad::Args a, int chunk) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  const int lane = static_cast<int>(threadIdx.x) & 31, w = static_cast<int>(threadIdx.x) >> 5;
  const int id = lane < a.numel ? __ldg(static_cast<const int*>(a.ids) + lane) : -1;
  const ad::MicroSlice sl = ad::micro_slice<4>(a, ad::make_divb<true>(a.block_size), chunk, w);
  ad::micro_fill(a, sl, lane);
  __syncwarp();
  const int row = lane + (id & 1);
  if (id >= 0 && row >= sl.r0 && row < sl.r1) a.sorted[row] = lane;
}

}  // namespace

int floor_mode(const char*) {
  std::mt19937_64 rng(23);
  spin_ms(20);
  const int sms = std::max(device_caps().sm_count, 1);
  std::printf("| E, topk, B | tokens | PDL | empty | load -> store | one-launch floor (grid) | warp-local floor, "
              "micro's shape (grid) | micro | auto |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Cell& c : issue_cells()) {
    if (!token_in_range(c.tokens)) continue;
    Setup su(c.sh, c.tokens, rng, c.block);
    const int n = static_cast<int>(su.p.numel), rows = static_cast<int>(su.p.max_num_tokens_padded);
    const int nb = static_cast<int>(su.p.max_num_blocks);
    for (bool pdl : {false, true}) {
      su.pdl = pdl;
      const prim::LaunchAttrs at{pdl, false};
      const double t_empty = bench_like(
          [&](cudaStream_t s, int) { prim::launch_ex(floor_empty_kernel, dim3(1), dim3(32), 0, s, at); }, 1);
      const double t_chain = bench_like(
          [&](cudaStream_t s, int k) {
            prim::launch_ex(floor_chain_kernel, dim3(1), dim3(32), 0, s, at,
                            static_cast<const int*>(su.buffers(k).topk_ids), su.buffers(k).sorted_token_ids);
          },
          su.copies);
      const int need = std::max(1, (n + 1023) / 1024);
      const int g_one = std::max(need, std::min(sms, (rows + 1023) / 1024));
      double t_fill = 1e9;
      int g_best = 0;
      for (int g : {g_one, std::max(need, g_one / 4)}) {
        const double us = bench_like(
            [&](cudaStream_t s, int k) {
              const align::Buffers b = su.buffers(k);
              prim::launch_ex(floor_fill_kernel, dim3(g), dim3(256), 0, s, at, static_cast<const int*>(b.topk_ids), n,
                              b.sorted_token_ids, rows, b.expert_ids, nb);
            },
            su.copies);
        if (us < t_fill) t_fill = us, g_best = g;
      }
      // Warp-local floor where micro's one-warp layout applies (<= 32 slots).
      double t_warp = 0;
      int g_warp = 0;
      if (n <= 32) {
        const int chunk = ad::micro_chunk(su.p, device_caps());
        g_warp = (rows + chunk - 1) / chunk;
        t_warp = bench_like(
            [&](cudaStream_t s, int k) {
              prim::launch_ex(floor_warp_kernel, dim3(g_warp), dim3(128), 0, s, at, ad::make_args(su.p, su.buffers(k)),
                              chunk);
            },
            su.copies);
      }
      std::printf("| %d, %d, %d | %d | %s | %.2f | %.2f | %.2f (%d) | %.2f (%d) | %.2f | %.2f |\n", c.sh.E, c.sh.topk,
                  c.block, c.tokens, pdl ? "on" : "off", t_empty, t_chain, t_fill, g_best, t_warp, g_warp,
                  time_product(su, "micro"), time_product(su, "auto"));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace moekit::align_probe
