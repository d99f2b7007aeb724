// ncu support: exactly one launch between cudaProfilerStart/Stop inside an NVTX
// range, so `ncu --profile-from-start off moekit ... --profile` captures only it.
#pragma once

#include <functional>
#include <string>

#include "common/variant.hpp"

namespace moekit {

// One untimed warm-up launch, then one profiled launch in NVTX range `range`.
void profile_one_launch(const std::string& range, const std::function<void(Stream)>& launch);

}  // namespace moekit
