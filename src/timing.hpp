// Kernel timing, nvbench-style: measurement here, reporting elsewhere.
// No CUDA headers: streams are moekit::Stream.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/variant.hpp"

namespace moekit {

struct TimingOptions {
  int warmup = 10;    // untimed launches first
  int samples = 100;  // timed samples (each one launch, or one graph replay)
  bool cold = false;  // flush L2 before every timed launch (outside the timing)
  bool graph = true;  // time CUDA-graph replays instead of single launches
  int launches_per_graph = 20;  // launches captured per graph (per-launch time = replay / this)
};

struct TimingStats {
  double median_us = 0, min_us = 0, max_us = 0;  // per launch
  int samples = 0;
  std::string mode;  // human description: "graph replay x20, 3 input copies", ...
  std::string method{};  // "graph", "events" or "host" (the CPU reference under the host clock)
  bool cold = false;   // L2 flushed before each sample
  std::vector<double> samples_us{};  // per launch, in the order taken (timings.npy)
};

// `launch(stream, copy)` enqueues exactly one kernel launch (or the variant's
// fixed launch sequence) reading input copy `copy` (0 <= copy < copies). It must
// be graph-capturable. Rotating copies keeps a small input from sitting in L2
// between samples; pass copies = 1 to time one buffer.
TimingStats time_launches(const std::function<void(Stream, int)>& launch, int copies,
                          const TimingOptions& opt);

// Launches whose work runs on several streams with no dependency between
// them (ep's per-rank launches: one stream a GPU, the GPUs agreeing through
// device-side counters): `launch(copy)` enqueues one launch's work on every
// stream of `streams`. Each stream's share of launches_per_graph launches is
// captured into a graph of its own (the captures run side by side); a sample
// replays every graph on its stream, back to back from the host, between
// events on that stream, right after an untimed replay (so no stream waits
// for the host to issue the others); its time is the slowest stream's, per
// launch. devices[i]: the device of streams[i]. Always graphs (opt.graph and
// opt.cold are not read). A replay that fails part way leaves the GPUs that
// started it waiting on the others: the CUDA context is lost then.
TimingStats time_stream_graphs(const std::vector<Stream>& streams, const std::vector<int>& devices,
                               const std::function<void(int)>& launch, int copies, const TimingOptions& opt);

// How many input copies to rotate through so that the rotation exceeds L2
// (at most max_copies, and 1 when cold is set: the flush already evicts).
int rotation_copies(std::size_t input_bytes, bool cold, int max_copies = 16);

// Device-to-device copy bandwidth in GB/s (bytes read + bytes written), median
// of several cudaMemcpyAsync of 512 MiB; measured once per process.
double measured_copy_bandwidth_gbps();

// Read bandwidth in GB/s: a streaming reduction over 2 GiB (16-byte loads,
// each element read once, one word written per block), median of 10 after 2
// warm-ups; measured once per process. Reads alone go faster than the copy:
// the ceiling for kernels that stream weights (experts at decode).
double measured_read_bandwidth_gbps();

}  // namespace moekit
