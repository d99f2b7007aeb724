#include "cuda_util.hpp"

#include <cuda_runtime.h>
#include <string>

#include <map>
#include <mutex>
#include <utility>

#include "common/device.hpp"
#include "errors.hpp"

namespace moekit {

int cuda_device_count() {
  int n = 0;
  const cudaError_t before = cudaPeekAtLastError();
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    if (before == cudaSuccess) (void)cudaGetLastError();  // drop our own "no driver" status only
    return 0;
  }
  return n;
}

void cuda_check(int status, const char* what) {
  auto s = static_cast<cudaError_t>(status);
  if (s != cudaSuccess) {
    throw CudaError(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(s) + " (" +
                    cudaGetErrorName(s) + ")");
  }
}

void cuda_check_last(const char* what) { cuda_check(cudaGetLastError(), what); }

void cuda_sync(const char* what) { cuda_check(cudaDeviceSynchronize(), what); }

DeviceScope::DeviceScope(int device) {
  cuda_check(cudaGetDevice(&prev_), "cudaGetDevice");
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
}

DeviceScope::~DeviceScope() { (void)cudaSetDevice(prev_); }

Stream process_stream() {
  static std::mutex mu;
  static std::map<int, cudaStream_t> streams;
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  const std::lock_guard<std::mutex> lock(mu);
  auto it = streams.find(dev);
  if (it == streams.end()) {
    cudaStream_t s = nullptr;
    cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    it = streams.emplace(dev, s).first;
  }
  return it->second;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  // Zero-byte buffers get a real (tiny) allocation so pointers are never null.
  cuda_check(cudaMalloc(&ptr_, bytes ? bytes : 16), "cudaMalloc");
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  if (!bytes) return;
  const cudaStream_t s = process_stream();
  cuda_check(cudaMemcpyAsync(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice, s), "upload");
  cuda_check(cudaStreamSynchronize(s), "upload");
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  if (!bytes) return;
  const cudaStream_t s = process_stream();
  cuda_check(cudaMemcpyAsync(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost, s), "download");
  cuda_check(cudaStreamSynchronize(s), "download");
}

void DeviceBuffer::fill_bytes(int byte_value) {
  const cudaStream_t s = process_stream();
  cuda_check(cudaMemsetAsync(ptr_, byte_value, bytes_ ? bytes_ : 16, s), "cudaMemset");
  cuda_check(cudaStreamSynchronize(s), "cudaMemset");
}

DeviceProps device_props() {
  const DeviceCaps& c = device_caps();
  if (!c.present()) throw CudaError("no usable CUDA device");
  DeviceProps d;
  d.name = c.name;
  d.sm_count = c.sm_count;
  d.cc_major = c.cc_major;
  d.cc_minor = c.cc_minor;
  d.l2_bytes = c.l2_bytes;
  d.global_mem_bytes = c.global_mem;
  d.dram_peak_gbps = c.dram_peak_gbps;
  cuda_check(cudaDriverGetVersion(&d.driver_version), "cudaDriverGetVersion");
  cuda_check(cudaRuntimeGetVersion(&d.runtime_version), "cudaRuntimeGetVersion");
  return d;
}

int cuda_runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) (void)cudaGetLastError(), v = 0;
  return v;
}

int cuda_driver_version() {
  int v = 0;  // 0 when no driver is installed
  if (cudaDriverGetVersion(&v) != cudaSuccess) (void)cudaGetLastError(), v = 0;
  return v;
}

}  // namespace moekit
