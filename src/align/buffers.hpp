// align's device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/align/bench_align.cpp and tests/align/gpu_align.cpp build them here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "align/align.hpp"
#include "align/reference.hpp"
#include "device_set.hpp"

namespace moekit::align {

// Host views of align's inputs.
struct HostInputs {
  std::span<const std::byte> ids;      // numel ids, int32 or int64 (Problem::ids_int64)
  std::span<const std::int32_t> map;   // the expert map, or empty
};

// What launch_ep asks of the workspace for v on p: the variant's own part
// (zeroed once when it keeps it zero), then the bucket pre-pass's scratch.
inline WorkspaceNeed workspace_need(const Variant& v, const Problem& p, const DeviceCaps& caps) {
  return {ep_workspace_bytes(v, p, caps), ep_zeroed_workspace(v, p, caps)};
}

// align's whole set: the ids (rotated, misalignable: the narrow-load paths),
// the map, the three outputs, the workspace.
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, const HostInputs& in, WorkspaceNeed ws, const SetOptions& o) : set_(o) {
    ids_ = set_.input("topk_ids", in.ids.data(), in.ids.size(), {.rotate = true, .misalign = true});
    if (!in.map.empty()) map_ = set_.input("expert_map", in.map.data(), in.map.size() * 4);
    sorted_ = set_.output("sorted_token_ids", std::size_t(p.max_num_tokens_padded) * 4);
    eids_ = set_.output("expert_ids", std::size_t(p.max_num_blocks) * 4);
    ntpp_ = set_.output("num_tokens_post_pad", 4);
    ws_ = set_.workspace(ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.topk_ids = set_.ptr(ids_, copy);
    b.expert_map = set_.as<std::int32_t>(map_);
    b.sorted_token_ids = set_.as<std::int32_t>(sorted_);
    b.expert_ids = set_.as<std::int32_t>(eids_);
    b.num_tokens_post_pad = set_.as<std::int32_t>(ntpp_);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  // Every output back to the poison (before a checked launch).
  void poison() { set_.poison(); }
  // The next variant's workspace (the ids and outputs stay).
  void replace_workspace(WorkspaceNeed ws) { set_.replace_workspace(ws_, ws); }
  // Whether the first `upto` workspace bytes are zero (a zeroed part handed back).
  bool workspace_zero(std::size_t upto) const { return set_.all_zero(ws_, upto); }

  // The outputs into `got`; "" or a changed guard zone (align::check sees the rest).
  std::string download(Outputs& got) const {
    if (std::string g = set_.broken_guard(); !g.empty()) return "wrote outside its outputs (guard zone of " + g + " changed)";
    got.sorted_token_ids = set_.read<std::int32_t>(sorted_);
    got.expert_ids = set_.read<std::int32_t>(eids_);
    set_.download(ntpp_, &got.num_tokens_post_pad, 4);
    return {};
  }
  int copies() const { return set_.copies(); }

 private:
  DeviceSet set_;
  DeviceSet::Handle ids_, map_, sorted_, eids_, ntpp_, ws_;
};

// The least traffic of one launch: ids and map read once, every output written once.
inline double bytes_moved(const Problem& p) {
  return double(p.numel) * (p.ids_int64 ? 8 : 4) + 4.0 * double(p.map_size) +
         4.0 * double(p.max_num_tokens_padded + p.max_num_blocks + 1);
}

}  // namespace moekit::align
