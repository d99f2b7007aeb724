// A kernel of this binary as the CUDA runtime sees it on the current device:
// cudaFuncGetAttributes and the theoretical occupancy
// (cudaOccupancyMaxActiveBlocksPerMultiprocessor). The kernel is found by its
// mangled name (kernel_resources.hpp): nvcc names a kernel's host stub, the
// pointer the runtime registers it under, with the same symbol, so the
// binary's own symbol table gives the pointer, and cudaFuncGetName confirms it.
// Host-visible: no CUDA headers.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace moekit {

struct RuntimeKernel {
  // cudaFuncGetAttributes
  int registers = 0, local_bytes = 0, static_smem = 0, max_threads = 0;
  // Occupancy at `block` threads and `dynamic_smem` bytes per block; block 0:
  // not computed (the launch chooses its block size).
  int block = 0;
  std::size_t dynamic_smem = 0;
  int blocks_per_sm = 0, warps_per_sm = 0, max_warps_per_sm = 0;
  // What stops one more block: "registers", "shared memory", "threads" or
  // "blocks" (the per-SM block limit); "does not fit" when no block fits.
  std::string limiter;
};

// The kernel named `mangled` on the current device; nullopt with `why` set when
// this binary has no such kernel or a CUDA call fails (the error is cleared).
std::optional<RuntimeKernel> runtime_kernel(std::string_view mangled, int block, std::size_t dynamic_smem,
                                            std::string& why);
// The same for a kernel's host stub (a LaunchRecord's kernel).
std::optional<RuntimeKernel> runtime_kernel(const void* host_stub, int block, std::size_t dynamic_smem,
                                            std::string& why);
// The mangled name the runtime registered a host stub under; "" if none.
std::string kernel_symbol(const void* host_stub);

}  // namespace moekit
