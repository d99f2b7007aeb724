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
template <class Kernel>
inline void allow_smem(Kernel* kernel, std::size_t bytes) {
  if (bytes <= 48 * 1024) return;
  static std::mutex mu;
  static std::map<const void*, std::size_t> granted;
  const std::lock_guard<std::mutex> lock(mu);
  std::size_t& g = granted[reinterpret_cast<const void*>(kernel)];
  if (bytes <= g) return;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)) == cudaSuccess)
    g = bytes;
  cudaGetLastError();  // a failure resurfaces as the launch error
}

// Resident blocks per SM (occupancy), memoised per kernel and configuration.
template <class Kernel>
inline int blocks_per_sm(Kernel* kernel, int threads, std::size_t smem) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, std::size_t>, int> memo;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), threads, smem);
  const auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  allow_smem(kernel, smem);
  int n = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem) != cudaSuccess) {
    cudaGetLastError();
    n = 1;
  }
  n = n < 1 ? 1 : n;
  memo.emplace(key, n);
  return n;
}

// One launch of `kernel`, cooperative when asked (every block resident, or
// the launch fails instead of a grid barrier hanging), after the shared-memory
// opt-in: the launchers of the grid-barrier kernels (persistent, onepass).
template <class... Params, class... Actual>
inline void launch_cooperative(void (*kernel)(Params...), int grid, int threads, std::size_t smem,
                               cudaStream_t s, bool cooperative, Actual&&... args) {
  allow_smem(kernel, smem);
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
  cudaLaunchKernelEx(&cfg, kernel, std::forward<Actual>(args)...);
}

constexpr int kCountThreads = 1024;  // the single counting block of 0x1-0x5

}  // namespace moekit::align::detail
