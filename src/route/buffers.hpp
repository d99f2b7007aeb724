// route's device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/route/bench_route.cpp and tests/route/gpu_route.cpp build them here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "align/align.hpp"
#include "align/reference.hpp"
#include "device_set.hpp"
#include "route/reference.hpp"
#include "route/route.hpp"

namespace moekit::route {

// Host views of route's inputs.
struct HostInputs {
  std::span<const std::byte> logits;  // [T, E] of Problem::dtype
  std::span<const float> bias;        // [E], or empty (used only with Problem::bias)
};

// route's whole set: the logits (rotated, misalignable: the scalar load
// path), the bias, the ids and weights, the align outputs when
// p.align_block > 0 (a variant that fuses align, or --then-align), the
// workspace, and the workspace of an align variant run after route
// (`align_ws`: --then-align with a variant that does not fuse align).
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, const HostInputs& in, WorkspaceNeed ws, const SetOptions& o,
                std::optional<WorkspaceNeed> align_ws = std::nullopt)
      : set_(o) {
    const std::size_t slots = std::size_t(p.tokens) * std::size_t(p.topk);
    logits_ = set_.input("logits", in.logits.data(), in.logits.size(), {.rotate = true, .misalign = true});
    if (p.bias && !in.bias.empty()) bias_ = set_.input("bias", in.bias.data(), in.bias.size() * 4);
    ids_ = set_.output("topk_ids", slots * 4);
    w_ = set_.output("topk_weights", slots * 4);
    if (p.align_block > 0) {
      sorted_ = set_.output("sorted_token_ids", std::size_t(p.align_rows) * 4);
      eids_ = set_.output("expert_ids", std::size_t(p.align_blocks) * 4);
      ntpp_ = set_.output("num_tokens_post_pad", 4);
    }
    ws_ = set_.workspace(ws);
    if (align_ws) aws_ = set_.workspace(*align_ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.logits = set_.ptr(logits_, copy);
    b.bias = set_.as<float>(bias_);
    b.topk_ids = set_.as<std::int32_t>(ids_);
    b.topk_weights = set_.as<float>(w_);
    b.sorted_token_ids = set_.as<std::int32_t>(sorted_);
    b.expert_ids = set_.as<std::int32_t>(eids_);
    b.num_tokens_post_pad = set_.as<std::int32_t>(ntpp_);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  // The align variant's workspace for --then-align (launch_then_align builds
  // align's buffers from route's own: its ids in, the align outputs out).
  void* align_workspace() const { return set_.ptr(aws_); }
  // Every output back to the poison (before a checked launch).
  void poison() { set_.poison(); }
  // The next variant's workspace (the inputs and outputs stay).
  void replace_workspace(WorkspaceNeed ws) { set_.replace_workspace(ws_, ws); }
  // Whether route's workspace is all zero (a zeroed workspace handed back).
  bool workspace_zero() const { return set_.all_zero(ws_); }

  // The ids and weights into `got`, and the align outputs into `aligned` when
  // the set has them; "" or a changed guard zone (the checks see the rest).
  std::string download(Outputs& got, align::Outputs* aligned = nullptr) const {
    if (std::string g = set_.broken_guard(); !g.empty()) return "wrote outside its outputs (guard zone of " + g + " changed)";
    got.ids = set_.read<std::int32_t>(ids_);
    got.weights = set_.read<float>(w_);
    if (aligned != nullptr && sorted_.valid()) {
      aligned->sorted_token_ids = set_.read<std::int32_t>(sorted_);
      aligned->expert_ids = set_.read<std::int32_t>(eids_);
      set_.download(ntpp_, &aligned->num_tokens_post_pad, 4);
    }
    return {};
  }
  int copies() const { return set_.copies(); }

 private:
  DeviceSet set_;
  DeviceSet::Handle logits_, bias_, ids_, w_, sorted_, eids_, ntpp_, ws_, aws_;
};

// The least traffic of one launch: logits (and bias) read once, ids and
// weights written once, and the align outputs written once when there are.
inline double bytes_moved(const Problem& p) {
  const double logits_bytes = double(p.tokens) * p.experts * (p.dtype == DType::f32 ? 4 : 2);
  double b = logits_bytes + (p.bias ? 4.0 * double(p.experts) : 0.0) + 8.0 * double(p.tokens) * p.topk;
  if (p.align_block > 0) b += 4.0 * double(p.align_rows + p.align_blocks + 1);
  return b;
}

}  // namespace moekit::route
