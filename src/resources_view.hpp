// Rows of kernel resources as moekit prints them: `moekit variants OP
// --resources` (the build's records per variant, with runtime attributes and
// occupancy on a GPU) and the "resources" member of a kernel command's JSON
// report (the kernels a run launched). docs/resources.md reads them.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/device.hpp"
#include "common/launch_log.hpp"
#include "kernel_occupancy.hpp"
#include "kernel_resources.hpp"

namespace moekit {

struct ResourceRow {
  std::string op, variant;
  std::string kernel;   // short demangled name: "micro_kernel<int, 256>"
  std::string mangled;  // the symbol (cuobjdump, ncu, `moekit sass --kernel`)
  int arch = 0;         // cubin architecture (90); 0: the build has no cubin for this device
  const KernelRecord* record = nullptr;  // the build's record, or nullptr (PTX JIT)
  int block = 0;        // threads per block: the launch's (runs) or the launch bound (0: unknown)
  std::optional<std::size_t> dynamic_smem;  // the launch's bytes (runs only)
  std::optional<RuntimeKernel> runtime;     // on a GPU: cudaFuncGetAttributes + occupancy
  std::string note;     // why runtime or occupancy is missing
};

// The records of a variant's own kernels (kernel_resources.hpp own_kernels):
// on a GPU those of the cubin it runs, with runtime attributes and, where the
// block size is known (the launch bound), occupancy; without one every
// architecture the build compiled. Throws InputError when the spec names
// nothing.
std::vector<ResourceRow> variant_resource_rows(std::string_view op, std::string_view variant, const DeviceCaps& caps);

// The kernels a run launched (its launch log), in first-launch order, each
// with its launch's block size and dynamic shared memory.
std::vector<ResourceRow> launch_resource_rows(std::string_view op, std::string_view variant,
                                              std::span<const LaunchRecord> log, const DeviceCaps& caps);

std::string resource_row_json(const ResourceRow& r);  // one JSON object
std::string resource_csv_header();
std::string resource_row_csv(const ResourceRow& r);
// "8 blocks, 64/64 warps (threads)", or "-".
std::string occupancy_text(const ResourceRow& r);

}  // namespace moekit
