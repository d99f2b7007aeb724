// act-and-mul's device buffers, declared once (src/device_set.hpp): the CLI
// job, bench/act_and_mul/bench_act.cpp and tests/act_and_mul/gpu_act.cpp build
// them here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "act_and_mul/act_and_mul.hpp"
#include "device_set.hpp"

namespace moekit::act {

inline std::size_t out_bytes(const Problem& p) {
  return std::size_t(p.tokens) * std::size_t(p.d) * (p.dtype == DType::f32 ? 4 : 2);
}

// act-and-mul's whole set: the input rows (rotated, misalignable), the output
// (misalignable: the vector paths must notice), the workspace. Outputs are
// poisoned with 0xFF bytes, a NaN pattern the kernels never produce, so a
// scan of the output finds every element left unwritten.
class DeviceBuffers {
 public:
  static constexpr unsigned char kPoison = 0xFF;

  DeviceBuffers(const Problem& p, std::span<const std::byte> input, WorkspaceNeed ws, const SetOptions& o)
      : set_(poisoned(o)), out_bytes_(out_bytes(p)) {
    in_ = set_.input("input", input.data(), input.size(), {.rotate = true, .misalign = true});
    out_ = set_.output("out", out_bytes_, {.misalign = true});
    ws_ = set_.workspace(ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.input = set_.ptr(in_, copy);
    b.out = set_.ptr(out_);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  // The output back to the poison (before a checked launch).
  void poison() { set_.poison(); }
  // The next variant's workspace (the input and output stay).
  void replace_workspace(WorkspaceNeed ws) { set_.replace_workspace(ws_, ws); }
  // Whether the workspace is all zero (a zeroed workspace handed back).
  bool workspace_zero() const { return set_.all_zero(ws_); }

  // The output's out_bytes(p) bytes into `out`, whatever else is wrong;
  // returns "" or a changed guard zone.
  std::string download(void* out) const {
    set_.download(out_, out, out_bytes_);
    if (std::string g = set_.broken_guard(); !g.empty()) return "wrote outside the output (guard zone of " + g + " changed)";
    return {};
  }
  int copies() const { return set_.copies(); }

 private:
  static SetOptions poisoned(SetOptions o) {
    o.poison = kPoison;
    return o;
  }

  DeviceSet set_;
  std::size_t out_bytes_;
  DeviceSet::Handle in_, out_, ws_;
};

// The least traffic of one launch: the input (2d per row) read once, the output written once.
inline double bytes_moved(const Problem& p) { return 3.0 * double(out_bytes(p)); }

}  // namespace moekit::act
