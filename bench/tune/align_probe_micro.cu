// probe_align micro / micro1: `micro`'s launch shape and where its time
// goes. micro: threads x rows per thread at 1-16 tokens, next to tiny and
// relay; micro1: copies of its one-warp path (<= 32 slots) with parts
// changed or removed.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/micro.cuh"
#include "common/device.hpp"
#include "primitives/launch.cuh"
#include "primitives/warp_peers.cuh"
#include "primitives/lane_mask.cuh"

namespace moekit::align_probe {

namespace {

// `micro` (1, 2 or 4 slots per lane by numel) with 64-512 threads per block
// and 4 or 8 rows per thread (the default is 256 threads x 1024 rows), next
// to `tiny` and `relay`.
template <int S>
double micro_at(Setup& su, int threads, int rows_per_thread) {
  const auto run = [&](auto kernel) {
    const int chunk = threads * rows_per_thread;
    const auto f = [&su, kernel, threads, chunk](cudaStream_t s, int c) {
      const std::int64_t rows = std::max<std::int64_t>(su.p.max_num_tokens_padded, 1);
      const int grid = static_cast<int>(ceil_div<std::int64_t>(rows, chunk));
      kernel<<<grid, threads, 0, s>>>(ad::make_args(su.p, su.buffers(c)), chunk);
    };
    return su.verify(f) ? bench_like(f, su.copies) : 1e9;
  };
  // With S > 1 a block needs a warp per column.
  switch (threads) {
    case 64:
      if constexpr (S <= 2) return run(ad::micro_kernel<std::int32_t, S, true, 64>);
      return 1e9;
    case 128:
      if constexpr (S <= 4) return run(ad::micro_kernel<std::int32_t, S, true, 128>);
      return 1e9;
    case 256:
      if constexpr (S <= 8) return run(ad::micro_kernel<std::int32_t, S, true, 256>);
      return 1e9;
    default: return run(ad::micro_kernel<std::int32_t, S, true, 512>);
  }
}

// ---- micro1: copies of `micro`'s one-warp path (<= 32 slots) with parts
// changed, to see where its ~0.2 us over the warp-local floor goes.
// kMode 0: the product's code; 1: the expert-bit votes unrolled for kBits
// bits; 2: no layout (row = lane, first block 0); 3: the product's layout,
// then the slot rows only (no expert_ids, no total); 4: every lane reads the
// <= kMaxN keys by shuffles and compares them in registers (numel <= B only:
// one block per expert).
template <int kMode, int kBits, int kMaxN, bool kLate>
__global__ void __launch_bounds__(128) micro1_kernel(ad::Args a, int chunk) {
  constexpr int kWarps = 4;
  const int lane = static_cast<int>(threadIdx.x) % 32, w = static_cast<int>(threadIdx.x) / 32;
  const int n = a.numel;
  prim::pdl_wait();
  if constexpr (!kLate) prim::pdl_launch_dependents();
  int raw = -1;
  if (lane < n) raw = __ldg(static_cast<const int*>(a.ids) + lane);
  const ad::DivB<true> db = ad::make_divb<true>(a.block_size);
  const ad::MicroSlice sl = ad::micro_slice<kWarps>(a, db, chunk, w);
  const int r0 = sl.r0, r1 = sl.r1, j0 = sl.j0, j1 = sl.j1;
  ad::micro_fill(a, sl, lane);
  const int e = lane < n ? ad::expert_of<int>(raw, a) : -1;
  int rank = 0, nb = 0, fb = 0, tb = 0;
  if constexpr (kMode == 2) {
    fb = lane;
    nb = 1;
    tb = n;
  } else if constexpr (kMode == 4) {
    unsigned lt = 0;
#pragma unroll
    for (int j = 0; j < kMaxN; ++j) {
      const int k = __shfl_sync(0xffffffffu, e, j);
      rank += (j < lane && k == e) ? 1 : 0;
      lt |= (k >= 0 && k < e) ? (1u << j) : 0u;
    }
    const unsigned leaders = __ballot_sync(0xffffffffu, e >= 0 && rank == 0);
    nb = e >= 0 && rank == 0 ? 1 : 0;
    fb = __popc(leaders & lt);
    tb = __popc(leaders);
  } else {
    unsigned below, peers;
    if constexpr (kMode == 1) {
      const unsigned valid = __ballot_sync(0xffffffffu, e >= 0);
      peers = e >= 0 ? valid : ~valid;
      below = 0;
#pragma unroll
      for (int bit = kBits - 1; bit >= 0; --bit) {
        const bool set = (e >> bit) & 1;
        prim::peers_below_step(set, __ballot_sync(0xffffffffu, set), peers, below);
      }
      if (e < 0) below = 0;
    } else {
      peers = ad::warp_peers_below(e, ad::expert_bits(a.num_experts), below);
    }
    rank = __popc(peers & prim::lanemask_lt());
    nb = e >= 0 && rank == 0 ? db.div_up(__popc(peers)) : 0;
    const int most = db.div_up(n);
#pragma unroll 1
    for (int bit = 0; (1 << bit) <= most; ++bit) {
      const unsigned m = __ballot_sync(0xffffffffu, (nb >> bit) & 1);
      tb += __popc(m) << bit;
      fb += __popc(m & below) << bit;
    }
  }
  __syncwarp();
  if constexpr (kLate) prim::pdl_launch_dependents();
  if constexpr (kMode != 3)
    if (blockIdx.x == 0 && threadIdx.x == 0) *a.total = tb * db.B;
  if (e < 0) return;
  const int row = fb * db.B + rank;
  if (row >= r0 && row < r1) a.sorted[row] = lane;
  if constexpr (kMode != 3) {
    const int jb1 = min(fb + nb, j1);
#pragma unroll 1
    for (int j = max(fb, j0); j < jb1; ++j) a.eids[j] = e;
  }
}

// A probe launch's time; -1 when `check` and its output differs from the
// CPU reference (the "wrong" columns skip work and are timed unchecked).
template <int kMode, int kBits, int kMaxN>
cudaError_t launch_micro1(const Setup& su, int c, cudaStream_t s) {
  const int chunk = ad::micro_chunk(su.p, device_caps());
  const int rows = static_cast<int>(std::max<std::int64_t>(su.p.max_num_tokens_padded, 1));
  const int grid = (rows + chunk - 1) / chunk;
  const ad::Args a = ad::make_args(su.p, su.buffers(c));
  const bool late = su.pdl && su.p.numel <= align::policy_for(device_caps()).micro_late_trigger_max_slots;
  return late ? prim::launch_ex(micro1_kernel<kMode, kBits, kMaxN, true>, dim3(grid), dim3(128), 0, s, prim::pdl_attrs(su.pdl), a, chunk)
              : prim::launch_ex(micro1_kernel<kMode, kBits, kMaxN, false>, dim3(grid), dim3(128), 0, s, prim::pdl_attrs(su.pdl), a, chunk);
}

template <int kBits>
double micro1_bits(Setup& su) {
  const auto f = [&su](cudaStream_t s, int k) { launch_micro1<1, kBits, 32>(su, k, s); };
  return su.verify(f) ? bench_like(f, su.copies) : 1e9;
}

}  // namespace

int micro_mode(const char*) {
  std::mt19937_64 rng(13);
  spin_ms(20);
  std::printf("| E, topk | tokens | default | 64/4 | 64/8 | 128/4 | 128/8 | 256/4 | 256/8 | 512/4 | tiny | relay |\n"
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  struct Row {
    Shape sh;
    int tokens;
  };
  for (const Row& r : {Row{{8, 2, false}, 1}, Row{{256, 8, false}, 1}, Row{{256, 8, false}, 4},
                       Row{{256, 8, false}, 8}, Row{{8, 2, false}, 64}, Row{{64, 8, false}, 16},
                       Row{{128, 8, false}, 16}, Row{{256, 8, false}, 16}, Row{{512, 8, false}, 16},
                       Row{{4096, 8, false}, 16}}) {
    Setup su(r.sh, r.tokens, rng);
    const auto prod = [&](const char* v) { return time_product(su, v); };
    const auto at = [&](int threads, int rpt) {
      switch (ad::micro_per_lane(su.p.numel, su.p.block_size)) {
        case 0: return micro_at<0>(su, threads, rpt);
        case 1: return micro_at<1>(su, threads, rpt);
        case 2: return micro_at<2>(su, threads, rpt);
        case 4: return micro_at<4>(su, threads, rpt);
        default: return micro_at<8>(su, threads, rpt);
      }
    };
    std::printf("| %d, %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.sh.E,
                r.sh.topk, r.tokens, prod("micro"), at(64, 4), at(64, 8), at(128, 4), at(128, 8), at(256, 4),
                at(256, 8), at(512, 4), prod("tiny"), prod("relay"));
    std::fflush(stdout);
  }
  return 0;
}

// PROBE_MIN_TOKENS / PROBE_MAX_TOKENS: only token counts in that range (a

int micro1_mode(const char*) {
  std::mt19937_64 rng(31);
  spin_ms(20);
  std::printf("| E, topk, B | tokens | PDL | micro (product) | copy | votes unrolled | no layout (wrong) | no expert_ids / "
              "total (wrong) | shuffled keys |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Cell& c : {Cell{{8, 2, false}, 1, 128}, Cell{{64, 8, false}, 1, 128}, Cell{{256, 8, false}, 1, 128},
                        Cell{{4096, 8, false}, 1, 128}, Cell{{64, 6, false}, 1, 64}, Cell{{8, 2, false}, 16, 128},
                        Cell{{128, 1, false}, 32, 16}}) {
    Setup su(c.sh, c.tokens, rng, c.block);
    for (bool pdl : {false, true}) {
      su.pdl = pdl;
      const auto timed = [&](auto launch, bool check) { return time_copy(su, launch, check); };
      int bits = 0;
      while ((1 << bits) < c.sh.E) ++bits;  // key_bits, host side
      const double unrolled = bits <= 3 ? micro1_bits<3>(su) : bits <= 6 ? micro1_bits<6>(su) : bits <= 7 ? micro1_bits<7>(su)
                              : bits <= 8 ? micro1_bits<8>(su) : micro1_bits<12>(su);
      const bool shuffled_ok = su.p.numel <= su.p.block_size;
      const double shuffled = !shuffled_ok ? 0
                              : su.p.numel <= 8 ? timed(launch_micro1<4, 0, 8>, true)
                                                : timed(launch_micro1<4, 0, 32>, true);
      std::printf("| %d, %d, %d | %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", c.sh.E, c.sh.topk, c.block,
                  c.tokens, pdl ? "on" : "off", time_product(su, "micro"), timed(launch_micro1<0, 0, 32>, true), unrolled,
                  timed(launch_micro1<2, 0, 32>, false), timed(launch_micro1<3, 0, 32>, false), shuffled);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace moekit::align_probe
