// GPU test of the measurement itself (src/timing.*): a kernel that spins for
// a known time on the global timer must read as that time per launch, in
// graph-replay mode and in events mode (which once divided by the graph's
// launch count although it times one launch), a launch must see what a
// DeviceBuffer memset wrote just before, and moekit's own GPU work must run on
// process_stream(), never on the legacy default stream (work there once made
// every later launch of the process ~0.18 us slower: docs/timing.md).
#include <doctest/doctest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "cuda_util.hpp"
#include "timing.hpp"

using namespace moekit;

namespace {

__global__ void spin_kernel(long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (static_cast<long long>(t - t0) < ns);
}

__global__ void copy_first_kernel(const std::uint32_t* in, std::uint32_t* out) { *out = *in; }

// Spins until the host writes *release, or for `ns` (then sets *timed_out).
__global__ void hold_kernel(const volatile int* release, int* timed_out, long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while (*release == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (static_cast<long long>(t - t0) > ns) {
      *timed_out = 1;
      return;
    }
  }
}

}  // namespace

TEST_CASE("timing: a 20 us kernel reads as 20 us per launch, with and without graphs") {
  for (bool graph : {true, false}) {
    TimingOptions t;
    t.warmup = 2;
    t.samples = 5;
    t.graph = graph;
    const TimingStats st = time_launches([](Stream s, int) { spin_kernel<<<1, 1, 0, s>>>(20000); }, 1, t);
    INFO("graph " << graph << ": median " << st.median_us << " us");
    CHECK(st.median_us >= 19.0);
    CHECK(st.median_us <= 40.0);
  }
}

TEST_CASE("timing: launches see what cudaMemset wrote just before") {
  DeviceBuffer big(std::size_t(1) << 30), in(4), out(4);
  for (int round = 0; round < 5; ++round) {
    out.fill_bytes(0);
    big.fill_bytes(round);         // a while of work on the stream
    in.fill_bytes(0x10 + round);
    TimingOptions t;
    t.warmup = 1;
    t.samples = 1;
    t.graph = false;
    (void)time_launches(
        [&](Stream s, int) { copy_first_kernel<<<1, 1, 0, s>>>(in.as<std::uint32_t>(), out.as<std::uint32_t>()); }, 1,
        t);
    std::uint32_t got = 0;
    out.download(&got, 4);
    const std::uint32_t b = 0x10 + round;
    CHECK(got == (b | b << 8 | b << 16 | b << 24));
  }
}

TEST_CASE("process stream: uploads, downloads and memsets stay off the legacy stream; timed launches get it") {
  // The legacy default stream is held by a kernel that waits for the host; a
  // DeviceBuffer call that used it would wait for that kernel, which then
  // gives up after a second and says so.
  int* flags = nullptr;  // [0]: release, [1]: timed out
  REQUIRE(cudaHostAlloc(&flags, 2 * sizeof(int), cudaHostAllocMapped) == cudaSuccess);
  flags[0] = flags[1] = 0;
  int* dflags = nullptr;
  REQUIRE(cudaHostGetDevicePointer(&dflags, flags, 0) == cudaSuccess);
  DeviceBuffer buf(4096);
  std::vector<unsigned char> host(4096, 7), back(4096, 0);
  (void)process_stream();  // created before the legacy stream is held
  hold_kernel<<<1, 1, 0, cudaStreamLegacy>>>(dflags, dflags + 1, 1000000000LL);
  REQUIRE(cudaGetLastError() == cudaSuccess);
  buf.fill_bytes(1);
  buf.upload(host.data(), host.size());
  buf.download(back.data(), back.size());
  reinterpret_cast<volatile int*>(flags)[0] = 1;
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(flags[1] == 0);
  CHECK(back == host);
  cudaFreeHost(flags);

  Stream seen = nullptr;
  TimingOptions t;
  t.warmup = 1;
  t.samples = 1;
  (void)time_launches(
      [&](Stream s, int) {
        seen = s;
        spin_kernel<<<1, 1, 0, s>>>(0);
      },
      1, t);
  CHECK(seen == process_stream());
}

TEST_CASE("timing: a launch that throws while the graph is captured leaves the stream usable") {
  // The launch throws on its first call inside the capture (after the
  // warm-up); the process's one stream must not stay capturing.
  TimingOptions t;
  t.warmup = 2;
  t.samples = 2;
  int calls = 0;
  CHECK_THROWS(time_launches(
      [&](Stream s, int) {
        if (++calls > t.warmup) throw std::runtime_error("launch failed");
        spin_kernel<<<1, 1, 0, s>>>(0);
      },
      1, t));
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
  REQUIRE(cudaStreamIsCapturing(process_stream(), &st) == cudaSuccess);
  CHECK(st == cudaStreamCaptureStatusNone);
  DeviceBuffer b(64);
  CHECK_NOTHROW(b.fill_bytes(3));
  CHECK(cudaGetLastError() == cudaSuccess);
}
