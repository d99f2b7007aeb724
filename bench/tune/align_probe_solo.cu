// probe_align solo / solo1: `solo`'s block size and where its time goes.
// solo: 256-1024 threads, next to micro, tiny, relay and onepass; solo1:
// copies of solo at one slot per thread (E <= 128) with parts changed or
// removed.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/solo.cuh"
#include "common/device.hpp"
#include "primitives/launch.cuh"
#include "primitives/lane_mask.cuh"

namespace moekit::align_probe {

namespace {

// ---- solo1: copies of `solo` at one slot per thread (<= 1024 slots, E <=
// 128: the in-warp scan) with parts removed, to see where its time over the
// memory-only kernels goes. kMode 0: the product's code; 1: no padding fill
// (rows and expert_ids left as they were: wrong); 2: no ranks (every slot
// rank 0: wrong); 3: no scan (first block = expert: wrong); 4: no barrier
// after the zeroing (the counters are zeroed before the wait: racy in
// principle, timing only); 5: the counts by one warp-aggregated atomic per
// distinct expert of a warp (__match_any_sync), else the product; 6: the
// padding fill after the ranking atomics (before the second barrier); 8: the
// fill before the id load; 9: first blocks from bit-sliced ballots of the
// block counts (micro's way) instead of the shuffle scan.
template <int kThreads, int kP, int kMode>
__global__ void __launch_bounds__(kThreads) solo1_kernel(ad::Args a) {
  extern __shared__ int cs[];
  const int t = static_cast<int>(threadIdx.x);
  const int E = a.num_experts;
#pragma unroll 1
  for (int e = t; e < E; e += kThreads) cs[e] = 0;
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  const auto fill = [&] {
    ad::fill_range(a.sorted, 0, a.max_padded, a.numel, t, kThreads);
#pragma unroll 1
    for (int j = t; j < a.max_blocks; j += kThreads) a.eids[j] = -1;
  };
  if constexpr (kMode == 8) fill();
  int ev[1];
  ad::load_experts_strided<int>(a, t, kThreads, ev);
  if constexpr (kMode != 1 && kMode != 6 && kMode != 8) fill();
  if constexpr (kMode != 4) __syncthreads();
  int rk[1] = {0};
  if constexpr (kMode == 5) {
    const unsigned peers = __match_any_sync(0xffffffffu, ev[0]);
    const int lead = __ffs(peers) - 1;
    int base = 0;
    if ((t & 31) == lead && ev[0] >= 0) base = atomicAdd(cs + ev[0], __popc(peers));
    base = __shfl_sync(0xffffffffu, base, lead);
    rk[0] = base + __popc(peers & prim::lanemask_lt());
  } else if constexpr (kMode != 2) {
    rk[0] = ev[0] >= 0 ? atomicAdd(cs + ev[0], 1) : 0;
  } else {
    if (ev[0] >= 0) cs[ev[0]] = 1;
  }
  if constexpr (kMode == 6) fill();
  __syncthreads();
  const ad::DivB<true> db = ad::make_divb<true>(a.block_size);
  int fb[1], blocks;
  if constexpr (kMode == 3) {
    fb[0] = max(ev[0], 0);
    blocks = E;
  } else if constexpr (kMode == 9) {
    // Lane l holds experts l * kP + j; bit b of their block counts as kP
    // ballots; my expert's first block sums the bits of the experts below it.
    const int lane = t & 31;
    int nb[kP];
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int e = lane * kP + j;
      nb[j] = e < E ? db.div_up(cs[e]) : 0;
    }
    const int me = max(ev[0], 0), ml = me / kP, mj = me % kP;
    const unsigned lower = (1u << ml) - 1u;  // ml < 32
    const int most = db.div_up(a.numel);
    int f = 0, tb = 0;
#pragma unroll 2
    for (int bit = 0; (1 << bit) <= most; ++bit) {
      int fs = 0, ts = 0;
#pragma unroll
      for (int j = 0; j < kP; ++j) {
        const unsigned m = __ballot_sync(0xffffffffu, (nb[j] >> bit) & 1);
        ts += __popc(m);
        fs += __popc(m & lower) + (j < mj ? static_cast<int>((m >> ml) & 1u) : 0);
      }
      f += fs << bit;
      tb += ts << bit;
    }
    fb[0] = f;
    blocks = tb;
  } else {
    blocks = ad::warp_scan_block_counts<kP>(cs, E, db, ev, fb);
  }
  if (t == 0) *a.total = blocks * db.B;
  if (ev[0] < 0) return;
  const int row = fb[0] * db.B + rk[0];
  if (row < a.max_padded) a.sorted[row] = t;
  if ((rk[0] & (db.B - 1)) == 0) a.eids[db.div(row)] = ev[0];
}

template <int kThreads, int kP, int kMode>
cudaError_t launch_solo1(const Setup& su, int c, cudaStream_t s) {
  const ad::Args a = ad::make_args(su.p, su.buffers(c));
  return prim::launch_with_smem(solo1_kernel<kThreads, kP, kMode>, dim3(1), dim3(kThreads),
                                ad::expert_table_smem(su.p.num_experts), s, prim::pdl_attrs(su.pdl), a);
}

template <int kThreads, int kP>
void solo1_row(Setup& su, const Cell& c, bool pdl) {
  const auto timed = [&](auto launch, bool check) { return time_copy(su, launch, check); };
  std::printf("| %d, %d, %d | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n",
              c.sh.E, c.sh.topk, c.block,
              c.tokens, pdl ? "on" : "off", time_product(su, "solo"), timed(launch_solo1<kThreads, kP, 0>, true),
              timed(launch_solo1<kThreads, kP, 1>, false), timed(launch_solo1<kThreads, kP, 2>, false),
              timed(launch_solo1<kThreads, kP, 3>, false), timed(launch_solo1<kThreads, kP, 4>, false),
              timed(launch_solo1<kThreads, kP, 5>, true), timed(launch_solo1<kThreads, kP, 6>, true),
              timed(launch_solo1<kThreads, kP, 8>, true), timed(launch_solo1<kThreads, kP, 9>, true));
  std::fflush(stdout);
}

}  // namespace

// `solo` at 256-1024 threads, next to the product's micro, tiny, relay, solo
// and onepass.
int solo_mode(const char*) {
  std::mt19937_64 rng(15);
  spin_ms(20);
  std::printf("| E, topk | tokens | micro | tiny | relay | solo | 256 | 512 | 1024 | onepass |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  struct Row {
    Shape sh;
    int tokens;
  };
  for (const Row& r : {Row{{8, 2, false}, 1}, Row{{64, 8, false}, 1}, Row{{256, 8, false}, 1},
                       Row{{8, 2, false}, 16}, Row{{64, 8, false}, 16}, Row{{128, 8, false}, 16},
                       Row{{256, 8, false}, 16}, Row{{512, 8, false}, 16}, Row{{8, 2, false}, 64},
                       Row{{64, 8, false}, 64}, Row{{128, 8, false}, 64}, Row{{256, 8, false}, 64},
                       Row{{512, 8, false}, 64}, Row{{8, 2, false}, 256}, Row{{64, 8, false}, 128},
                       Row{{256, 8, false}, 128}, Row{{64, 8, false}, 256}, Row{{256, 8, false}, 256},
                       Row{{8, 2, false}, 1024}, Row{{8, 2, false}, 2048}, Row{{8, 2, false}, 4096},
                       Row{{16, 4, false}, 1024}, Row{{16, 4, false}, 2048}, Row{{32, 4, false}, 1024},
                       Row{{64, 8, false}, 512}, Row{{64, 8, false}, 1024}}) {
    if (!token_in_range(r.tokens)) continue;
    Setup su(r.sh, r.tokens, rng);
    const auto prod = [&](const char* v) { return time_product(su, v); };
    const auto at = [&](int threads) {
      ad::SoloPlan pl = ad::solo_plan(su.p, device_caps(), su.pdl);
      if (pl.threads == 0 || (pl.per_thread > 1 && threads != 1024)) return 1e9;
      if (threads < pl.threads) return 1e9;  // fewer threads than slots (or experts for the block scan)
      pl.threads = threads;
      const auto f = [&su, pl](cudaStream_t s, int c) { ad::launch_solo<std::int32_t>(su.p, su.buffers(c), s, su.pdl, pl); };
      return su.verify(f) ? bench_like(f, su.copies) : 1e9;
    };
    std::printf("| %d, %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.sh.E, r.sh.topk,
                r.tokens, prod("micro"), prod("tiny"), prod("relay"), prod("solo"), at(256), at(512), at(1024),
                prod("onepass"));
    std::fflush(stdout);
  }
  return 0;
}

int solo1_mode(const char*) {
  std::mt19937_64 rng(37);
  spin_ms(20);
  std::printf("| E, topk, B | tokens | PDL | solo (product) | copy | no fill (wrong) | no ranks (wrong) | no scan (wrong) "
              "| no zeroing barrier (racy) | match_any counts | fill after the atomics | fill before the load | bit-sliced "
              "starts |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Cell& c : {Cell{{128, 1, false}, 128, 16}, Cell{{128, 1, false}, 135, 16}, Cell{{8, 2, false}, 64, 128},
                        Cell{{8, 2, false}, 256, 128}, Cell{{64, 6, false}, 16, 64}, Cell{{64, 6, false}, 64, 64}}) {
    Setup su(c.sh, c.tokens, rng, c.block);
    for (bool pdl : {false, true}) {
      su.pdl = pdl;
      const int n = static_cast<int>(su.p.numel);
      if (c.sh.E <= 32) {
        if (n <= 256) solo1_row<256, 1>(su, c, pdl);
        else solo1_row<512, 1>(su, c, pdl);
      } else {
        if (n <= 256) solo1_row<256, 4>(su, c, pdl);
        else solo1_row<512, 4>(su, c, pdl);
      }
    }
  }
  return 0;
}

}  // namespace moekit::align_probe
