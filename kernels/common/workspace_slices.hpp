// One workspace cut into a slice per stage of a composed launch (experts:
// layout, combine, FFN; moe_path: route, permute, combine, FFN), each slice on
// its own 256-byte boundary. Host-visible: no CUDA headers.
#pragma once

#include <cstddef>

namespace moekit {

/// @tparam N the number of stages (slices), laid out in index order.
template <int N>
struct WorkspaceSlices {
  static constexpr std::size_t kAlign = 256;
  std::size_t bytes[N] = {};   // each stage's workspace_bytes (set by the caller)
  std::size_t offset[N] = {};  // where each starts (place())
  std::size_t total = 0;       // the whole workspace (place())

  // Offsets and total from bytes[].
  void place() {
    total = 0;
    for (int i = 0; i < N; ++i) {
      offset[i] = total;
      total += (bytes[i] + kAlign - 1) / kAlign * kAlign;
    }
  }
  // Slice i of the workspace `ws`; nullptr where that stage needs none.
  void* at(void* ws, int i) const {
    return ws != nullptr && bytes[i] > 0 ? static_cast<char*>(ws) + offset[i] : nullptr;
  }
};

}  // namespace moekit
