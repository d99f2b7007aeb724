// Tuning candidates of the bench (tile of 4096 values only). No CUDA headers.
#pragma once

#include <span>

#include "dedup/dedup.hpp"

namespace moekit::dedup::tune {

struct Config {
  const char* name;
  void (*launch)(const Problem& p, const Buffers& b, Stream s);  // needs M*k <= 4096
};

std::span<const Config> configs();

}  // namespace moekit::dedup::tune
