// GPU test of the measurement itself (src/timing.*): a kernel that spins for
// a known time on the global timer must read as that time per launch, in
// graph-replay mode and in events mode (which once divided by the graph's
// launch count although it times one launch), and a launch must see what
// cudaMemset wrote just before on the legacy stream (the timing stream does
// not wait for it by itself).
#include <doctest/doctest.h>

#include <cstdint>

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
    big.fill_bytes(round);         // keeps the legacy stream busy for a while
    in.fill_bytes(0x10 + round);  // queued behind it
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
