#include <cuda_runtime.h>

#include <array>
#include <mutex>

#include "common/device.hpp"

namespace moekit {
namespace {

constexpr int kMaxOrdinals = 64;

// A failed runtime call is recorded as the thread's last error; drop it only
// when no earlier error was pending, so nothing produced elsewhere is erased.
void forget_own_error(cudaError_t before) {
  if (before == cudaSuccess) (void)cudaGetLastError();
}

DeviceCaps query(int dev) {
  DeviceCaps c;
  cudaDeviceProp p{};
  const cudaError_t before = cudaPeekAtLastError();
  if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
    forget_own_error(before);
    return c;
  }
  c.ordinal = dev;
  c.name = p.name;
  c.cc_major = p.major;
  c.cc_minor = p.minor;
  c.sm_count = p.multiProcessorCount;
  c.smem_optin = p.sharedMemPerBlockOptin;
  c.smem_per_sm = p.sharedMemPerMultiprocessor;
  c.l2_bytes = static_cast<std::size_t>(p.l2CacheSize);
  c.global_mem = p.totalGlobalMem;
  c.max_threads_per_sm = p.maxThreadsPerMultiProcessor;
  c.cooperative = p.cooperativeLaunch != 0;
  c.pdl = p.major >= 9;
  // Double data rate: two transfers a memory clock (kHz) on each bus bit.
  int clock_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess)
    c.dram_peak_gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  else
    forget_own_error(before);
  return c;
}

}  // namespace

const DeviceCaps& device_caps() {
  static const DeviceCaps absent{};
  static std::array<std::once_flag, kMaxOrdinals> once;
  static std::array<DeviceCaps, kMaxOrdinals> cache;
  const cudaError_t before = cudaPeekAtLastError();
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    forget_own_error(before);
    return absent;
  }
  if (dev < 0 || dev >= kMaxOrdinals) return absent;
  std::call_once(once[dev], [dev] { cache[dev] = query(dev); });
  return cache[dev];
}

}  // namespace moekit
