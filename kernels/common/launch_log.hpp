// The launches a run issues, as prim::launch_ex sees them: for the run
// report's kernel resources (block size and dynamic shared memory of each
// kernel the variant launched, src/kernel_resources.hpp). Host-visible: no
// CUDA headers.
#pragma once

#include <cstddef>
#include <vector>

namespace moekit {

struct LaunchRecord {
  const void* kernel = nullptr;  // the kernel's host stub (what cudaFuncGetAttributes takes)
  unsigned block_threads = 0;    // blockDim.x * y * z
  std::size_t dynamic_smem = 0;  // bytes per block
};

// Set by the run skeleton around one launch of the variant (never while
// timing); nullptr: launch_ex notes nothing. One thread issues a run's launches.
inline std::vector<LaunchRecord>* launch_log = nullptr;

}  // namespace moekit
