#include "timing.hpp"

#include <cuda_runtime.h>
#include <string>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "cuda_util.hpp"

namespace moekit {
namespace {

struct GraphGuard {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t e = nullptr;
  ~GraphGuard() {
    if (e) cudaGraphExecDestroy(e);
    if (g) cudaGraphDestroy(g);
  }
};

// Median (the mean of the middle two for an even count), min and max of
// per-launch samples, which the stats keep in the order taken.
TimingStats stats_of(std::vector<double> us) {
  std::vector<double> sorted = us;
  std::sort(sorted.begin(), sorted.end());
  const std::size_t n = sorted.size();
  TimingStats st;
  st.samples = int(n);
  st.min_us = sorted.front();
  st.max_us = sorted.back();
  st.median_us = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  st.samples_us = std::move(us);
  return st;
}

void capture(GraphGuard& gg, cudaStream_t s, int n, int copies, int& next_copy,
             const std::function<void(Stream, int)>& launch) {
  cuda_check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  try {
    for (int i = 0; i < n; ++i) {
      launch(reinterpret_cast<Stream>(s), next_copy);
      next_copy = (next_copy + 1) % copies;
    }
  } catch (...) {
    // The stream is the process's one stream: never leave it capturing.
    (void)cudaStreamEndCapture(s, &gg.g);
    (void)cudaGetLastError();
    throw;
  }
  cudaError_t launch_err = cudaGetLastError();
  cudaError_t end_err = cudaStreamEndCapture(s, &gg.g);
  cuda_check(launch_err, "kernel launch during graph capture");
  cuda_check(end_err, "cudaStreamEndCapture");
  cuda_check(cudaGraphInstantiate(&gg.e, gg.g, 0), "cudaGraphInstantiate");
}

}  // namespace

TimingStats time_stream_graphs(const std::vector<Stream>& streams, const std::vector<int>& devices,
                               const std::function<void(int)>& launch, int copies, const TimingOptions& opt) {
  const std::size_t n = streams.size();
  if (devices.size() != n) throw std::invalid_argument("time_stream_graphs: one device per stream");
  const int per_graph = std::max(opt.launches_per_graph, 1), samples = std::max(opt.samples, 1);
  copies = std::max(copies, 1);
  // The caller's device back, and every event destroyed, on every way out.
  struct Restore {
    int prev = 0;
    std::vector<std::pair<int, cudaEvent_t>> events;
    Restore() { cudaGetDevice(&prev); }
    ~Restore() {
      for (const auto& [d, e] : events) {
        cudaSetDevice(d);
        cudaEventDestroy(e);
      }
      cudaSetDevice(prev);
    }
    cudaEvent_t event(int d) {
      cuda_check(cudaSetDevice(d), "cudaSetDevice");
      cudaEvent_t e = nullptr;
      cuda_check(cudaEventCreate(&e), "cudaEventCreate");
      events.emplace_back(d, e);
      return e;
    }
  } restore;
  std::vector<cudaStream_t> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = reinterpret_cast<cudaStream_t>(streams[i]);
  // Relaxed: the launch sets devices, and the captures run side by side.
  std::vector<GraphGuard> gg(n);
  std::size_t begun = 0;
  int next_copy = 0;
  try {
    for (; begun < n; ++begun)
      cuda_check(cudaStreamBeginCapture(s[begun], cudaStreamCaptureModeRelaxed), "cudaStreamBeginCapture");
    for (int i = 0; i < per_graph; ++i) {
      launch(next_copy);
      next_copy = (next_copy + 1) % copies;
    }
  } catch (...) {
    for (std::size_t i = 0; i < begun; ++i) (void)cudaStreamEndCapture(s[i], &gg[i].g);
    (void)cudaGetLastError();
    throw;
  }
  const cudaError_t launch_err = cudaGetLastError();
  cudaError_t end_err = cudaSuccess;
  for (std::size_t i = 0; i < n; ++i)
    if (const cudaError_t e = cudaStreamEndCapture(s[i], &gg[i].g); end_err == cudaSuccess) end_err = e;
  cuda_check(launch_err, "kernel launch during graph capture");
  cuda_check(end_err, "cudaStreamEndCapture");
  for (std::size_t i = 0; i < n; ++i) {
    cuda_check(cudaSetDevice(devices[i]), "cudaSetDevice");
    cuda_check(cudaGraphInstantiate(&gg[i].e, gg[i].g, 0), "cudaGraphInstantiate");
  }
  // A replay that fails part way leaves the graphs already launched waiting
  // on their peers until their barrier traps: the context is lost then.
  auto replay_all = [&](const std::vector<cudaEvent_t>* a, const std::vector<cudaEvent_t>* b) {
    for (std::size_t i = 0; i < n; ++i) {
      cuda_check(cudaSetDevice(devices[i]), "cudaSetDevice");
      if (a) cuda_check(cudaEventRecord((*a)[i], s[i]), "cudaEventRecord");
      cuda_check(cudaGraphLaunch(gg[i].e, s[i]), "cudaGraphLaunch");
      if (b) cuda_check(cudaEventRecord((*b)[i], s[i]), "cudaEventRecord");
    }
  };
  for (int w = 0; w < (opt.warmup > 0 ? std::max(opt.warmup / per_graph, 1) : 0); ++w) replay_all(nullptr, nullptr);
  std::vector<cudaEvent_t> a(n), b(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = restore.event(devices[i]);
    b[i] = restore.event(devices[i]);
  }
  std::vector<double> us(std::size_t(samples), 0.0);
  for (int k = 0; k < samples; ++k) {
    // An untimed replay just before the timed one, with no host wait between:
    // every stream is busy when its timed replay starts, so the host issuing
    // the streams one after another does not show as a barrier's wait.
    replay_all(nullptr, nullptr);
    replay_all(&a, &b);
    for (std::size_t i = 0; i < n; ++i) {
      cuda_check(cudaEventSynchronize(b[i]), "cudaEventSynchronize");
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, a[i], b[i]), "cudaEventElapsedTime");
      us[std::size_t(k)] = std::max(us[std::size_t(k)], 1000.0 * ms / per_graph);
    }
  }
  TimingStats st = stats_of(std::move(us));
  st.mode = "a graph of " + std::to_string(per_graph) + " launches per stream (" + std::to_string(n) +
            " streams), the slowest stream's replay";
  st.method = "graph";
  return st;
}

int rotation_copies(std::size_t input_bytes, bool cold, int max_copies) {
  if (cold || input_bytes == 0) return 1;
  std::size_t l2 = device_props().l2_bytes;
  std::size_t n = (2 * l2 + input_bytes - 1) / input_bytes;
  return static_cast<int>(std::clamp<std::size_t>(n, 1, static_cast<std::size_t>(max_copies)));
}

TimingStats time_launches(const std::function<void(Stream, int)>& launch, int copies,
                          const TimingOptions& opt) {
  copies = std::max(copies, 1);
  const int samples = std::max(opt.samples, 1);
  const bool use_graph = opt.graph;
  // Launches between two events: a graph replays per_graph of them, the
  // events mode times one launch.
  const int per_graph = !use_graph || opt.cold ? 1 : std::max(opt.launches_per_graph, 1);
  // Everything moekit enqueues runs on process_stream(); a caller may still
  // have used another stream: finish all work before the first sample.
  cuda_check(cudaDeviceSynchronize(), "work before timing");
  const cudaStream_t s = process_stream();

  // L2 flush buffer: twice L2, written with memset outside the timed region.
  DeviceBuffer flush;
  if (opt.cold) flush = DeviceBuffer(2 * device_props().l2_bytes);

  int next_copy = 0;
  for (int i = 0; i < opt.warmup; ++i) {
    launch(reinterpret_cast<Stream>(s), next_copy);
    next_copy = (next_copy + 1) % copies;
  }
  cuda_check_last("warm-up launch");
  cuda_check(cudaStreamSynchronize(s), "warm-up");

  GraphGuard gg;
  if (use_graph) {
    capture(gg, s, per_graph, copies, next_copy, launch);
    cuda_check(cudaGraphLaunch(gg.e, s), "cudaGraphLaunch (warm-up)");
    cuda_check(cudaStreamSynchronize(s), "graph warm-up");
  }

  std::vector<cudaEvent_t> ev(2 * samples);
  for (auto& e : ev) cuda_check(cudaEventCreate(&e), "cudaEventCreate");
  std::vector<double> us(samples);
  try {
    for (int i = 0; i < samples; ++i) {
      if (opt.cold) {
        cuda_check(cudaMemsetAsync(flush.get(), i & 0xff, flush.size(), s), "L2 flush");
      }
      cuda_check(cudaEventRecord(ev[2 * i], s), "cudaEventRecord");
      if (use_graph) {
        cuda_check(cudaGraphLaunch(gg.e, s), "cudaGraphLaunch");
      } else {
        launch(reinterpret_cast<Stream>(s), next_copy);
        next_copy = (next_copy + 1) % copies;
      }
      cuda_check(cudaEventRecord(ev[2 * i + 1], s), "cudaEventRecord");
      // Bound the queue so the host never runs far ahead of the device.
      if ((i & 15) == 15) cuda_check(cudaStreamSynchronize(s), "timed launches");
    }
    cuda_check_last("timed launch");
    cuda_check(cudaStreamSynchronize(s), "timed launches");
    for (int i = 0; i < samples; ++i) {
      float ms = 0;
      cuda_check(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
      us[i] = 1000.0 * ms / per_graph;
    }
  } catch (...) {
    for (auto& e : ev) cudaEventDestroy(e);
    throw;
  }
  for (auto& e : ev) cudaEventDestroy(e);

  TimingStats st = stats_of(std::move(us));
  std::string m = use_graph ? "graph replay, " + std::to_string(per_graph) +
                                  (per_graph == 1 ? " launch" : " launches") + " per replay"
                            : std::string("events around each launch");
  if (opt.cold) m += ", L2 flushed before each sample";
  if (copies > 1) m += ", rotating " + std::to_string(copies) + " input copies";
  st.mode = m;
  st.method = use_graph ? "graph" : "events";
  st.cold = opt.cold;
  return st;
}

namespace {
// Median milliseconds of `work` on process_stream() over 10 event-timed runs
// after 2 warm-ups: the device's bandwidth probes.
template <class F>
double median_event_ms(F work, const char* what) {
  const cudaStream_t s = process_stream();
  cudaEvent_t e0, e1;
  cuda_check(cudaEventCreate(&e0), "cudaEventCreate");
  cuda_check(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    cuda_check(cudaEventRecord(e0, s), "cudaEventRecord");
    work(s);
    cuda_check(cudaGetLastError(), what);
    cuda_check(cudaEventRecord(e1, s), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(e1), what);
    float t = 0;
    cuda_check(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
    if (i >= 2) ms.push_back(t);  // first two are warm-up
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
}  // namespace

double measured_copy_bandwidth_gbps() {
  static double cached = 0;
  if (cached > 0) return cached;
  const std::size_t bytes = std::size_t(512) << 20;
  DeviceBuffer a(bytes), b(bytes);
  a.fill_bytes(1);
  const double med = median_event_ms(
      [&](cudaStream_t s) {
        cuda_check(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s), "copy");
      },
      "copy");
  cached = 2.0 * double(bytes) / (med * 1e-3) / 1e9;
  return cached;
}

namespace {
// Each thread sums 16-byte words (four in flight per loop) as integers, so
// nothing is skipped; one word per block keeps the compiler from dropping
// the loads.
__global__ void read_stream_kernel(const uint4* __restrict__ in, std::size_t n, unsigned* __restrict__ out) {
  unsigned acc = 0;
  const std::size_t stride = std::size_t(gridDim.x) * blockDim.x;
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = in[i], b = in[i + stride], c = in[i + 2 * stride], d = in[i + 3 * stride];
    acc += a.x ^ b.y ^ c.z ^ d.w;
    acc += a.y + b.x + c.w + d.z;
    acc ^= a.z + b.w + c.x + d.y;
    acc += a.w ^ b.z ^ c.y ^ d.x;
  }
  for (; i < n; i += stride) acc += in[i].x ^ in[i].y ^ in[i].z ^ in[i].w;
  acc += __shfl_xor_sync(0xffffffffu, acc, 16);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}
}  // namespace

double measured_read_bandwidth_gbps() {
  static double cached = 0;
  if (cached > 0) return cached;
  const std::size_t bytes = std::size_t(2) << 30;
  DeviceBuffer a(bytes);
  a.fill_bytes(1);
  int sms = 0, dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  const int threads = 512, blocks = sms * 4;  // 2048 threads per SM: full occupancy, a few waves of loads
  DeviceBuffer sink(std::size_t(blocks) * sizeof(unsigned));
  const double med = median_event_ms(
      [&](cudaStream_t s) {
        read_stream_kernel<<<blocks, threads, 0, s>>>(a.as<const uint4>(), bytes / sizeof(uint4), sink.as<unsigned>());
      },
      "read bandwidth kernel");
  cached = double(bytes) / (med * 1e-3) / 1e9;
  return cached;
}

}  // namespace moekit
