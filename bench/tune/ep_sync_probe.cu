// Lab probe (not the product): what a barrier between the ranks of one ep
// launch costs inside a CUDA graph, the cross-device events p2p uses against a
// device-side signal (each rank adds to every rank's arrival counter over
// NVLink, release at system scope, then spins on its own with acquire loads
// and takes R back off it: a counting semaphore, so a graph replays it
// without a reset and leaves it zero). docs/bench/ep-notes.md says why: at
// T 128 p2p spends ~35 us (2 GPUs) and ~65 (4) outside its kernels.
//
//   probe_ep_sync [--ranks 2,4] [--barriers 2] [--launches 20] [--samples 25]
//
// Each "launch" is what p2p's graph holds around its kernels: a fork from
// device 0's stream, per rank a 1-block kernel, `barriers` times (a barrier,
// a 1-block kernel), a join. Modes: none (fork/join only), events (p2p's
// all_ranks_barrier), signal (the device-side semaphore). Prints the median
// microseconds per launch of CUDA-graph replays and, for each mode, the
// difference to `none` per barrier. A spin that waits past ~2 s traps (a CUDA
// error), and the host gives up on a replay after 10 s. The signal mode needs
// peer access and native peer atomics between every pair (else skipped).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "args.hpp"

namespace {

constexpr int kMax = 8;

struct Counters {
  unsigned long long* at[kMax];  // each rank's arrival counter (peer pointers)
};

__global__ void touch_kernel(int* p) {
  if (threadIdx.x == 0) *p += 1;
}

__device__ __forceinline__ unsigned long long load_acquire_sys(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Signal every rank (self included), then wait for R arrivals and take them.
__global__ void signal_wait_kernel(Counters c, unsigned long long* mine, int R) {
  if (threadIdx.x < R) {
    __threadfence_system();  // what this rank's stream wrote before is visible to the one that sees the add
    unsigned long long* dst = c.at[0];
#pragma unroll
    for (int i = 1; i < kMax; ++i) dst = i == static_cast<int>(threadIdx.x) ? c.at[i] : dst;
    atomicAdd_system(dst, 1ull);
  }
  if (threadIdx.x == 0) {
    const long long t0 = clock64();
    while (load_acquire_sys(mine) < static_cast<unsigned long long>(R)) {
      if (clock64() - t0 > 4000000000LL) __trap();  // ~2 s: a lost signal is an error, not a hang
    }
    atomicAdd_system(mine, static_cast<unsigned long long>(-static_cast<long long>(R)));
  }
}

#define CK(x)                                                                              \
  do {                                                                                     \
    const cudaError_t e_ = (x);                                                            \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "probe_ep_sync: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(3);                                                                        \
    }                                                                                      \
  } while (0)

struct Ranks {
  int R = 0;
  cudaStream_t s[kMax] = {};
  cudaEvent_t fork = nullptr, ev[kMax] = {};
  int* scratch[kMax] = {};
  unsigned long long* counter[kMax] = {};
};

enum class Mode { none, events, signal };
const char* name(Mode m) { return m == Mode::none ? "none" : m == Mode::events ? "events" : "signal"; }

void one_launch(Ranks& k, Mode m, int barriers) {
  CK(cudaSetDevice(0));
  CK(cudaEventRecord(k.fork, k.s[0]));
  for (int r = 1; r < k.R; ++r) CK(cudaStreamWaitEvent(k.s[r], k.fork, 0));
  Counters c{};
  for (int r = 0; r < k.R; ++r) c.at[r] = k.counter[r];
  for (int r = 0; r < k.R; ++r) {
    CK(cudaSetDevice(r));
    touch_kernel<<<1, 32, 0, k.s[r]>>>(k.scratch[r]);
  }
  for (int b = 0; b < barriers; ++b) {
    if (m == Mode::events) {
      for (int r = 0; r < k.R; ++r) {
        CK(cudaSetDevice(r));
        CK(cudaEventRecord(k.ev[r], k.s[r]));
      }
      for (int r = 0; r < k.R; ++r)
        for (int q = 0; q < k.R; ++q)
          if (q != r) CK(cudaStreamWaitEvent(k.s[r], k.ev[q], 0));
    } else if (m == Mode::signal) {
      for (int r = 0; r < k.R; ++r) {
        CK(cudaSetDevice(r));
        signal_wait_kernel<<<1, 32, 0, k.s[r]>>>(c, k.counter[r], k.R);
      }
    }
    for (int r = 0; r < k.R; ++r) {
      CK(cudaSetDevice(r));
      touch_kernel<<<1, 32, 0, k.s[r]>>>(k.scratch[r]);
    }
  }
  for (int r = 1; r < k.R; ++r) {
    CK(cudaSetDevice(r));
    CK(cudaEventRecord(k.ev[r], k.s[r]));
    CK(cudaStreamWaitEvent(k.s[0], k.ev[r], 0));
  }
  CK(cudaSetDevice(0));
}

double time_mode(Ranks& k, Mode m, int barriers, int launches, int samples) {
  CK(cudaSetDevice(0));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(k.s[0], cudaStreamCaptureModeGlobal));
  for (int i = 0; i < launches; ++i) one_launch(k, m, barriers);
  CK(cudaStreamEndCapture(k.s[0], &g));
  cudaGraphExec_t x;
  CK(cudaGraphInstantiate(&x, g, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(x, k.s[0]));
  std::vector<double> us;
  for (int i = 0; i < samples; ++i) {
    CK(cudaEventRecord(a, k.s[0]));
    CK(cudaGraphLaunch(x, k.s[0]));
    CK(cudaEventRecord(b, k.s[0]));
    // A rank that trapped may leave device 0 waiting on its join: give up
    // from the host after 10 s rather than wait for ever.
    const auto t0 = std::chrono::steady_clock::now();
    cudaError_t q;
    while ((q = cudaEventQuery(b)) == cudaErrorNotReady)
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
        std::fprintf(stderr, "probe_ep_sync: R %d %s: no progress in 10 s (a lost signal?)\n", k.R, name(m));
        std::exit(3);
      }
    CK(q);
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(1000.0 * ms / launches);
  }
  CK(cudaGraphExecDestroy(x));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "probe_ep_sync: bad argument: %s\n", why);
  std::exit(2);
}

int number(const char* s, int lo, int hi) {
  try {
    return static_cast<int>(moekit::bench::int_arg(s, lo, hi));
  } catch (const std::invalid_argument& e) {
    usage(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ranks = {2, 4};
  int barriers = 2, launches = 20, samples = 25;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help") {
      std::puts("probe_ep_sync [--ranks 2,4] [--barriers 2] [--launches 20] [--samples 25]");
      return 0;
    }
    if (i + 1 >= argc) usage(argv[i]);
    const char* v = argv[++i];
    if (a == "--ranks") {
      ranks.clear();
      try {
        for (const std::int64_t r : moekit::bench::int_list(v, 1, kMax)) ranks.push_back(static_cast<int>(r));
      } catch (const std::invalid_argument& e) {
        usage(e.what());
      }
    } else if (a == "--barriers") {
      barriers = number(v, 0, 16);
    } else if (a == "--launches") {
      launches = number(v, 1, 1000);
    } else if (a == "--samples") {
      samples = number(v, 1, 10000);
    } else {
      usage(argv[i - 1]);
    }
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "probe_ep_sync: no CUDA device\n");
    return 3;
  }
  for (const int R : ranks) {
    if (R > n) {
      std::printf("R %d: only %d GPU(s)\n", R, n);
      continue;
    }
    Ranks k;
    k.R = R;
    bool peers_ok = true;
    for (int r = 0; r < R; ++r) {
      CK(cudaSetDevice(r));
      for (int q = 0; q < R; ++q) {
        if (q == r) continue;
        int can = 0, atomics = 0;
        CK(cudaDeviceCanAccessPeer(&can, r, q));
        CK(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, r, q));
        if (!can || !atomics) peers_ok = false;  // the signal mode needs both
        if (can) {
          const cudaError_t e = cudaDeviceEnablePeerAccess(q, 0);
          if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
          (void)cudaGetLastError();
        }
      }
      CK(cudaStreamCreateWithFlags(&k.s[r], cudaStreamNonBlocking));
      CK(cudaEventCreateWithFlags(&k.ev[r], cudaEventDisableTiming));
      CK(cudaMalloc(&k.scratch[r], 256));
      CK(cudaMemset(k.scratch[r], 0, 256));
      CK(cudaMalloc(&k.counter[r], 256));
      CK(cudaMemset(k.counter[r], 0, 256));
      CK(cudaDeviceSynchronize());
    }
    CK(cudaSetDevice(0));
    CK(cudaEventCreateWithFlags(&k.fork, cudaEventDisableTiming));
    double base = 0;
    for (const Mode m : {Mode::none, Mode::events, Mode::signal}) {
      if (m == Mode::signal && !peers_ok) {
        std::printf("R %d  signal: skipped (a pair without peer access or native peer atomics)\n", R);
        continue;
      }
      const double us = time_mode(k, m, barriers, launches, samples);
      if (m == Mode::none) base = us;
      std::printf("R %d  %-6s  %8.2f us a launch  (%d barriers: %+.2f us each against none)\n", R, name(m), us,
                  barriers, barriers > 0 ? (us - base) / barriers : 0.0);
    }
    for (int r = 0; r < R; ++r) {
      unsigned long long left = 1;
      CK(cudaSetDevice(r));
      CK(cudaMemcpy(&left, k.counter[r], sizeof left, cudaMemcpyDeviceToHost));
      if (left != 0) std::printf("R %d: rank %d's counter ends at %llu, not 0\n", R, r, left);
    }
  }
  return 0;
}
