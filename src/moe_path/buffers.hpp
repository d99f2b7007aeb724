// moe_path's device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/moe_path/bench_moe_path.cpp and tests/moe_path/gpu_moe_path.cpp build
// them here. permute's and combine's outputs are declared by their own
// descriptions (permute::OutputBuffers, combine::OutputBuffer), not again.
// With the expert FFN the set adds W1, W2 (uploaded, or generated on the
// device as src/experts/buffers.hpp does) and y.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "combine/buffers.hpp"
#include "cuda_util.hpp"
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

// The expert FFN's weights (p.ffn): given host arrays (the dtype's bits), or
// empty: generated on the device from `seed` (experts::generate_weights),
// never on the host.
struct HostWeights {
  std::span<const std::byte> w1, w2;  // [E, 2I, H], [E, H, I]
  std::uint64_t seed = 0;
};

// The path's set: logits (rotated) and bias when routed, hidden rows
// (rotated); the ids and weights (route's outputs, or inputs read only);
// with ffn W1 and W2 (one copy); permute's outputs; with ffn y; combine's
// out; the workspace (every stage's slice).
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, const HostInputs& in, WorkspaceNeed ws, const SetOptions& o,
                const HostWeights& weights = {})
      : p_(p), set_(o) {
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
    if (p.ffn) {
      const bool given = !weights.w1.empty();
      w1_ = set_.input("w1", given ? weights.w1.data() : nullptr, p.experts.w1_elements() * 2);
      w2_ = set_.input("w2", given ? weights.w2.data() : nullptr, p.experts.w2_elements() * 2);
      if (!given) {
        cuda_check(experts::generate_weights(p.experts, weights.seed, set_.ptr(w1_), set_.ptr(w2_), process_stream()),
                   "generating the expert weights");
        cuda_sync("generating the expert weights");
      }
    }
    perm_ = permute::OutputBuffers(set_, p.permute);
    if (p.ffn) y_ = set_.output("y", std::size_t(p.experts.rows()) * std::size_t(p.experts.hidden) * 2);
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
    if (p_.ffn) {
      b.w1 = set_.ptr(w1_);
      b.w2 = set_.ptr(w2_);
      b.y = set_.ptr(y_);
    }
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
    got.slot_rows = ffn_lists_slots(p_, device_caps());
    if (got.slot_rows) {
      got.permuted = {};
      got.permuted.inverse = set_.read<std::int32_t>(perm_.inverse);  // the FFN's, over its slot rows
    } else if (std::string e = perm_.download(set_, p_.permute, got.permuted); !e.empty()) {
      return e;
    }
    if (p_.ffn) got.y = set_.read<std::uint16_t>(y_);
    got.out.resize(combine::out_bytes(p_.combine));
    return out_.download(set_, got.out.data());
  }
  bool workspace_zero() const { return set_.all_zero(ws_, zeroed_workspace_bytes(p_, device_caps())); }
  int copies() const { return set_.copies(); }

 private:
  Problem p_;
  DeviceSet set_;
  DeviceSet::Handle logits_, bias_, hidden_, ids_, w_, w1_, w2_, y_, ws_;
  permute::OutputBuffers perm_;
  combine::OutputBuffer out_;
};

// Each stage's own count: route reads the logits (and bias) and writes ids
// and weights; permute reads the ids, reads and writes each real row and
// writes the inverse map; the FFN reads each row and the weights of every
// expert with a row (`active_experts`, counted by the caller) once and
// writes y; combine reads each used row, the inverse map and the weights,
// and writes the output. `slot_rows` (an FFN that listed the slots itself):
// no permute stage, the ids read and the inverse map written by the FFN.
inline double bytes_moved(const Problem& p, std::size_t logits_bytes, std::size_t bias_count,
                          std::int64_t active_experts = 0, bool slot_rows = false) {
  const double slots = double(p.permute.align.numel), row = double(p.permute.row_bytes);
  double b = 0;
  if (p.routed) b += double(logits_bytes) + 4.0 * double(bias_count) + 8.0 * slots;
  b += slot_rows ? 8.0 * slots : 4.0 * slots + 2.0 * slots * row + 4.0 * slots;
  if (p.ffn) b += 2.0 * slots * row + double(active_experts) * 3.0 * double(p.experts.hidden) * double(p.experts.inter) * 2.0;
  b += slots * row + double(p.combine.tokens) * row + 8.0 * slots;
  return b;
}

}  // namespace moekit::moe_path
