// Host-side helpers for the align launchers: device limits and occupancy
// (launches and the shared-memory opt-in: kernels/primitives).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "align/align.hpp"
#include "align/policy.hpp"
#include "common/device.hpp"
#include "common/fits_smem.hpp"
#include "primitives/launch.cuh"
#include "primitives/smem.cuh"

namespace moekit::align::detail {

// Device-dependent limits hold only where a device is known (as fits_smem,
// common/fits_smem.hpp).
inline bool can_cooperate(const DeviceCaps& caps) { return !caps.present() || caps.cooperative; }

// Resident blocks per SM (occupancy) into *n, memoised per device, kernel
// and configuration (ep lays out on every rank's GPU, which need not be
// alike); on an error *n is 1 and the error is returned.
template <class Kernel>
inline cudaError_t blocks_per_sm(Kernel* kernel, int threads, std::size_t smem, int* n) {
  int device = 0;
  *n = 1;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, std::size_t>, int> memo;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device, reinterpret_cast<const void*>(kernel), threads, smem);
  const auto it = memo.find(key);
  *n = 1;
  if (it != memo.end()) {
    *n = it->second;
    return cudaSuccess;
  }
  if (const cudaError_t e = prim::opt_in_smem(kernel, smem); e != cudaSuccess) return e;
  int v = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, threads, smem);
      e != cudaSuccess)
    return e;
  *n = v < 1 ? 1 : v;
  memo.emplace(key, *n);
  return cudaSuccess;
}

constexpr int kCountThreads = 1024;  // the counting block of the count-then-scatter variants

// One int per expert and one more (counts, then their scan and its total):
// the dynamic shared memory of the one-table designs (baseline's count block,
// relay's last block, solo).
inline std::size_t expert_table_smem(int num_experts) {
  return sizeof(int) * (static_cast<std::size_t>(num_experts) + 1);
}
// The block scan's static scratch (prim::kBlockScanScratch ints, rounded up)
// that a block's dynamic shared memory must leave room for.
constexpr std::size_t kBlockScanReserve = 256;
// ... and what must fit a block that also holds that scratch.
inline std::size_t expert_table_block_smem(int num_experts) { return expert_table_smem(num_experts) + kBlockScanReserve; }

}  // namespace moekit::align::detail
