//! @file
//! Opt-in to more than the default 48 KiB of dynamic shared memory per block.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <utility>

namespace moekit::prim {

//! Dynamic shared memory a kernel may use without the opt-in attribute.
constexpr std::size_t kDefaultDynamicSmem = 48 * 1024;

//! Lets `kernel` launch with `bytes` of dynamic shared memory on the current
//! device. The attribute is raised only when a launch needs more than any
//! before it on that device, so repeated launches (inside a graph capture,
//! say) make no further attribute calls (only cudaGetDevice). Per device: an attribute set while one
//! device is current does not hold on another (ep runs the experts' kernels
//! on every rank's GPU). Returns the cudaFuncSetAttribute error for the
//! launcher to return (the limit is the device's DeviceCaps::smem_optin).
//! @tparam Params the kernel's parameter types.
template <class... Params>
inline cudaError_t opt_in_smem(void (*kernel)(Params...), std::size_t bytes) {
  if (bytes <= kDefaultDynamicSmem) return cudaSuccess;
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  static std::mutex mu;
  static std::map<std::pair<int, const void*>, std::size_t> granted;
  const std::lock_guard<std::mutex> lock(mu);
  std::size_t& g = granted[{device, reinterpret_cast<const void*>(kernel)}];
  if (bytes <= g) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes));
  if (e == cudaSuccess) g = bytes;
  return e;
}

}  // namespace moekit::prim
