// Error kinds and the exit codes they map to (see README "Exit codes").
#pragma once

#include <stdexcept>
#include <string>

namespace moekit {

enum ExitCode : int { kOk = 0, kMismatch = 1, kBadInput = 2, kCudaError = 3 };

// Bad usage or bad input: exit 2. The message names the file and the problem.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A CUDA call failed, or no CUDA device where one is needed: exit 3.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace moekit
