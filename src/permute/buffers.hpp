// permute's device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/permute/bench_permute.cpp and tests/permute/gpu_permute.cpp build
// them here; a family built on permute declares its stage through OutputBuffers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "device_set.hpp"
#include "permute/permute.hpp"
#include "permute/reference.hpp"

namespace moekit::permute {

// What permute writes: the rows, the inverse map and align's outputs (the
// compact layout's offsets), here or as the permute stage of a later family.
struct OutputBuffers {
  DeviceSet::Handle permuted, inverse, sorted, expert_ids, ntpp, offsets;

  OutputBuffers() = default;
  OutputBuffers(DeviceSet& s, const Problem& p) {
    const std::size_t rows = std::size_t(p.align.max_num_tokens_padded);
    permuted = s.output("permuted", rows * std::size_t(p.row_bytes));
    inverse = s.output("inverse", std::size_t(p.align.numel) * 4);
    sorted = s.output("sorted_token_ids", rows * 4);
    expert_ids = s.output("expert_ids", std::size_t(p.align.max_num_blocks) * 4);
    ntpp = s.output("num_tokens_post_pad", 4);
    offsets = s.output("expert_offsets", (std::size_t(p.align.num_experts) + 1) * 8);
  }

  // Sets the output pointers of a Buffers struct (permute's or a later family's).
  template <class B>
  void wire(const DeviceSet& s, B& b) const {
    b.permuted = s.ptr(permuted);
    b.inverse = s.as<std::int32_t>(inverse);
    b.sorted_token_ids = s.as<std::int32_t>(sorted);
    b.expert_ids = s.as<std::int32_t>(expert_ids);
    b.num_tokens_post_pad = s.as<std::int32_t>(ntpp);
    b.expert_offsets = s.as<std::int64_t>(offsets);
  }

  // The outputs into `got` (rows up to num_tokens_post_pad, clamped to the
  // capacity). Returns "" or what is wrong beyond what permute::check sees:
  // a changed guard zone, a row count out of range.
  std::string download(const DeviceSet& s, const Problem& p, Outputs& got) const {
    if (std::string g = s.broken_guard(); !g.empty()) return "wrote outside its outputs (guard zone of " + g + " changed)";
    auto& a = got.aligned;
    s.download(ntpp, &a.num_tokens_post_pad, 4);
    const std::int64_t cap = p.align.max_num_tokens_padded;
    const std::int64_t rows = std::clamp<std::int64_t>(a.num_tokens_post_pad, 0, cap);
    a.sorted_token_ids = s.read<std::int32_t>(sorted);
    a.expert_ids = s.read<std::int32_t>(expert_ids);
    got.permuted.resize(std::size_t(rows) * std::size_t(p.row_bytes));
    s.download(permuted, got.permuted.data(), got.permuted.size());
    got.inverse = s.read<std::int32_t>(inverse);
    if (p.layout == Layout::compact) got.offsets = s.read<std::int64_t>(offsets);
    if (a.num_tokens_post_pad < 0 || a.num_tokens_post_pad > cap) return "num_tokens_post_pad out of range";
    return {};
  }
};

// Host views of permute's inputs.
struct HostInputs {
  std::span<const std::byte> hidden;     // [T, H]
  std::span<const std::int32_t> ids;     // [T, K], as the kernels read them
  std::span<const std::int32_t> map;     // the expert map, or empty
};

// permute's whole set: hidden rows and ids (rotated), the map, the outputs,
// the workspace.
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, const HostInputs& in, WorkspaceNeed ws, const SetOptions& o)
      : p_(p), set_(o) {
    hidden_ = set_.input("hidden", in.hidden.data(), in.hidden.size(), {.rotate = true, .misalign = true});
    ids_ = set_.input("topk_ids", in.ids.data(), in.ids.size() * 4, {.rotate = true});
    if (!in.map.empty()) map_ = set_.input("expert_map", in.map.data(), in.map.size() * 4);
    out_ = OutputBuffers(set_, p);
    ws_ = set_.workspace(ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.hidden = set_.ptr(hidden_, copy);
    b.topk_ids = set_.as<std::int32_t>(ids_, copy);
    b.expert_map = set_.as<std::int32_t>(map_);
    out_.wire(set_, b);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  void poison() { set_.poison(); }
  std::string download(Outputs& got) const { return out_.download(set_, p_, got); }
  int copies() const { return set_.copies(); }

 private:
  Problem p_;
  DeviceSet set_;
  DeviceSet::Handle hidden_, ids_, map_, ws_;
  OutputBuffers out_;
};

// The least traffic of one launch: ids and hidden read once, one row written
// per slot, inverse written. (Zeroed padding rows are not counted; a design
// that re-reads a token's row per slot moves more than this.)
inline double bytes_moved(const Problem& p) {
  const double slots = double(p.align.numel);
  return 4.0 * slots + double(p.tokens) * double(p.row_bytes) + slots * double(p.row_bytes) + 4.0 * slots;
}

}  // namespace moekit::permute
