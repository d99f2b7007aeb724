// Calibration and tuning probe for the align family (device only; not a test).
// Bench only (bench/tune/): it computes its own launch plans for the sweeps
// (the product's plan functions take no overrides) and instruments `tiny`
// through the kernel's phase-hook parameter (StampProbe below).
//
//   probe_align calib            harness calibration: trivial kernels and the
//                                fill-overlap variant under several timing setups
//   probe_align sweep FILE.csv   `tiny` launch shapes (grid x threads)
//                                per bench shape; best per shape on stdout
//   probe_align phases           `tiny` at 1 token (E = 8, 256, 512): clock64
//                                per phase per block and global-timer block
//                                start skew, from an instrumented copy
//   probe_align twopass          `twopass` over grid x counting warps
//   probe_align micro            `micro` over threads x rows per thread, 1-16
//                                tokens, next to tiny and relay
//   probe_align relay            `relay` over threads x fill rows per thread,
//                                plain and cooperative launches, next to tiny
//   probe_align solo             `solo` over threads (256-1024), next to
//                                micro, tiny, relay and onepass
//   probe_align stripe           `stripe` over rows per block (1024-8192) and
//                                threads, next to micro, solo and tiny
//   probe_align onepass          `onepass` over threads x loads x grid, with
//                                and without the cooperative attribute, next
//                                to tiny / twopass / auto
//   probe_align cluster          what one thread block cluster costs: empty
//                                kernels with and without the cluster
//                                attribute, a barriers-only kernel, and
//                                `cluster` next to solo / tiny / onepass
//   probe_align floor            per issue-#12 cell, PDL off / on: an empty
//                                kernel, one id loaded -> one row stored, and
//                                a one-launch kernel that loads every id and
//                                writes every row (counting and layout free),
//                                next to `auto`
//   probe_align trigger          `tiny` with its PDL trigger at later phases;
//                                `solo` at 2-4 slots per thread
//   probe_align micro1           copies of micro's one-warp path (<= 32 slots)
//                                with parts changed or removed
//   probe_align solo1            copies of solo (one slot per thread, E <= 128)
//                                with parts changed or removed
//   probe_align ncu              two launches of each kernel of interest, for
//                                `ncu --metrics gpu__time_duration.sum ...`
//
// No fmt here (.cu file): printf only.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "align/align.hpp"
#include "bench_ids.hpp"
#include "align/cluster.cuh"
#include "align/micro.cuh"
#include "align/onepass.cuh"
#include "align/relay.cuh"
#include "align/solo.cuh"
#include "align/stripe.cuh"
#include "align/tiny.cuh"
#include "align/twopass.cuh"
#include "common/device.hpp"
#include "cuda_util.hpp"
#include "align/reference.hpp"
#include "timing.hpp"

using namespace moekit;
// align's kernel internals and its public building blocks (tiny_kernel.cuh, args.cuh) under one name.
namespace probe_names {
using namespace moekit::align::detail;
using namespace moekit::align;
}  // namespace probe_names
namespace ad = probe_names;

namespace {

__global__ void empty_kernel() {}
__global__ void load_store_kernel(const int* in, int* out) {
  if (threadIdx.x == 0) out[0] = in[0] + 1;
}
// One block: load, 5 barriers, 4 KiB of stores (the skeleton of a one-block align).
__global__ void skeleton_kernel(const int* in, int* out) {
  __shared__ int s[1024];
  s[threadIdx.x] = threadIdx.x < 8 ? in[threadIdx.x] : 0;
  for (int k = 0; k < 5; ++k) {
    __syncthreads();
    s[threadIdx.x] += s[(threadIdx.x + 1) & 1023];
  }
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x];
}
// Same dynamic work (4096 dependent shared-memory steps), once as a rolled
// loop (a few hundred bytes of code) and once fully unrolled (tens of KiB):
// the difference is what running through cold instruction-cache lines costs.
template <bool kUnrolled>
__global__ void code_size_kernel(const int* in, int* out) {
  __shared__ int s[32];
  if (threadIdx.x < 32) s[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  int x = threadIdx.x;
  if constexpr (kUnrolled) {
#pragma unroll
    for (int k = 0; k < 4096; ++k) x = (x ^ s[(x + k) & 31]) + k;
  } else {
#pragma unroll 1
    for (int k = 0; k < 4096; ++k) x = (x ^ s[(x + k) & 31]) + k;
  }
  out[threadIdx.x] = x;
}
__global__ void spin_kernel(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > ns) break;
  }
}

// One store per block, so that the launch is not optimised into nothing.
__global__ void mark_kernel(int* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}
// `cluster`'s three cluster barriers and nothing else, optionally after one
// global store per thread (a release at cluster scope also covers global
// stores: does it wait for them?).
__global__ void cluster_barriers_kernel(int* out, bool store_first) {
  if (store_first) out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __cluster_barrier_arrive_relaxed();
  __cluster_barrier_wait();
  cooperative_groups::this_cluster().sync();
#endif
  if (!store_first && threadIdx.x == 0) out[blockIdx.x] = 1;
}

void spin_ms(double ms) {
  // Everything on the process's one stream (docs/timing.md "One stream").
  spin_kernel<<<std::max(device_caps().sm_count, 1), 32, 0, process_stream()>>>(static_cast<long long>(ms * 1e6));
  cuda_sync("spin");
}

// Local variant of time_launches: warm-up by graph replays for warm_ms, then
// `samples` replays of a graph of per_graph launches.
double time_graph(const std::function<void(cudaStream_t, int)>& launch, int copies, double warm_ms,
                  int samples, int per_graph) {
  const cudaStream_t s = process_stream();
  cudaGraph_t g;
  cudaGraphExec_t ge;
  int next = 0;
  cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
  for (int i = 0; i < per_graph; ++i) {
    launch(s, next);
    next = (next + 1) % copies;
  }
  cuda_check(cudaStreamEndCapture(s, &g), "end capture");
  cuda_check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  // Warm: replay until warm_ms of device time passed.
  float done = 0;
  while (done < warm_ms) {
    cudaEventRecord(e0, s);
    for (int i = 0; i < 20; ++i) cudaGraphLaunch(ge, s);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    done += std::max(ms, 0.001f);
  }
  std::vector<cudaEvent_t> ev(2 * samples);
  for (auto& e : ev) cudaEventCreate(&e);
  for (int i = 0; i < samples; ++i) {
    cudaEventRecord(ev[2 * i], s);
    cudaGraphLaunch(ge, s);
    cudaEventRecord(ev[2 * i + 1], s);
    if ((i & 15) == 15) cudaStreamSynchronize(s);
  }
  cuda_check(cudaStreamSynchronize(s), "samples");
  std::vector<double> us(samples);
  for (int i = 0; i < samples; ++i) {
    float ms = 0;
    cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]);
    us[i] = 1000.0 * ms / per_graph;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(ge);
  cudaGraphDestroy(g);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

double bench_like(const std::function<void(cudaStream_t, int)>& launch, int copies,
                  int per_graph = 20) {
  TimingOptions opt;
  opt.warmup = 5;
  opt.samples = 25;
  opt.launches_per_graph = per_graph;
  return time_launches([&](Stream s, int c) { launch(reinterpret_cast<cudaStream_t>(s), c); },
                       copies, opt)
      .median_us;
}

struct Shape {
  int E, topk;
  bool zipf;
};

std::vector<std::int32_t> make_ids(const Shape& c, int tokens, std::mt19937_64& rng) {
  return bench::align_ids(c.E, c.topk, c.zipf, tokens, rng);
}

// Device copies of one input plus output buffers.
struct Setup {
  align::Problem p;
  bool pdl = false;  // every launch's pdl (Variant::launch's argument)
  align::Outputs ref;
  std::vector<DeviceBuffer> ids;
  DeviceBuffer sorted, eids, total, ws;
  int copies = 1;
  Setup(const Shape& c, int tokens, std::mt19937_64& rng, int block_size = 128) {
    const auto h = make_ids(c, tokens, rng);
    p = align::make_problem(static_cast<std::int64_t>(h.size()), c.E, block_size, false, 0, false);
    const std::vector<std::int64_t> h64(h.begin(), h.end());
    ref = align::reference(p, h64, {});
    copies = rotation_copies(h.size() * 4, false);
    for (int k = 0; k < copies; ++k) {
      ids.emplace_back(std::max<std::size_t>(h.size() * 4, 16));
      if (!h.empty()) ids.back().upload(h.data(), h.size() * 4);
    }
    sorted = DeviceBuffer(std::max<std::int64_t>(p.max_num_tokens_padded, 1) * 4);
    eids = DeviceBuffer(std::max<std::int64_t>(p.max_num_blocks, 1) * 4);
    total = DeviceBuffer(4);
    ws = DeviceBuffer(std::size_t(64) << 20);
  }
  // The relay kernel's last block holds kRelayLoads slots per thread.
  bool numel_ok(int threads) const { return p.numel <= std::int64_t{threads} * ad::kRelayLoads; }
  align::Buffers buffers(int copy) const {
    align::Buffers b;
    b.topk_ids = ids[static_cast<std::size_t>(copy)].get();
    b.sorted_token_ids = sorted.as<std::int32_t>();
    b.expert_ids = eids.as<std::int32_t>();
    b.num_tokens_post_pad = total.as<std::int32_t>();
    b.workspace = ws.get();
    return b;
  }
  // Also zeroes the shared workspace: onepass needs it zero and keeps it so,
  // but the variants timed before it (twopass, say) leave tables in it.
  bool verify(const std::function<void(cudaStream_t, int)>& launch) {
    ws.fill_bytes(0);
    sorted.fill_bytes(0xAB);
    eids.fill_bytes(0xAB);
    total.fill_bytes(0xAB);
    launch(process_stream(), 0);
    cuda_check_last("verify launch");
    cuda_sync("verify");
    align::Outputs got;
    got.sorted_token_ids.resize(static_cast<std::size_t>(p.max_num_tokens_padded));
    got.expert_ids.resize(static_cast<std::size_t>(p.max_num_blocks));
    sorted.download(got.sorted_token_ids.data(), got.sorted_token_ids.size() * 4);
    eids.download(got.expert_ids.data(), got.expert_ids.size() * 4);
    total.download(&got.num_tokens_post_pad, 4);
    return align::check(p, ref, got, false).ok;
  }
};

std::function<void(cudaStream_t, int)> variant_launch(const Setup& su, const char* name) {
  const align::Variant* v = align::registry().find(name);
  return [&su, v](cudaStream_t s, int c) {
    v->launch(su.p, su.buffers(c), reinterpret_cast<Stream>(s), su.pdl);
  };
}

// A product variant's time on su (1e9: not applicable, or wrong output).
double time_product(Setup& su, const char* name) {
  if (align::registry().find(name)->not_applicable(su.p, device_caps()) != nullptr) return 1e9;
  const auto f = variant_launch(su, name);
  return su.verify(f) ? bench_like(f, su.copies) : 1e9;
}

std::function<void(cudaStream_t, int)> tiny_launch(const Setup& su, ad::TinyPlan pl) {
  return [&su, pl](cudaStream_t s, int c) {
    ad::launch_tiny<std::int32_t>(su.p, su.buffers(c), s, su.pdl, pl);
  };
}

// twopass with `grid` blocks and up to `rows` counting warps (the sweep's
// points; twopass_plan() is the fitted default).
ad::TwoPassPlan twopass_plan_at(const align::Problem& p, int grid, int rows) {
  return ad::twopass_plan_of<std::int32_t>(p, std::min(ad::twopass_rows(p.num_experts), rows), grid);
}

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
    return prim::launch_cooperative(kernel, pl.grid, pl.threads, pl.smem, s, false, false, a, ws, pl.chunk);
  };
  switch (pl.loads) {
    case 1: return go(ad::onepass_kernel<std::int32_t, 1>);
    case 2: return go(ad::onepass_kernel<std::int32_t, 2>);
    default: return go(ad::onepass_kernel<std::int32_t, 4>);
  }
}

int twopass_mode() {
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

int micro_mode() {
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
// shorter device call).
bool token_in_range(int t) {
  const char* lo = std::getenv("PROBE_MIN_TOKENS");
  const char* hi = std::getenv("PROBE_MAX_TOKENS");
  return !(lo && t < std::atoi(lo)) && !(hi && t > std::atoi(hi));
}

// `solo` at 256-1024 threads, next to the product's micro, tiny, relay, solo
// and onepass.
int solo_mode() {
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

// `stripe` at 1024-8192 rows per block and at 512 threads, next to
// the product's micro, solo, tiny and stripe.
int stripe_mode() {
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

// `relay` (product launch: cooperative, policy shape) against plain <<<>>>
// launches of the same kernel with threads x fill rows per thread, next to
// `tiny` and `auto`.
int relay_mode() {
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

void token_filter(std::vector<int>& tokens) {
  std::erase_if(tokens, [](int t) { return !token_in_range(t); });
}

int onepass_mode() {
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

int calib() {
  DeviceBuffer in(4096), out(4096);
  in.fill_bytes(1);
  std::mt19937_64 rng(42);
  spin_ms(1);  // module load etc. out of the way
  auto k_empty = [](cudaStream_t s, int) { empty_kernel<<<1, 32, 0, s>>>(); };
  auto k_ls = [&](cudaStream_t s, int) {
    load_store_kernel<<<1, 32, 0, s>>>(in.as<int>(), out.as<int>());
  };
  auto k_sk = [&](cudaStream_t s, int) {
    skeleton_kernel<<<1, 1024, 0, s>>>(in.as<int>(), out.as<int>());
  };
  Setup s8(Shape{8, 2, false}, 1, rng), s256(Shape{256, 8, false}, 1, rng);
  struct K {
    const char* name;
    std::function<void(cudaStream_t, int)> f;
    int copies;
  };
  auto k_rolled = [&](cudaStream_t s, int) {
    code_size_kernel<false><<<1, 32, 0, s>>>(in.as<int>(), out.as<int>());
  };
  auto k_unrolled = [&](cudaStream_t s, int) {
    code_size_kernel<true><<<1, 32, 0, s>>>(in.as<int>(), out.as<int>());
  };
  const std::vector<K> ks = {
      {"empty<<<1,32>>>", k_empty, 1},
      {"4096 smem steps, rolled loop", k_rolled, 1},
      {"4096 smem steps, unrolled", k_unrolled, 1},
      {"load+store<<<1,32>>>", k_ls, 1},
      {"skeleton<<<1,1024>>>", k_sk, 1},
      {"fill-overlap E=8 topk2 1 tok", variant_launch(s8, "fill-overlap"), s8.copies},
      {"fill-overlap E=256 topk8 1 tok", variant_launch(s256, "fill-overlap"), s256.copies},
      {"tiny E=8 topk2 1 tok", variant_launch(s8, "tiny"), s8.copies},
      {"tiny E=256 topk8 1 tok", variant_launch(s256, "tiny"), s256.copies},
  };
  std::printf("| kernel | bench-like (5 warm, 25x20) | same after 50 ms spin | 20 ms warm replays, "
              "200x20 | 20 ms warm, 200x100 | 20 ms warm, 200x1 | bench-like, 1 copy |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const K& k : ks) {
    // Idle gap first (the bench does host work between variants).
    cuda_sync("idle");
    const double a = bench_like(k.f, k.copies);
    spin_ms(50);
    const double b = bench_like(k.f, k.copies);
    const double c = time_graph(k.f, k.copies, 20, 200, 20);
    const double d = time_graph(k.f, k.copies, 20, 200, 100);
    const double e = time_graph(k.f, k.copies, 20, 200, 1);
    const double f = bench_like(k.f, 1);
    std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", k.name, a, b, c, d, e, f);
    std::fflush(stdout);
  }
  std::printf("\nverify tiny: E=8 %s, E=256 %s\n", s8.verify(variant_launch(s8, "tiny")) ? "ok" : "FAIL",
              s256.verify(variant_launch(s256, "tiny")) ? "ok" : "FAIL");
  return 0;
}

int sweep(const char* csv_path) {
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


// ---- phases: an instrumented copy of `tiny` (tiny_kernel<..., StampProbe>).
// Thread 0 of every block stamps clock64 at: 0 entry, 1 its first id arrived
// (the probe waits for it there), 2 counters zeroed (barrier), 3 slots ranked
// (barrier), 4 scan pass 1 + warp offsets (1 barrier), 5 pass 2: final
// starts, the experts' padding rows and expert_ids, 6 rows past
// num_tokens_post_pad + -1 expert_ids + barrier, 7 slots placed and a closing
// barrier; plus the global timer at entry and exit (to compare blocks on
// different SMs).
constexpr int kStampBlocks = 256;
constexpr int kPhases = 8;
__device__ long long g_clk[kStampBlocks][kPhases];
__device__ unsigned long long g_gt[kStampBlocks][2];
__device__ int g_sink[kStampBlocks];

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}
__device__ __forceinline__ long long clk() {
  long long c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c)::"memory");
  return c;
}
struct StampProbe {
  static constexpr bool kEarlyTrigger = true;
  __device__ static void mark(int ph) {
    if (threadIdx.x != 0 || blockIdx.x >= kStampBlocks) return;
    if (ph == 0) g_gt[blockIdx.x][0] = global_ns();
    g_clk[blockIdx.x][ph] = clk();
  }
  __device__ static void loaded(int v) {
    if (threadIdx.x != 0 || blockIdx.x >= kStampBlocks) return;
    *reinterpret_cast<volatile int*>(&g_sink[blockIdx.x]) = v;  // waits for the load
    g_clk[blockIdx.x][1] = clk();
  }
  __device__ static void end() {
    __syncthreads();
    mark(7);
    if (threadIdx.x == 0 && blockIdx.x < kStampBlocks) g_gt[blockIdx.x][1] = global_ns();
  }
};

__global__ void clock_rate_kernel(long long ns, long long* out) {
  const long long c0 = clk();
  const unsigned long long t0 = global_ns();
  unsigned long long t = t0;
  while (static_cast<long long>(t - t0) < ns) t = global_ns();
  out[0] = clk() - c0;
  out[1] = static_cast<long long>(t - t0);
}

template <int kThreads, class Probe>
void launch_tiny_narrow(const Setup& su, int copy, cudaStream_t s, const ad::TinyPlan& pl) {
  const ad::Args a = ad::make_args(su.p, su.buffers(copy));
  const std::size_t smem = ad::tiny_smem(su.p.numel, su.p.num_experts);
  prim::opt_in_smem(ad::tiny_kernel<std::int32_t, kThreads, false, Probe>, smem);
  ad::tiny_kernel<std::int32_t, kThreads, false, Probe><<<pl.grid, kThreads, smem, s>>>(a, pl.chunk, ad::TinyPlaceNone::Params{});
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int phases() {
  std::mt19937_64 rng(42);
  spin_ms(20);
  DeviceBuffer rate(16);
  clock_rate_kernel<<<1, 1, 0, process_stream()>>>(2000000, rate.as<long long>());
  cuda_sync("clock rate");
  long long r[2];
  rate.download(r, sizeof(r));
  const double ghz = static_cast<double>(r[0]) / static_cast<double>(r[1]);
  std::printf("SM clock during the probe: %.3f GHz (clock64 / globaltimer over 2 ms)\n\n", ghz);
  std::printf("ns from block entry (thread 0, block 0 | slowest block), median of 40 launches, "
              "each the last of a 20-launch graph replay\n\n");
  std::printf("| E, topk | grid x thr | tiny us | stamped us | id arrived | zeroed+bar | ranked+bar | "
              "scanned | expert pad+eids | tail+bar | slots+bar = body | slowest body | start skew max / med | "
              "span (global timer) | tiny 128 thr us | tiny 64 thr us |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const std::vector<Shape> shapes = {{8, 2, false}, {256, 8, false}, {512, 8, false}};
  unsigned long long res = ~0ull;  // smallest non-zero global timer step seen
  for (const Shape& sh : shapes) {
    Setup su(sh, 1, rng);
    // The product's grid at 256 threads (the stamped copy is 256-thread only).
    const ad::TinyPlan pl = ad::tiny_plan_with(su.p, ad::tiny_plan(su.p, device_caps()).grid, 256);
    if (pl.threads != 256 || su.p.numel > ad::kTinyNarrow * 64 || pl.grid > kStampBlocks) {
      std::printf("| %d, %d | unexpected plan (%d x %d) |\n", sh.E, sh.topk, pl.grid, pl.threads);
      continue;
    }
    auto f_def = variant_launch(su, "tiny");
    auto f_st = [&su, pl](cudaStream_t s, int c) { launch_tiny_narrow<256, StampProbe>(su, c, s, pl); };
    auto f_128 = [&su, pl](cudaStream_t s, int c) {
      launch_tiny_narrow<128, ad::TinyNoProbe>(su, c, s, pl);
    };
    auto f_64 = [&su, pl](cudaStream_t s, int c) {
      launch_tiny_narrow<64, ad::TinyNoProbe>(su, c, s, pl);
    };
    const bool ok = su.verify(f_st) && su.verify(f_128) && su.verify(f_64);
    const double us_def = bench_like(f_def, su.copies);
    const double us_st = bench_like(f_st, su.copies);
    const double us_128 = bench_like(f_128, su.copies);
    const double us_64 = bench_like(f_64, su.copies);

    // Graph of 20 stamped launches; the stamps left are the last launch's.
    const cudaStream_t s = process_stream();
    cudaGraph_t g;
    cudaGraphExec_t ge;
    cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
    for (int i = 0; i < 20; ++i) f_st(s, i % su.copies);
    cuda_check(cudaStreamEndCapture(s, &g), "end capture");
    cuda_check(cudaGraphInstantiate(&ge, g, 0), "instantiate");
    for (int i = 0; i < 10; ++i) cudaGraphLaunch(ge, s);
    cuda_check(cudaStreamSynchronize(s), "warm");
    const int G = pl.grid;
    std::vector<std::vector<double>> ph(kPhases);  // block 0, ns since entry
    std::vector<double> slow, skew_max, skew_med, span;
    std::vector<long long> hc(static_cast<std::size_t>(kStampBlocks) * kPhases);
    std::vector<unsigned long long> hg(static_cast<std::size_t>(kStampBlocks) * 2);
    for (int rep = 0; rep < 40; ++rep) {
      cudaGraphLaunch(ge, s);
      cuda_check(cudaStreamSynchronize(s), "stamps");
      cuda_check(cudaMemcpyFromSymbol(hc.data(), g_clk, hc.size() * sizeof(long long)), "clk");
      cuda_check(cudaMemcpyFromSymbol(hg.data(), g_gt, hg.size() * sizeof(long long)), "gt");
      for (int k = 1; k < kPhases; ++k)
        ph[k].push_back(static_cast<double>(hc[k] - hc[0]) / ghz);
      double sl = 0;
      unsigned long long t0 = ~0ull, t1 = 0;
      std::vector<double> starts;
      for (int b = 0; b < G; ++b) {
        const long long* c = &hc[static_cast<std::size_t>(b) * kPhases];
        sl = std::max(sl, static_cast<double>(c[7] - c[0]) / ghz);
        t0 = std::min(t0, hg[2 * b]);
        t1 = std::max(t1, hg[2 * b + 1]);
      }
      for (int b = 0; b < G; ++b) starts.push_back(static_cast<double>(hg[2 * b] - t0));
      std::vector<unsigned long long> all(hg.begin(), hg.begin() + 2 * G);
      std::sort(all.begin(), all.end());
      for (std::size_t k = 1; k < all.size(); ++k)
        if (all[k] > all[k - 1]) res = std::min(res, all[k] - all[k - 1]);
      slow.push_back(sl);
      skew_max.push_back(*std::max_element(starts.begin(), starts.end()));
      skew_med.push_back(median_of(starts));
      span.push_back(static_cast<double>(t1 - t0));
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    std::printf("| %d, %d | %d x %d | %.2f | %.2f |", sh.E, sh.topk, G, pl.threads, us_def, us_st);
    for (int k = 1; k < kPhases; ++k) std::printf(" %.0f |", median_of(ph[k]));
    std::printf(" %.0f | %.0f / %.0f | %.0f | %.2f | %.2f |%s\n", median_of(slow),
                median_of(skew_max), median_of(skew_med), median_of(span), us_128, us_64,
                ok ? "" : " FAIL");
    std::fflush(stdout);
  }
  std::printf("\nglobal timer: smallest non-zero step seen %llu ns\n", res);
  return 0;
}

int ncu_mode() {
  std::mt19937_64 rng(42);
  DeviceBuffer in(4096), out(4096);
  in.fill_bytes(1);
  Setup s8(Shape{8, 2, false}, 1, rng), s256(Shape{256, 8, false}, 1, rng),
      s256b(Shape{256, 8, false}, 4096, rng);
  for (int rep = 0; rep < 2; ++rep) {
    empty_kernel<<<1, 32, 0, process_stream()>>>();
    skeleton_kernel<<<1, 1024, 0, process_stream()>>>(in.as<int>(), out.as<int>());
    variant_launch(s8, "fill-overlap")(process_stream(), 0);
    variant_launch(s256, "fill-overlap")(process_stream(), 0);
    variant_launch(s8, "tiny")(process_stream(), 0);
    variant_launch(s256, "tiny")(process_stream(), 0);
    variant_launch(s256b, "tiny")(process_stream(), 0);
    variant_launch(s256b, "oneshot")(process_stream(), 0);
    cuda_sync("ncu");
  }
  return 0;
}


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

struct Cell {
  Shape sh;
  int tokens;
  int block;
};

std::vector<Cell> issue_cells() {
  std::vector<Cell> cells;
  for (const Shape sh : {Shape{8, 2, false}, Shape{64, 8, false}, Shape{128, 8, false}, Shape{256, 8, false},
                         Shape{512, 8, false}, Shape{4096, 8, false}})
    for (int t : {1, 16, 64, 256, 1024}) cells.push_back({sh, t, 128});
  cells.push_back({{128, 1, false}, 128, 16});  // Llama-4-Maverick decode rows
  cells.push_back({{128, 1, false}, 135, 16});
  for (int t : {1, 16, 64, 256, 1024}) cells.push_back({{64, 6, false}, t, 64});  // DeepSeek-V2-Lite prefixes
  return cells;
}

int floor_mode() {
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

// ---- trigger: `tiny` with PDL on and its trigger right after pdl_wait (the
// product) or at a later phase mark (4: after the scan, 5: after the
// experts' padding rows, 6: after the tail and its barrier, never: at exit);
// then `solo` with 2 or 4 slots per thread at 256 / 512 threads.
template <int kAt>
struct TriggerProbe {
  static constexpr bool kEarlyTrigger = false;
  __device__ static void mark(int ph) {
    if (ph == kAt) prim::pdl_launch_dependents();
  }
  __device__ static void loaded(int) {}
  __device__ static void end() {}
};

template <class Probe>
cudaError_t launch_tiny_with(const Setup& su, int c, cudaStream_t s, const ad::TinyPlan& pl) {
  const ad::Args a = ad::make_args(su.p, su.buffers(c));
  const std::size_t smem = ad::tiny_smem(su.p.numel, su.p.num_experts);
  const auto go = [&](auto kernel) {
    return prim::launch_with_smem(kernel, dim3(pl.grid), dim3(pl.threads), smem, s, prim::pdl_attrs(su.pdl), a,
                                  pl.chunk, ad::TinyPlaceNone::Params{});
  };
  const bool wide = su.p.numel > std::int64_t{ad::kTinyNarrow} * pl.threads;
  switch (pl.threads) {
    case 256:
      return wide ? go(ad::tiny_kernel<std::int32_t, 256, true, Probe>) : go(ad::tiny_kernel<std::int32_t, 256, false, Probe>);
    case 512:
      return wide ? go(ad::tiny_kernel<std::int32_t, 512, true, Probe>) : go(ad::tiny_kernel<std::int32_t, 512, false, Probe>);
    default:
      return wide ? go(ad::tiny_kernel<std::int32_t, 1024, true, Probe>)
                  : go(ad::tiny_kernel<std::int32_t, 1024, false, Probe>);
  }
}

template <int kThreads, int kL>
cudaError_t launch_solo_at(const Setup& su, int c, cudaStream_t s) {
  const ad::Args a = ad::make_args(su.p, su.buffers(c));
  const std::size_t smem = ad::expert_table_smem(su.p.num_experts);
  const bool p2 = ad::is_pow2(su.p.block_size);
  return ad::with_warp_scan_width(ad::warp_scan_per_lane(su.p.num_experts), [&](auto per_lane) {
    constexpr int kP = decltype(per_lane)::value;
    const auto kernel = p2 ? ad::solo_kernel<std::int32_t, kThreads, kL, kP, true>
                           : ad::solo_kernel<std::int32_t, kThreads, kL, kP, false>;
    return prim::launch_with_smem(kernel, dim3(1), dim3(kThreads), smem, s, prim::pdl_attrs(su.pdl), a);
  });
}

int trigger_mode() {
  std::mt19937_64 rng(29);
  spin_ms(20);
  std::printf("| E, topk, B | tokens | plan | auto (PDL on) | tiny, trigger early (product) | after scan | after "
              "padding rows | after tail | at exit |\n|---|---:|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Cell& c : issue_cells()) {
    if (!token_in_range(c.tokens) || c.tokens < 16 || c.sh.E < 64) continue;
    Setup su(c.sh, c.tokens, rng, c.block);
    if (ad::tiny_not_applicable(su.p, device_caps())) continue;
    su.pdl = true;
    const ad::TinyPlan pl = ad::tiny_plan(su.p, device_caps());
    const auto at = [&](auto probe) {
      using P = decltype(probe);
      const auto f = [&su, pl](cudaStream_t s, int k) { launch_tiny_with<P>(su, k, s, pl); };
      return su.verify(f) ? bench_like(f, su.copies) : 1e9;
    };
    std::printf("| %d, %d, %d | %d | %dx%d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", c.sh.E, c.sh.topk, c.block,
                c.tokens, pl.grid, pl.threads, time_product(su, "auto"), at(ad::TinyNoProbe{}), at(TriggerProbe<4>{}),
                at(TriggerProbe<5>{}), at(TriggerProbe<6>{}), at(TriggerProbe<99>{}));
    std::fflush(stdout);
  }
  std::printf("\n| E, topk, B | tokens | PDL | solo (plan) | 256 x 2 | 512 x 2 | 256 x 4 | auto |\n"
              "|---|---:|---|---:|---:|---:|---:|---:|\n");
  for (const Cell& c : {Cell{{8, 2, false}, 128, 128}, Cell{{8, 2, false}, 256, 128}, Cell{{8, 2, false}, 512, 128},
                        Cell{{16, 4, false}, 64, 128}, Cell{{16, 4, false}, 128, 128}, Cell{{64, 6, false}, 64, 64},
                        Cell{{64, 8, false}, 32, 128}, Cell{{64, 8, false}, 64, 128}, Cell{{128, 1, false}, 384, 16}}) {
    if (!token_in_range(c.tokens)) continue;
    Setup su(c.sh, c.tokens, rng, c.block);
    for (bool pdl : {false, true}) {
      su.pdl = pdl;
      const auto at = [&](auto f, int most) {
        if (su.p.numel > most) return 1e9;
        return su.verify(f) ? bench_like(f, su.copies) : 1e9;
      };
      const ad::SoloPlan sp = ad::solo_plan(su.p, device_caps(), su.pdl);
      std::printf("| %d, %d, %d | %d | %s | %.2f (%dx%d) | %.2f | %.2f | %.2f | %.2f |\n", c.sh.E, c.sh.topk, c.block,
                  c.tokens, pdl ? "on" : "off", time_product(su, "solo"), sp.threads, sp.per_thread,
                  at([&su](cudaStream_t s, int k) { launch_solo_at<256, 2>(su, k, s); }, 512),
                  at([&su](cudaStream_t s, int k) { launch_solo_at<512, 2>(su, k, s); }, 1024),
                  at([&su](cudaStream_t s, int k) { launch_solo_at<256, 4>(su, k, s); }, 1024), time_product(su, "auto"));
      std::fflush(stdout);
    }
  }
  return 0;
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
template <class Launch>
double time_copy(Setup& su, Launch launch, bool check) {
  const auto f = [&su, launch](cudaStream_t s, int k) { launch(su, k, s); };
  if (check && !su.verify(f)) return -1.0;
  return bench_like(f, su.copies);
}

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

int micro1_mode() {
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

int solo1_mode() {
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

}  // namespace

// What one thread block cluster costs: empty kernels with and without the
// cluster attribute, the cluster barriers alone, then `cluster` next to solo /
// tiny / onepass from 64 to 16384 slots.
int cluster_mode() {
  std::mt19937_64 rng(19);
  spin_ms(20);
  DeviceBuffer out(16 * 256 * 4);
  std::printf("| blocks | PDL | plain | cluster attr | cluster barriers | barriers after a store |\n"
              "|---:|---|---:|---:|---:|---:|\n");
  for (int g : {1, 2, 4, 8, 16})
    for (bool pdl : {false, true}) {
      const auto run = [&](auto kernel, int cluster, auto... args) {
        return bench_like(
            [&, kernel, cluster](cudaStream_t s, int) {
              prim::launch_with_smem(kernel, dim3(g), dim3(256), 0, s, prim::LaunchAttrs{pdl, false, cluster},
                                     out.as<int>(), args...);
            },
            1);
      };
      std::printf("| %d | %s | %.2f | %.2f | %.2f | %.2f |\n", g, pdl ? "on" : "off", run(mark_kernel, 0),
                  run(mark_kernel, g), run(cluster_barriers_kernel, g, false), run(cluster_barriers_kernel, g, true));
      std::fflush(stdout);
    }
  std::printf("\n| E, topk | tokens | PDL | plan | solo | tiny | onepass | cluster |\n"
              "|---|---:|---|---|---:|---:|---:|---:|\n");
  struct Row {
    Shape sh;
    int tokens;
  };
  for (const Row& r : {Row{{5, 3, false}, 100}, Row{{8, 2, false}, 64}, Row{{8, 2, false}, 256}, Row{{8, 2, false}, 1024},
                       Row{{8, 2, false}, 2048}, Row{{8, 2, false}, 4096}, Row{{8, 2, false}, 8192}, Row{{16, 4, false}, 1024},
                       Row{{16, 4, false}, 4096}, Row{{32, 8, false}, 1024}, Row{{64, 8, false}, 2048},
                       Row{{64, 8, false}, 16}, Row{{64, 8, false}, 64}, Row{{64, 8, false}, 256},
                       Row{{64, 8, false}, 1024}, Row{{256, 8, false}, 64}, Row{{256, 8, false}, 256}}) {
    if (!token_in_range(r.tokens)) continue;
    Setup su(r.sh, r.tokens, rng);
    for (bool pdl : {false, true}) {
      su.pdl = pdl;
      const auto prod = [&](const char* v) { return time_product(su, v); };
      const ad::ClusterPlan pl = ad::cluster_plan<std::int32_t>(su.p, device_caps());
      std::printf("| %d, %d | %d | %s | %dx%d | %.2f | %.2f | %.2f | %.2f |\n", r.sh.E, r.sh.topk, r.tokens,
                  pdl ? "on" : "off", pl.blocks, pl.threads, prod("solo"), prod("tiny"), prod("onepass"), prod("cluster"));
      std::fflush(stdout);
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::puts("probe_align: no CUDA device");
    return 77;
  }
  const std::string mode = argc > 1 ? argv[1] : "calib";
  try {
    if (mode == "calib") return calib();
    if (mode == "sweep") return sweep(argc > 2 ? argv[2] : "sweep.csv");
    if (mode == "ncu") return ncu_mode();
    if (mode == "twopass") return twopass_mode();
    if (mode == "onepass") return onepass_mode();
    if (mode == "micro") return micro_mode();
    if (mode == "relay") return relay_mode();
    if (mode == "solo") return solo_mode();
    if (mode == "stripe") return stripe_mode();
    if (mode == "cluster") return cluster_mode();
    if (mode == "phases") return phases();
    if (mode == "floor") return floor_mode();
    if (mode == "trigger") return trigger_mode();
    if (mode == "micro1") return micro1_mode();
    if (mode == "solo1") return solo1_mode();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "probe_align: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: probe_align calib | sweep FILE.csv | phases | twopass | onepass | micro | relay | solo | stripe | cluster | floor | trigger | micro1 | solo1 | ncu\n");
  return 2;
}
