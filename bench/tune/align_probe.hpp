// The harness every `probe_align` mode shares (bench/tune/align_probe_*.cu,
// one file per question probed; align_probe.cu lists the modes). One input on
// the device with its CPU reference, a check of any launch against it, and
// bench_align's timing (src/timing.hpp time_launches). Device only; not a
// test. No fmt here (.cu files): printf only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "align/align.hpp"
#include "align/reference.hpp"
#include "cuda_util.hpp"

namespace moekit::align::detail {}

// align's kernel internals and its public building blocks (tiny_kernel.cuh,
// args.cuh) under one name.
namespace moekit::align_probe {

namespace probe_names {
using namespace moekit::align::detail;
using namespace moekit::align;
}  // namespace probe_names
namespace ad = probe_names;

// One launch on input copy `copy` of a Setup, enqueued on `stream`.
using Launch = std::function<void(cudaStream_t, int)>;

// Router ids: E experts, topk per token, uniform or zipf (bench/align/bench_ids.hpp).
struct Shape {
  int E, topk;
  bool zipf;
};

// A shape at a token count and block size (floor, micro1, solo1).
struct Cell {
  Shape sh;
  int tokens;
  int block;
};

// Device copies of one input plus output buffers and the CPU reference.
struct Setup {
  align::Problem p;
  align::Outputs ref;
  std::vector<DeviceBuffer> ids;
  DeviceBuffer sorted, eids, total, ws;
  int copies = 1;
  bool pdl = false;  // every launch's pdl (Variant::launch's argument)
  Setup(const Shape& c, int tokens, std::mt19937_64& rng, int block_size = 128);
  // The relay kernel's last block holds kRelayLoads slots per thread.
  bool numel_ok(int threads) const;
  align::Buffers buffers(int copy) const;
  // One launch on poisoned outputs, checked against the reference. Also
  // zeroes the shared workspace: onepass needs it zero and keeps it so, but
  // the variants timed before it (twopass, say) leave tables in it.
  bool verify(const Launch& launch);
};

// A busy kernel on every SM for `ms` (clock ramp before a table).
void spin_ms(double ms);
// Per-launch median as bench_align times it: time_launches, 5 warm-up
// launches, 25 samples of a graph of `per_graph` launches.
double bench_like(const Launch& launch, int copies, int per_graph = 20);
// The product variant `name` (registry) on su.
Launch variant_launch(const Setup& su, const char* name);
// A product variant's time on su (1e9: not applicable, or wrong output).
double time_product(Setup& su, const char* name);
// A probe launch(su, copy, stream)'s time; -1 when `check` and its output
// differs from the CPU reference (a "wrong" column skips work and is timed
// unchecked).
template <class L>
double time_copy(Setup& su, L launch, bool check) {
  const Launch f = [&su, launch](cudaStream_t s, int k) { launch(su, k, s); };
  if (check && !su.verify(f)) return -1.0;
  return bench_like(f, su.copies);
}
double median_of(std::vector<double> v);
// PROBE_MIN_TOKENS / PROBE_MAX_TOKENS: only token counts in that range (a
// shorter device call).
bool token_in_range(int t);
void token_filter(std::vector<int>& tokens);
// The cells of issue #12: E = 8-4096 at 1-1024 tokens (B = 128), Llama-4
// decode rows (B = 16), DeepSeek-V2-Lite prefixes (B = 64).
std::vector<Cell> issue_cells();

// The modes (align_probe.cu: name, usage line, dispatch). `arg`: the word
// after the mode, or nullptr.
int calib_mode(const char* arg);     // align_probe_calib.cu
int ncu_mode(const char* arg);       // align_probe_calib.cu
int sweep_mode(const char* arg);     // align_probe_tiny.cu
int twopass_mode(const char* arg);   // align_probe_twopass.cu
int onepass_mode(const char* arg);   // align_probe_onepass.cu
int micro_mode(const char* arg);     // align_probe_micro.cu
int micro1_mode(const char* arg);    // align_probe_micro.cu
int relay_mode(const char* arg);     // align_probe_relay.cu
int solo_mode(const char* arg);      // align_probe_solo.cu
int solo1_mode(const char* arg);     // align_probe_solo.cu
int stripe_mode(const char* arg);    // align_probe_stripe.cu
int cluster_mode(const char* arg);   // align_probe_cluster.cu
int floor_mode(const char* arg);     // align_probe_floor.cu

}  // namespace moekit::align_probe
