#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernel_occupancy.hpp"
#include "self_symbols.hpp"

namespace moekit {
namespace {

// The host stub the runtime registered the kernel `mangled` under
// (self_symbols.hpp: host_stub_names); cudaFuncGetName confirms it.
const void* host_stub(std::string_view mangled, std::string& why) {
  why = "no host stub of this kernel in the executable's symbol table";
  for (const std::string& n : host_stub_names(mangled)) {
    std::string w;
    const void* fn = self_function(n, w);
    if (fn == nullptr) continue;
    if (kernel_symbol(fn) == mangled) return fn;
    why = "the host symbol found is not a kernel the CUDA runtime knows";
  }
  return nullptr;
}

int attribute(cudaDeviceAttr a, int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, a, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return v;
}

}  // namespace

std::string kernel_symbol(const void* fn) {
  const char* name = nullptr;
  if (cudaFuncGetName(&name, fn) != cudaSuccess || name == nullptr) {
    (void)cudaGetLastError();
    return {};
  }
  return name;
}

std::optional<RuntimeKernel> runtime_kernel(std::string_view mangled, int block, std::size_t dynamic_smem,
                                            std::string& why) {
  const void* fn = host_stub(mangled, why);
  if (fn == nullptr) return std::nullopt;
  return runtime_kernel(fn, block, dynamic_smem, why);
}

std::optional<RuntimeKernel> runtime_kernel(const void* fn, int block, std::size_t dynamic_smem, std::string& why) {
  cudaFuncAttributes fa{};
  if (const cudaError_t e = cudaFuncGetAttributes(&fa, fn); e != cudaSuccess) {
    (void)cudaGetLastError();
    why = std::string("cudaFuncGetAttributes: ") + cudaGetErrorString(e);
    return std::nullopt;
  }
  RuntimeKernel k;
  k.registers = fa.numRegs;
  k.local_bytes = static_cast<int>(fa.localSizeBytes);
  k.static_smem = static_cast<int>(fa.sharedSizeBytes);
  k.max_threads = fa.maxThreadsPerBlock;
  if (block <= 0) return k;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    why = "cudaGetDevice failed";
    return std::nullopt;
  }
  const int warp = std::max(1, attribute(cudaDevAttrWarpSize, device));
  const int max_threads_sm = attribute(cudaDevAttrMaxThreadsPerMultiProcessor, device);
  int blocks = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, fn, block, dynamic_smem);
      e != cudaSuccess) {
    (void)cudaGetLastError();
    why = std::string("cudaOccupancyMaxActiveBlocksPerMultiprocessor: ") + cudaGetErrorString(e);
    return std::nullopt;
  }
  const int warps_per_block = (block + warp - 1) / warp;
  k.block = block;
  k.dynamic_smem = dynamic_smem;
  k.blocks_per_sm = blocks;
  k.warps_per_sm = blocks * warps_per_block;
  k.max_warps_per_sm = max_threads_sm / warp;
  // Each resource's own bound on blocks per SM; the API's answer below all of
  // the non-register ones is the register file's.
  const int by_threads = max_threads_sm / (warps_per_block * warp);
  const int by_blocks = attribute(cudaDevAttrMaxBlocksPerMultiprocessor, device);
  const std::size_t smem_block = static_cast<std::size_t>(fa.sharedSizeBytes) + dynamic_smem +
                                 static_cast<std::size_t>(attribute(cudaDevAttrReservedSharedMemoryPerBlock, device));
  const std::size_t smem_sm = static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  const int by_smem = smem_block == 0 ? INT_MAX : static_cast<int>(smem_sm / smem_block);
  if (blocks == 0)
    k.limiter = "does not fit";
  else if (blocks < std::min({by_threads, by_blocks, by_smem}))
    k.limiter = "registers";
  else if (blocks == by_smem)
    k.limiter = "shared memory";
  else if (blocks == by_threads)
    k.limiter = "threads";
  else
    k.limiter = "blocks";
  return k;
}

}  // namespace moekit
