// dedup's device buffers, declared once (src/device_set.hpp): the CLI job,
// bench/dedup/bench_dedup.cpp and tests/dedup/gpu_dedup.cpp build them here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "dedup/dedup.hpp"
#include "device_set.hpp"

namespace moekit::dedup {

// Elements of the output, [batch, mtp_step * k] (as many as the input has).
inline std::size_t out_elems(const Problem& p) { return std::size_t(p.batch) * std::size_t(p.row_len()); }

// dedup's whole set: the index rows (rotated, misalignable), the output
// (misalignable: the 16-byte store paths must notice), the workspace.
class DeviceBuffers {
 public:
  DeviceBuffers(const Problem& p, std::span<const std::int32_t> indices, WorkspaceNeed ws, const SetOptions& o)
      : set_(o) {
    in_ = set_.input("indices", indices.data(), indices.size() * 4, {.rotate = true, .misalign = true});
    out_ = set_.output("dedup", out_elems(p) * 4, {.misalign = true});
    ws_ = set_.workspace(ws);
  }

  Buffers buffers(int copy) const {
    Buffers b;
    b.indices = set_.as<std::int32_t>(in_, copy);
    b.out = set_.as<std::int32_t>(out_);
    b.workspace = set_.ptr(ws_);
    return b;
  }
  // The output back to the poison (before a checked launch).
  void poison() { set_.poison(); }
  // The next variant's workspace (the input and output stay).
  void replace_workspace(WorkspaceNeed ws) { set_.replace_workspace(ws_, ws); }
  // Whether the workspace is all zero (a zeroed workspace handed back).
  bool workspace_zero() const { return set_.all_zero(ws_); }

  // The output into `got`; "" or a changed guard zone (dedup::check sees the rest).
  std::string download(std::vector<std::int32_t>& got) const {
    if (std::string g = set_.broken_guard(); !g.empty()) return "wrote outside the output (guard zone of " + g + " changed)";
    got = set_.read<std::int32_t>(out_);
    return {};
  }
  int copies() const { return set_.copies(); }

 private:
  DeviceSet set_;
  DeviceSet::Handle in_, out_, ws_;
};

// The least traffic of one launch: the input read once, the output (same size) written once.
inline double bytes_moved(const Problem& p) { return 2.0 * double(out_elems(p)) * 4; }

}  // namespace moekit::dedup
