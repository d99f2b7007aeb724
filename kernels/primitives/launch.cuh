//! @file
//! Kernel launches through cudaLaunchKernelEx with launch attributes (PDL,
//! cooperative), returning the launch error.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <set>
#include <utility>

#include "common/launch_log.hpp"
#include "primitives/pdl.cuh"
#include "primitives/smem.cuh"

namespace moekit::prim {

//! Blocks per thread block cluster that every sm_90+ device can run; more
//! (up to 16 on sm_90) need the non-portable opt-in (launch_with_smem).
constexpr int kPortableClusterBlocks = 8;

//! What a launch asks for beyond grid, block and shared memory.
struct LaunchAttrs {
  bool pdl = false;          //!< may overlap the previous kernel (see pdl.cuh)
  bool cooperative = false;  //!< every block co-resident, or the launch fails
  int cluster = 0;           //!< blocks per thread block cluster (x); 0: no cluster
};

//! The attributes of a family's plain launch: PDL when the launch asks
//! (Variant::launch's `pdl`, which the caller sets only where the device has
//! PDL; common/variant.hpp), nothing else.
inline LaunchAttrs pdl_attrs(bool pdl) { return LaunchAttrs{pdl, false}; }

//! Launches kernel<<<grid, block, smem, s>>>(args...) with `attrs`; returns the
//! launch error (no opt-in: see launch_with_smem). Notes the launch in
//! moekit::launch_log when a run asks (common/launch_log.hpp).
//! @tparam Params the kernel's parameter types; Actual converts to them.
template <class... Params, class... Actual>
inline cudaError_t launch_ex(void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t smem,
                             cudaStream_t s, LaunchAttrs attrs, Actual&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[3];
  unsigned n = 0;
  if (attrs.cluster > 0) {
    attr[n] = cudaLaunchAttribute{};
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = static_cast<unsigned>(attrs.cluster);
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (attrs.cooperative) {
    attr[n] = cudaLaunchAttribute{};
    attr[n].id = cudaLaunchAttributeCooperative;
    attr[n].val.cooperative = 1;
    ++n;
  }
  if (attrs.pdl) attr[n++] = pdl_attribute();
  cfg.attrs = attr;
  cfg.numAttrs = n;
  if (launch_log != nullptr)
    launch_log->push_back({reinterpret_cast<const void*>(kernel), block.x * block.y * block.z, smem});
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Actual>(args)...);
}

//! Lets `kernel` launch in clusters of more than kPortableClusterBlocks
//! blocks; the attribute is set once per kernel and device (as opt_in_smem
//! does).
template <class... Params>
inline cudaError_t opt_in_cluster(void (*kernel)(Params...), int blocks) {
  if (blocks <= kPortableClusterBlocks) return cudaSuccess;
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  static std::mutex mu;
  static std::set<std::pair<int, const void*>> granted;
  const std::lock_guard<std::mutex> lock(mu);
  const std::pair<int, const void*> key{device, reinterpret_cast<const void*>(kernel)};
  if (granted.count(key) != 0) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e == cudaSuccess) granted.insert(key);
  return e;
}

//! launch_ex after the shared-memory opt-in (smem.cuh) and, for clusters of
//! more than kPortableClusterBlocks, the non-portable size opt-in; the first
//! error.
template <class... Params, class... Actual>
inline cudaError_t launch_with_smem(void (*kernel)(Params...), dim3 grid, dim3 block,
                                    std::size_t smem, cudaStream_t s, LaunchAttrs attrs,
                                    Actual&&... args) {
  if (const cudaError_t e = opt_in_smem(kernel, smem); e != cudaSuccess) return e;
  if (const cudaError_t e = opt_in_cluster(kernel, attrs.cluster); e != cudaSuccess) return e;
  return launch_ex(kernel, grid, block, smem, s, attrs, std::forward<Actual>(args)...);
}

//! A grid-barrier kernel's launch: cooperative (every block resident, or the
//! launch fails instead of a grid barrier hanging), after the shared-memory
//! opt-in, with PDL when `pdl`. With PDL the grid may be launched while the
//! previous one still holds SMs; its blocks pdl_wait() before the first grid
//! barrier, and the previous grid never waits for them, so the barrier cannot
//! deadlock. (A launch without the attribute, to measure what it costs, is
//! bench/tune's: launch_with_smem with plain attributes.)
template <class... Params, class... Actual>
inline cudaError_t launch_cooperative(void (*kernel)(Params...), int grid, int threads,
                                      std::size_t smem, cudaStream_t s, bool pdl, Actual&&... args) {
  return launch_with_smem(kernel, dim3(grid), dim3(threads), smem, s,
                          LaunchAttrs{pdl, /*cooperative=*/true}, std::forward<Actual>(args)...);
}

}  // namespace moekit::prim
