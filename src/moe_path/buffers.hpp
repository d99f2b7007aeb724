// moe_path's device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/moe_path/bench_moe_path.cpp and tests/moe_path/gpu_moe_path.cpp build
// them here. permute's and combine's outputs are declared by their own
// descriptions (permute::OutputBuffers, combine::OutputBuffer), not again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "combine/buffers.hpp"
#include "device_set.hpp"
#include "moe_path/moe_path.hpp"
#include "moe_path/reference.hpp"
#include "permute/buffers.hpp"

namespace moekit::moe_path {

// Host views of the path's inputs.
struct HostInputs {
  std::span<const std::byte> logits;   // routed: [T, E] as route reads them (route.dtype)
  std::span<const float> bias;         // routed: [E], or empty
  std::span<const std::byte> hidden;   // [T, H]
  std::span<const std::int32_t> ids;   // not routed: [T, K]
  std::span<const float> weights;      // not routed: [T, K]
};

// The path's set: logits (rotated) and bias when routed, hidden rows
// (rotated); the ids and weights (route's outputs, or inputs read only);
// permute's outputs; combine's out; the workspace (every stage's slice).
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, const HostInputs& in, WorkspaceNeed ws, const SetOptions& o) : p_(p), set_(o) {
    const std::size_t slots = std::size_t(p.permute.align.numel);
    if (p.routed) {
      logits_ = set_.input("logits", in.logits.data(), in.logits.size(), {.rotate = true});
      if (!in.bias.empty()) bias_ = set_.input("bias", in.bias.data(), in.bias.size() * 4);
    }
    hidden_ = set_.input("hidden", in.hidden.data(), in.hidden.size(), {.rotate = true});
    if (p.routed) {
      ids_ = set_.output("topk_ids", slots * 4);
      w_ = set_.output("topk_weights", slots * 4);
    } else {
      ids_ = set_.input("topk_ids", in.ids.data(), slots * 4);
      w_ = set_.input("topk_weights", in.weights.data(), slots * 4);
    }
    perm_ = permute::OutputBuffers(set_, p.permute);
    out_ = combine::OutputBuffer(set_, p.combine);
    ws_ = set_.workspace(ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.logits = set_.ptr(logits_, copy);
    b.bias = set_.as<float>(bias_);
    b.hidden = set_.ptr(hidden_, copy);
    // Given ids and weights are read only; the Buffers type is route's output's.
    b.topk_ids = set_.as<std::int32_t>(ids_);
    b.topk_weights = set_.as<float>(w_);
    perm_.wire(set_, b);
    b.out = set_.ptr(out_.out);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  void poison() { set_.poison(); }

  // Every stage's outputs into `got` (the ids and weights the path used:
  // route's, or the given ones as the device holds them). Returns "" or what
  // is wrong beyond what moe_path::check sees (a changed guard zone, a row
  // count out of range).
  std::string download(Outputs& got) const {
    got.routed.ids = set_.read<std::int32_t>(ids_);
    got.routed.weights = set_.read<float>(w_);
    if (std::string e = perm_.download(set_, p_.permute, got.permuted); !e.empty()) return e;
    got.out.resize(combine::out_bytes(p_.combine));
    return out_.download(set_, got.out.data());
  }
  bool workspace_zero() const { return set_.all_zero(ws_); }
  int copies() const { return set_.copies(); }

 private:
  Problem p_;
  DeviceSet set_;
  DeviceSet::Handle logits_, bias_, hidden_, ids_, w_, ws_;
  permute::OutputBuffers perm_;
  combine::OutputBuffer out_;
};

// Each stage's own count: route reads the logits (and bias) and writes ids
// and weights; permute reads the ids, reads and writes each real row and
// writes the inverse map; combine reads each used row, the inverse map and
// the weights, and writes the output.
inline double bytes_moved(const Problem& p, std::size_t logits_bytes, std::size_t bias_count) {
  const double slots = double(p.permute.align.numel), row = double(p.permute.row_bytes);
  double b = 0;
  if (p.routed) b += double(logits_bytes) + 4.0 * double(bias_count) + 8.0 * slots;
  b += 4.0 * slots + 2.0 * slots * row + 4.0 * slots;
  b += slots * row + double(p.combine.tokens) * row + 8.0 * slots;
  return b;
}

}  // namespace moekit::moe_path
