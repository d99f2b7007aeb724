// Scaffolding shared by the GPU tests (tests/*/gpu_*.cpp): the sanitizer-subset
// switch, launching with the launch status checked, and one doctest assertion
// per (variant, case, run) whose failure names all of them. Device buffers
// (guard zones, misaligned inputs, workspaces) are the family's buffer
// description over src/device_set.hpp.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "cuda_util.hpp"

namespace moekit::test {

// MOEKIT_GPU_SUBSET=sanitizer: every family runs its small cases only (for
// compute-sanitizer memcheck / racecheck). gpu_test_main rejects other values.
inline bool sanitizer_subset() {
  const char* e = std::getenv("MOEKIT_GPU_SUBSET");
  return e != nullptr && std::string_view(e) == "sanitizer";
}

// Runs `launch` (a variant's launch on the default stream) `times` times
// back to back, then waits. Returns "" on success, else what went wrong: the
// status a launch returned, an error it left pending without returning it, or
// one the kernels raised. With times = 2 and a launch with pdl set, the
// second launch may start while the first finishes (programmatic dependent
// launch): its kernels must wait before touching what the first one writes.
template <class Launch>
std::string launch_and_sync(const Launch& launch, int times = 1) {
  try {
    for (int i = 0; i < times; ++i) {
      if constexpr (std::is_void_v<std::invoke_result_t<const Launch&>>) {
        launch();
      } else {
        cuda_check(static_cast<int>(launch()), "launch (status it returned)");
      }
      cuda_check_last("launch (error left pending)");
    }
    cuda_sync("kernel");
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// One doctest assertion per (variant, case, run): passes when `why` is
// empty, else fails naming the run (`what`: variant, shape, dtype, seed).
inline void expect_ok(const std::string& what, const std::string& why) {
  INFO(what);
  CHECK_MESSAGE(why.empty(), why);
}

}  // namespace moekit::test
