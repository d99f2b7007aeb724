// The combine launch-shape probe's candidates (bench/tune/combine_probe.cu).
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "combine/combine.hpp"

namespace moekit::probe {

struct Cand {
  const char* name;
  cudaError_t (*launch)(const combine::Problem& p, const combine::Buffers& b, cudaStream_t s, bool pdl);
};

// The candidates (bf16, H % 8 == 0, 16-byte aligned rows and out).
std::span<const Cand> candidates();

}  // namespace moekit::probe
