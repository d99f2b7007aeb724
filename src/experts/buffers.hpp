// experts' device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/experts/bench_experts.cpp and tests/experts/gpu_experts.cpp build
// them here. permute's and combine's outputs are declared by their own
// descriptions (permute::OutputBuffers, combine::OutputBuffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "combine/buffers.hpp"
#include "cuda_util.hpp"
#include "device_set.hpp"
#include "experts/experts.hpp"
#include "permute/buffers.hpp"

namespace moekit::experts {

// Host views of the inputs. Empty w1/w2: generated on the device from `seed`
// (generate_weights), never uploaded.
struct HostInputs {
  std::span<const std::byte> hidden;          // [T, H]
  std::span<const std::int32_t> ids;          // [T, K]
  std::span<const float> weights;             // [T, K]
  std::span<const std::int32_t> expert_map;   // [map_size] or empty
  std::span<const std::byte> w1, w2;          // given weights, or empty
  std::uint64_t seed = 0;                     // generated weights
  // Weights already on the device (the dtype, [E, 2I, H] and [E, H, I]):
  // neither uploaded nor generated, so a bench generates a model's weights
  // (22 GB for DeepSeek-V3) once for all its cells.
  const void* device_w1 = nullptr;
  const void* device_w2 = nullptr;
};

// The set: hidden rows (rotated), ids, weights, expert map, W1 and W2 (one
// copy: uploaded or generated in place, or the caller's device_w1/w2),
// permute's outputs, y, combine's out, the workspace (every stage's slice).
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, const HostInputs& in, WorkspaceNeed ws, const SetOptions& o) : p_(p), set_(o) {
    const std::size_t slots = std::size_t(p.permute.align.numel);
    // Misalignable: the GPU test's checked set starts it off the allocation's alignment.
    hidden_ = set_.input("hidden", in.hidden.data(), in.hidden.size(), {.rotate = true, .misalign = true});
    ids_ = set_.input("topk_ids", in.ids.data(), slots * 4);
    w_ = set_.input("topk_weights", in.weights.data(), slots * 4);
    if (!in.expert_map.empty()) map_ = set_.input("expert_map", in.expert_map.data(), in.expert_map.size() * 4);
    const bool given = !in.w1.empty();
    device_w1_ = in.device_w1;
    device_w2_ = in.device_w2;
    if (device_w1_ == nullptr) {
      w1_ = set_.input("w1", given ? in.w1.data() : nullptr, p.w1_elements() * 2);
      w2_ = set_.input("w2", given ? in.w2.data() : nullptr, p.w2_elements() * 2);
    }
    if (!given && device_w1_ == nullptr) {
      cuda_check(generate_weights(p, in.seed, set_.ptr(w1_), set_.ptr(w2_), process_stream()),
                 "generating the expert weights");
      cuda_sync("generating the expert weights");
    }
    perm_ = permute::OutputBuffers(set_, p.permute);
    y_ = set_.output("y", std::size_t(p.rows()) * std::size_t(p.hidden) * 2);
    out_ = combine::OutputBuffer(set_, p.combine);
    ws_ = set_.workspace(ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.hidden = set_.ptr(hidden_, copy);
    b.topk_ids = set_.as<std::int32_t>(ids_);
    b.topk_weights = set_.as<float>(w_);
    b.expert_map = set_.as<std::int32_t>(map_);
    b.w1 = device_w1_ != nullptr ? device_w1_ : set_.ptr(w1_);
    b.w2 = device_w2_ != nullptr ? device_w2_ : set_.ptr(w2_);
    perm_.wire(set_, b);
    b.y = set_.ptr(y_);
    b.out = set_.ptr(out_.out);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  void poison() { set_.poison(); }
  // A later variant's workspace, the inputs and outputs kept (benches, GPU tests).
  void replace_workspace(WorkspaceNeed need) { set_.replace_workspace(ws_, need); }
  // Whether the part of the workspace that v keeps zeroed came back all zero
  // (zeroed_workspace_bytes).
  bool workspace_zero(const Variant& v) const {
    return set_.all_zero(ws_, zeroed_workspace_bytes(v, p_, device_caps()));
  }

  // out [T, H] into `out`; with `y`, the y rows [rows, H] and the inverse map
  // [T, K] (check_y). Returns "" or what is wrong (a changed guard zone).
  std::string download(std::vector<std::uint16_t>& out, std::vector<std::uint16_t>* y = nullptr,
                       std::vector<std::int32_t>* inverse = nullptr) const {
    if (std::string g = set_.broken_guard(); !g.empty()) return "wrote outside its outputs (guard zone of " + g + " changed)";
    out.resize(std::size_t(p_.tokens) * std::size_t(p_.hidden));
    set_.download(out_.out, out.data(), out.size() * 2);
    if (y != nullptr) {
      y->resize(std::size_t(p_.rows()) * std::size_t(p_.hidden));
      set_.download(y_, y->data(), y->size() * 2);
    }
    if (inverse != nullptr) *inverse = set_.read<std::int32_t>(perm_.inverse);
    return {};
  }
  int copies() const { return set_.copies(); }

 private:
  Problem p_;
  DeviceSet set_;
  DeviceSet::Handle hidden_, ids_, w_, map_, w1_, w2_, y_, ws_;
  const void* device_w1_ = nullptr;
  const void* device_w2_ = nullptr;
  permute::OutputBuffers perm_;
  combine::OutputBuffer out_;
};

// The least traffic of one launch: the weights of every expert that has a
// row (`active` experts, counted by the caller) read once, each slot's row
// read and its y written and read once (the layout's copy and combine's
// gather counted too), the output written once.
inline double bytes_moved(const Problem& p, std::int64_t active_experts, std::int64_t kept_slots) {
  const double row = double(p.hidden) * 2.0;
  const double weights = double(active_experts) * 3.0 * double(p.hidden) * double(p.inter) * 2.0;
  return weights + double(p.tokens) * row          // hidden read
         + 2.0 * double(kept_slots) * row          // y written by the FFN and read by combine
         + double(p.tokens) * row;                 // out written
}
// Multiply-adds x 2 of one launch: 3 I H per kept slot.
inline double flops(const Problem& p, std::int64_t kept_slots) {
  return 2.0 * double(kept_slots) * 3.0 * double(p.hidden) * double(p.inter);
}

}  // namespace moekit::experts
