// On a GPU: the CUDA runtime's attributes of every kernel a variant names
// (cudaFuncGetAttributes of the host stub this binary registered) against the
// build's records for the cubin the device runs: registers, local memory,
// static shared memory. Occupancy at the launch bound must fit a block.
#include <doctest/doctest.h>

#include <string>

#include "common/device.hpp"
#include "family.hpp"
#include "kernel_occupancy.hpp"
#include "kernel_resources.hpp"

using namespace moekit;

TEST_CASE("runtime attributes agree with the build's records for this device's architecture") {
  const DeviceCaps& caps = device_caps();
  REQUIRE(caps.present());
  const std::vector<int> archs = record_archs(kernel_records());
  const int arch = runtime_arch(caps.arch(), archs);
  INFO("device sm_" << caps.arch() << ", cubin sm_" << arch);
  REQUIRE(arch > 0);  // a device the build has no cubin for runs PTX: nothing recorded to compare
  int checked = 0;
  for (const auto& f : families()) {
    const std::string op(f->command());
    for (const VariantRow& v : f->variants(caps)) {
      const KernelMatch m = match_binary(op, own_kernels(v.kernels));
      for (const KernelRecord* r : m.records) {
        if (r->sm != arch) continue;
        CAPTURE(op);
        CAPTURE(v.name);
        CAPTURE(demangle(r->mangled));
        std::string why;
        const auto k = runtime_kernel(r->mangled, r->launch_bound, 0, why);
        CAPTURE(why);
        REQUIRE(k.has_value());
        CHECK(k->registers == r->registers);
        CHECK(k->local_bytes == r->local_bytes);
        CHECK(k->static_smem == r->static_smem);
        if (r->launch_bound > 0) {
          CHECK(k->max_threads <= r->launch_bound);
          CHECK(k->blocks_per_sm >= 1);
          CHECK(k->warps_per_sm <= k->max_warps_per_sm);
          CHECK(k->limiter != "");
        }
        ++checked;
      }
    }
  }
  MESSAGE(checked << " (variant, kernel) records checked on " << caps.name);
  CHECK(checked > 0);
}
