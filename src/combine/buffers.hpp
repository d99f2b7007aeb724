// combine's device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/combine/bench_combine.cpp and tests/combine/gpu_combine.cpp build
// them here; a family built on combine declares its output through OutputBuffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "combine/combine.hpp"
#include "device_set.hpp"

namespace moekit::combine {

inline std::size_t element_bytes(DType d) { return d == DType::f32 ? 4 : 2; }
inline std::size_t out_bytes(const Problem& p) {
  return std::size_t(p.tokens) * std::size_t(p.hidden) * element_bytes(p.dtype);
}

// What combine writes: out [T, H].
struct OutputBuffer {
  DeviceSet::Handle out;

  OutputBuffer() = default;
  OutputBuffer(DeviceSet& s, const Problem& p) : out(s.output("out", out_bytes(p))) {}

  // out_bytes(p) bytes into `host`; "" or a changed guard zone.
  std::string download(const DeviceSet& s, void* host) const {
    if (std::string g = s.broken_guard(); !g.empty()) return "wrote outside its outputs (guard zone of " + g + " changed)";
    s.download(out, host, s.slots()[out.index].bytes);
    return {};
  }
};

// Host views of combine's inputs.
struct HostInputs {
  std::span<const std::byte> expert_out;  // [P, H]
  std::span<const std::int32_t> inverse;  // [T, K]
  std::span<const float> weights;         // [T, K]
};

// combine's whole set: expert_out (rotated), inverse and weights, out, the workspace.
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, const HostInputs& in, WorkspaceNeed ws, const SetOptions& o) : set_(o) {
    x_ = set_.input("expert_out", in.expert_out.data(), in.expert_out.size(), {.rotate = true, .misalign = true});
    inv_ = set_.input("inverse", in.inverse.data(), in.inverse.size() * 4);
    w_ = set_.input("topk_weights", in.weights.data(), in.weights.size() * 4);
    out_ = OutputBuffer(set_, p);
    ws_ = set_.workspace(ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.expert_out = set_.ptr(x_, copy);
    b.inverse = set_.as<std::int32_t>(inv_);
    b.weights = set_.as<float>(w_);
    b.out = set_.ptr(out_.out);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  void poison() { set_.poison(); }
  // out_bytes(p) bytes into `host`; "" or a changed guard zone.
  std::string download(void* host) const { return out_.download(set_, host); }
  int copies() const { return set_.copies(); }

 private:
  DeviceSet set_;
  DeviceSet::Handle x_, inv_, w_, ws_;
  OutputBuffer out_;
};

// The least traffic of one launch: each used row read once, out written once,
// inverse and weights read.
inline double bytes_moved(const Problem& p, std::span<const std::int32_t> inverse) {
  std::int64_t used = 0;
  for (auto r : inverse) used += r >= 0;
  const double row = double(p.hidden) * double(element_bytes(p.dtype));
  return double(used) * row + double(p.tokens) * row + 8.0 * double(inverse.size());
}

}  // namespace moekit::combine
