#include "profile.hpp"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_util.hpp"

namespace moekit {

void profile_one_launch(const std::string& range, const std::function<void(Stream)>& launch) {
  const cudaStream_t s = process_stream();
  launch(s);  // warm-up: module load, caches
  cuda_check_last("warm-up launch");
  cuda_check(cudaStreamSynchronize(s), "warm-up launch");
  cuda_check(cudaProfilerStart(), "cudaProfilerStart");
  nvtxRangePushA(range.c_str());
  launch(s);
  cuda_check_last("profiled launch");
  cuda_check(cudaStreamSynchronize(s), "profiled launch");
  nvtxRangePop();
  cuda_check(cudaProfilerStop(), "cudaProfilerStop");
}

}  // namespace moekit
