#include "profile.hpp"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "cuda_util.hpp"

namespace moekit {

void profile_one_launch(const std::string& range, const std::function<void(Stream)>& launch) {
  const Stream st = process_stream();
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(st);
  launch(st);  // warm-up: module load, caches
  cuda_check_last("warm-up launch");
  cuda_check(cudaStreamSynchronize(s), "warm-up launch");
  cuda_check(cudaProfilerStart(), "cudaProfilerStart");
  nvtxRangePushA(range.c_str());
  launch(st);
  cuda_check_last("profiled launch");
  cuda_check(cudaStreamSynchronize(s), "profiled launch");
  nvtxRangePop();
  cuda_check(cudaProfilerStop(), "cudaProfilerStop");
}

}  // namespace moekit
