// main() for GPU test programs: exit 77 (meson's "skipped") when no CUDA device
// is usable, so the gpu suite skips cleanly on CI machines without a GPU.
// MOEKIT_GPU_SUBSET=sanitizer selects every family's small cases (gpu_case.hpp);
// any other value, or a switch of before, is refused rather than silently
// running the full grid under compute-sanitizer.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "cuda_util.hpp"

int main(int argc, char** argv) {
  const char* subset = std::getenv("MOEKIT_GPU_SUBSET");
  if (subset != nullptr && *subset != '\0' && std::string_view(subset) != "sanitizer") {
    std::fprintf(stderr, "MOEKIT_GPU_SUBSET=%s: the only subset is \"sanitizer\"\n", subset);
    return 2;
  }
  for (const char* old : {"DEDUP_SUBSET", "MOEKIT_ACT_SUBSET"}) {
    if (std::getenv(old) != nullptr) {
      std::fprintf(stderr, "%s is gone: use MOEKIT_GPU_SUBSET=sanitizer\n", old);
      return 2;
    }
  }
  if (moekit::cuda_device_count() == 0) {
    std::puts("SKIP: no CUDA device found");
    return 77;
  }
  if (subset != nullptr && *subset != '\0') std::puts("MOEKIT_GPU_SUBSET=sanitizer: small cases only");
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
