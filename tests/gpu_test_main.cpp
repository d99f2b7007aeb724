// main() for GPU test programs: exit 77 (meson's "skipped") when no CUDA device
// is usable, so the gpu suite skips cleanly on CI machines without a GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "cuda_util.hpp"

int main(int argc, char** argv) {
  if (moekit::cuda_device_count() == 0) {
    std::puts("SKIP: no CUDA device found");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
