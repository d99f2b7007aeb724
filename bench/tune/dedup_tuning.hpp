// Tuning candidates of bench_dedup: the `fast` / `range-sort` kernels at other
// block shapes, digit widths and sort algorithms, plus an I/O floor kernel.
// Bench only (bench/tune/): the product instantiates just the registered
// shapes. No CUDA headers.
#pragma once

#include <span>

#include "dedup/dedup.hpp"

namespace moekit::dedup::tune {

struct Config {
  const char* name;
  int tile;  // row length the configuration is built for (timed at M = tile / 2048, k = 2048)
  LaunchStatus (*launch)(const Problem& p, const Buffers& b, Stream s, bool pdl);  // as Variant::launch
  bool checks = true;  // false: not a dedup (the I/O floor), output not compared
};

std::span<const Config> configs();

}  // namespace moekit::dedup::tune
