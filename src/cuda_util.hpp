// Thin host-side wrappers over the CUDA runtime. This header needs no CUDA
// headers; the implementation (cuda_util.cpp) does.
#pragma once

#include <cstddef>
#include <string>

#include "common/variant.hpp"

namespace moekit {

// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int cuda_device_count();

// Throws CudaError naming `what` if the last launch or an earlier async call failed.
void cuda_check_last(const char* what);
// Throws CudaError naming `what` if `status` (a cudaError_t) is not success.
void cuda_check(int status, const char* what);

void cuda_sync(const char* what = "cudaDeviceSynchronize");

// The current device while alive, then the previous one again (a command
// that drives several GPUs: ep's ranks). Throws CudaError where cudaSetDevice fails.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int prev_ = 0;
};

// The one stream all of moekit's GPU work runs on (uploads, downloads,
// memsets, checked, timed and profiled launches): one per device, created on
// first use (thread-safe), never destroyed. On an H200 (driver 580) every kernel launch of
// a process costs ~0.18 us more, for the rest of the process, once a second
// stream (the legacy default stream included: cudaMemset runs a kernel on
// it) has run a few kernels; docs/timing.md "One stream".
Stream process_stream();

// Owning device allocation (cudaMalloc). Move-only.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t size() const { return bytes_; }

  // Synchronous, on process_stream() (non-blocking: work a caller left on
  // another stream is not waited for; synchronize it first). `offset`: bytes
  // from the start of the allocation (a body between guard zones).
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  void fill_bytes(int byte_value);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

struct DeviceProps {
  std::string name;
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  std::size_t l2_bytes = 0;
  std::size_t global_mem_bytes = 0;
  double dram_peak_gbps = 0.0;  // memory clock x bus width (0: not reported)
  int driver_version = 0, runtime_version = 0;
};
DeviceProps device_props();

// The CUDA runtime moekit was linked with, and the installed driver's CUDA
// version (1000 * major + 10 * minor): both asked without a device; 0 when
// unknown (no NVIDIA driver installed).
int cuda_runtime_version();
int cuda_driver_version();

}  // namespace moekit
