// The cublas variant's FFN (cublas.cuh): cuBLAS grouped GEMMs over the compact
// layout's per-expert row ranges, the act-and-mul kernel between them.
#include <cublas_v2.h>
#include <dlfcn.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "common/cuda_check.cuh"
#include "experts/act_rows.cuh"
#include "experts/cublas.cuh"
#include "experts/experts.hpp"
#include "primitives/launch.cuh"

// cublasGemmGroupedBatchedEx arrived in cuBLAS 12.5 (CUDA 12.5).
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120500
#define MOEKIT_HAS_GROUPED_GEMM 1
#else
#define MOEKIT_HAS_GROUPED_GEMM 0
#endif

namespace moekit::experts::cublas {
namespace {

constexpr std::size_t kAlign = 256;
// What cuBLAS is given as its workspace (cublasSetWorkspace): NVIDIA's
// recommended size for Hopper (4 MiB suffices before it).
constexpr std::size_t kCublasWorkspace = std::size_t(32) << 20;
constexpr int kPointers = 6;  // per group: gemm1's A, B, C, gemm2's A, B, C
constexpr int kMaxDevices = 64;

std::size_t round_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the workspace's parts.
struct Parts {
  std::size_t h = 0, a = 0, ptrs = 0, blas = 0, total = 0;
};
Parts parts(const Problem& p) {
  const std::size_t rows = static_cast<std::size_t>(p.rows()), e = p.element_bytes();
  Parts s;
  s.h = 0;
  s.a = s.h + round_up(rows * 2 * static_cast<std::size_t>(p.inter) * e);
  s.ptrs = s.a + round_up(rows * static_cast<std::size_t>(p.inter) * e);
  s.blas = s.ptrs + round_up(std::size_t(kPointers) * std::max<std::int32_t>(p.experts, 1) * sizeof(void*));
  s.total = s.blas + kCublasWorkspace;
  return s;
}

#if MOEKIT_HAS_GROUPED_GEMM

// cuBLAS is loaded at run time, on the first use of this variant, not linked:
// libcublasLt alone maps about half a gigabyte, which every other command
// would pay at start (and could not start under a 1 GB address-space cap).
// Only the five entry points below are used; the header gives their types.
struct Api {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  decltype(&cublasSetPointerMode_v2) set_pointer_mode = nullptr;
  decltype(&cublasGemmGroupedBatchedEx) grouped = nullptr;
  std::string error;  // why it could not be loaded; empty when loaded
};
const Api& api() {
  static const Api a = [] {
    Api r;
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      r.error = "cuBLAS could not be loaded (" + name + ": " + (e != nullptr ? e : "not found") +
                "; the CUDA toolkit's lib directory must be on the loader's path)";
      return r;
    }
    r.create = reinterpret_cast<decltype(r.create)>(dlsym(lib, "cublasCreate_v2"));
    r.set_stream = reinterpret_cast<decltype(r.set_stream)>(dlsym(lib, "cublasSetStream_v2"));
    r.set_workspace = reinterpret_cast<decltype(r.set_workspace)>(dlsym(lib, "cublasSetWorkspace_v2"));
    r.set_pointer_mode = reinterpret_cast<decltype(r.set_pointer_mode)>(dlsym(lib, "cublasSetPointerMode_v2"));
    r.grouped = reinterpret_cast<decltype(r.grouped)>(dlsym(lib, "cublasGemmGroupedBatchedEx"));
    if (!r.create || !r.set_stream || !r.set_workspace || !r.set_pointer_mode || !r.grouped)
      r.error = "the loaded " + name + " lacks cublasGemmGroupedBatchedEx (cuBLAS 12.5 or newer is needed)";
    return r;
  }();
  return a;
}

// One handle per device, created on the first launch there (never inside a
// capture: ffn refuses those first) and kept for the process: destroying it
// at exit could run after the CUDA context is gone. `lock` serializes its use
// (stream and workspace are per-handle state).
std::mutex handle_mutex;
cudaError_t device_handle(cublasHandle_t* out) {
  int dev = 0;
  if (const cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  if (dev < 0 || dev >= kMaxDevices) return cudaErrorInvalidDevice;
  static std::array<cublasHandle_t, kMaxDevices> handles{};
  if (handles[dev] == nullptr) {
    cublasHandle_t h = nullptr;
    if (api().create(&h) != CUBLAS_STATUS_SUCCESS) return cudaErrorInitializationError;
    handles[dev] = h;
  }
  *out = handles[dev];
  return cudaSuccess;
}

// A cuBLAS status as the nearest cudaError_t (LaunchStatus carries only those).
cudaError_t to_cuda(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return cudaSuccess;
    case CUBLAS_STATUS_NOT_INITIALIZED: return cudaErrorInitializationError;
    case CUBLAS_STATUS_ALLOC_FAILED: return cudaErrorMemoryAllocation;
    case CUBLAS_STATUS_INVALID_VALUE: return cudaErrorInvalidValue;
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED: return cudaErrorNotSupported;
    case CUBLAS_STATUS_EXECUTION_FAILED: return cudaErrorLaunchFailure;
    default: return cudaErrorUnknown;
  }
}

// The groups of one grouped call: per-group sizes on the host, pointers in
// the device array `dev_ptrs` (A, B, C of each group, group after group).
struct Grouped {
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> m, n, k, lda, ldb, ldc, size;
  std::vector<float> alpha, beta;
  int count() const { return static_cast<int>(m.size()); }
};

// y_e = x_e . W_e^T for row-major x_e [rows_e, K], W_e [M, K], y_e [rows_e, M]:
// in cuBLAS's column-major terms y_e^T [M, rows_e] = op(W_e) x_e^T with
// op = transpose (W_e read as the column-major [K, M] it is), x_e^T read as
// the column-major [K, rows_e] it is. Every group: M, K shared, N = rows_e.
void add_group(Grouped& g, std::int64_t rows, std::int64_t M, std::int64_t K) {
  g.ta.push_back(CUBLAS_OP_T);
  g.tb.push_back(CUBLAS_OP_N);
  g.m.push_back(static_cast<int>(M));
  g.n.push_back(static_cast<int>(rows));
  g.k.push_back(static_cast<int>(K));
  g.lda.push_back(static_cast<int>(K));
  g.ldb.push_back(static_cast<int>(K));
  g.ldc.push_back(static_cast<int>(M));
  g.size.push_back(1);
  g.alpha.push_back(1.0f);
  g.beta.push_back(0.0f);
}

cublasStatus_t grouped_gemm(cublasHandle_t h, const Grouped& g, void* const* dev_ptrs, cudaDataType_t t) {
  const int n = g.count();
  return api().grouped(h, g.ta.data(), g.tb.data(), g.m.data(), g.n.data(), g.k.data(), g.alpha.data(),
                                    const_cast<const void* const*>(dev_ptrs), t, g.lda.data(),
                                    const_cast<const void* const*>(dev_ptrs + n), t, g.ldb.data(), g.beta.data(),
                                    dev_ptrs + 2 * n, t, g.ldc.data(), n, g.size.data(), CUBLAS_COMPUTE_32F);
}

template <class T>
LaunchStatus ffn_typed(const Problem& p, const Buffers& b, void* ws, cudaStream_t s, bool pdl) {
  // Inside a capture the wait below would invalidate it: refuse before any work.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (const cudaError_t e = cudaStreamIsCapturing(s, &capture); e != cudaSuccess) return e;
  if (capture != cudaStreamCaptureStatusNone) return cudaErrorStreamCaptureUnsupported;

  // The row counts, on the host (what cuBLAS's grouped call takes).
  const int E = p.experts;
  std::vector<std::int64_t> off(static_cast<std::size_t>(E) + 1);
  if (const cudaError_t e =
          cudaMemcpyAsync(off.data(), b.expert_offsets, off.size() * sizeof(std::int64_t), cudaMemcpyDeviceToHost, s);
      e != cudaSuccess)
    return e;
  if (const cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) return e;
  // The layout stage wrote them: ascending within [0, rows] (anything else
  // would make cuBLAS read out of bounds).
  if (off[0] < 0 || off[E] > p.rows()) return cudaErrorInvalidValue;
  for (int e = 0; e < E; ++e)
    if (off[e + 1] < off[e]) return cudaErrorInvalidValue;

  const Parts pt = parts(p);
  char* base = static_cast<char*>(ws);
  T* h = reinterpret_cast<T*>(base + pt.h);
  T* a = reinterpret_cast<T*>(base + pt.a);
  void** ptrs = reinterpret_cast<void**>(base + pt.ptrs);
  const std::int64_t H = p.hidden, I = p.inter;
  const T* x = static_cast<const T*>(b.permuted);
  const T* w1 = static_cast<const T*>(b.w1);
  const T* w2 = static_cast<const T*>(b.w2);
  T* y = static_cast<T*>(b.y);

  // Experts with rows, one group each; pointer arrays [A1.. B1.. C1.. A2.. B2.. C2..].
  Grouped g1, g2;
  std::vector<int> used;
  for (int e = 0; e < E; ++e)
    if (off[e + 1] > off[e]) used.push_back(e);
  const int G = static_cast<int>(used.size());
  if (G == 0) return cudaSuccess;  // no kept slot: combine reads no row of y
  std::vector<void*> host_ptrs(std::size_t(kPointers) * G);
  for (int j = 0; j < G; ++j) {
    const int e = used[j];
    const std::int64_t r0 = off[e], rows = off[e + 1] - off[e];
    add_group(g1, rows, 2 * I, H);
    add_group(g2, rows, H, I);
    host_ptrs[0 * G + j] = const_cast<T*>(w1 + std::int64_t(e) * 2 * I * H);
    host_ptrs[1 * G + j] = const_cast<T*>(x + r0 * H);
    host_ptrs[2 * G + j] = h + r0 * 2 * I;
    host_ptrs[3 * G + j] = const_cast<T*>(w2 + std::int64_t(e) * H * I);
    host_ptrs[4 * G + j] = a + r0 * I;
    host_ptrs[5 * G + j] = y + r0 * H;
  }
  // From pageable memory: the copy is staged before the call returns.
  if (const cudaError_t e =
          cudaMemcpyAsync(ptrs, host_ptrs.data(), host_ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice, s);
      e != cudaSuccess)
    return e;

  const std::lock_guard<std::mutex> lock(handle_mutex);
  cublasHandle_t handle = nullptr;
  if (const cudaError_t e = device_handle(&handle); e != cudaSuccess) return e;
  // The stream first: cublasSetStream resets the workspace to cuBLAS's own.
  if (const cublasStatus_t st = api().set_stream(handle, s); st != CUBLAS_STATUS_SUCCESS) return to_cuda(st);
  if (const cublasStatus_t st = api().set_workspace(handle, base + pt.blas, kCublasWorkspace);
      st != CUBLAS_STATUS_SUCCESS)
    return to_cuda(st);
  if (const cublasStatus_t st = api().set_pointer_mode(handle, CUBLAS_POINTER_MODE_HOST); st != CUBLAS_STATUS_SUCCESS)
    return to_cuda(st);
  const cudaDataType_t t = std::is_same_v<T, __nv_bfloat16> ? CUDA_R_16BF : CUDA_R_16F;

  if (const cublasStatus_t st = grouped_gemm(handle, g1, ptrs, t); st != CUBLAS_STATUS_SUCCESS) return to_cuda(st);
  // The rows in use are [0, off[E]): act_rows reads that count on the device.
  if (const cudaError_t e = static_cast<cudaError_t>(launch_act_rows(p, h, a, b.expert_offsets, s, pdl));
      e != cudaSuccess)
    return e;
  return to_cuda(grouped_gemm(handle, g2, ptrs + 3 * G, t));
}

#endif  // MOEKIT_HAS_GROUPED_GEMM

}  // namespace

std::size_t workspace_bytes(const Problem& p, const DeviceCaps&) { return parts(p).total; }

const char* not_applicable(const Problem& p, const DeviceCaps&) {
#if !MOEKIT_HAS_GROUPED_GEMM
  (void)p;
  return "built with cuBLAS older than 12.5, which has no cublasGemmGroupedBatchedEx";
#else
  if (p.permute.layout != permute::Layout::compact)
    return "needs the compact layout (--layout compact): its groups are expert_offsets' per-expert row ranges";
  if (p.rows() > INT_MAX || 2 * p.inter > INT_MAX || p.hidden > INT_MAX)
    return "rows, 2*I and H must fit cuBLAS's int sizes (< 2^31)";
  if (!api().error.empty()) return api().error.c_str();
  return nullptr;
#endif
}

LaunchStatus ffn(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
#if !MOEKIT_HAS_GROUPED_GEMM
  (void)p, (void)b, (void)ws, (void)s, (void)pdl;
  return cudaErrorNotSupported;
#else
  return p.dtype == DType::bf16 ? ffn_typed<__nv_bfloat16>(p, b, ws, s, pdl) : ffn_typed<__half>(p, b, ws, s, pdl);
#endif
}

}  // namespace moekit::experts::cublas
