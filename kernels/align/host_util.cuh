// Host-side helpers for the align launchers: device limits and the dynamic
// shared memory opt-in.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "common/device.hpp"

namespace moekit::align::detail {

// Device-dependent limits hold only where a device is known: without one
// (listing or checking on a CPU-only machine) only the device-independent
// limits reject a problem; launching then fails with the real CUDA error.
inline bool fits_smem(const DeviceCaps& caps, std::size_t bytes) {
  return !caps.present() || bytes <= caps.smem_optin;
}
inline bool can_cooperate(const DeviceCaps& caps) { return !caps.present() || caps.cooperative; }

// Kernels above the default 48 KiB of dynamic shared memory must opt in. The
// attribute is raised only when a launch needs more than any before it, so
// repeated launches (inside a graph capture, say) make no further calls.
// Returns the cudaFuncSetAttribute error, for the launcher to return.
template <class Kernel>
inline cudaError_t allow_smem(Kernel* kernel, std::size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  static std::mutex mu;
  static std::map<const void*, std::size_t> granted;
  const std::lock_guard<std::mutex> lock(mu);
  std::size_t& g = granted[reinterpret_cast<const void*>(kernel)];
  if (bytes <= g) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes));
  if (e == cudaSuccess) g = bytes;
  return e;
}

// Resident blocks per SM (occupancy) into *n, memoised per kernel and
// configuration; on an error *n is 1 and the error is returned.
template <class Kernel>
inline cudaError_t blocks_per_sm(Kernel* kernel, int threads, std::size_t smem, int* n) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, std::size_t>, int> memo;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), threads, smem);
  const auto it = memo.find(key);
  *n = 1;
  if (it != memo.end()) {
    *n = it->second;
    return cudaSuccess;
  }
  if (const cudaError_t e = allow_smem(kernel, smem); e != cudaSuccess) return e;
  int v = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, threads, smem);
      e != cudaSuccess)
    return e;
  *n = v < 1 ? 1 : v;
  memo.emplace(key, *n);
  return cudaSuccess;
}

// One launch of `kernel`, cooperative when asked (every block resident, or
// the launch fails instead of a grid barrier hanging), after the shared-memory
// opt-in: the launchers of the grid-barrier kernels (persistent, onepass).
template <class... Params, class... Actual>
inline cudaError_t launch_cooperative(void (*kernel)(Params...), int grid, int threads,
                                      std::size_t smem, cudaStream_t s, bool cooperative,
                                      Actual&&... args) {
  if (const cudaError_t e = allow_smem(kernel, smem); e != cudaSuccess) return e;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cooperative ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Actual>(args)...);
}

constexpr int kCountThreads = 1024;  // the single counting block of 0x1-0x5

}  // namespace moekit::align::detail
