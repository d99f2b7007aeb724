// ep's device buffers, declared once (src/device_set.hpp): one set per rank,
// each on its rank's GPU (the CLI job and tests/ep/gpu_ep.cpp build them here).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "device_set.hpp"
#include "ep/comm.hpp"
#include "ep/ep.hpp"
#include "ep/reference.hpp"
#include "timing.hpp"

namespace moekit::ep {

// The ranks of a run over GPUs 0 .. R-1, each on its device's process stream
// (the one stream all of moekit's work on a device runs on: cuda_util.hpp);
// nullptr and *why where Comm::create fails.
inline std::unique_ptr<Comm> comm_on_process_streams(int ranks, bool with_nccl, std::string* why) {
  std::array<Stream, kMaxRanks> streams{};
  for (int r = 0; r < ranks; ++r) {
    const DeviceScope on(r);
    streams[std::size_t(r)] = process_stream();
  }
  return Comm::create(ranks, streams, why, with_nccl);
}

// Per-rank launches (ep::launch_per_rank, issued by `launch(copy)`) timed
// as a process per GPU would run them: each of the Comm's streams (rank r on
// GPU r) captured into its own graph, the slowest rank's replay
// (time_stream_graphs).
inline TimingStats time_per_rank(const Comm& c, const std::function<void(int)>& launch, int copies,
                                 const TimingOptions& o) {
  std::vector<Stream> streams;
  std::vector<int> devices;
  for (int r = 0; r < c.ranks(); ++r) {
    streams.push_back(c.stream(r));
    devices.push_back(r);
  }
  return time_stream_graphs(streams, devices, launch, copies, o);
}

class DeviceBuffers {
 public:
  // Rank r's inputs on GPU r; `ws` the variant's workspace on each. p.ffn:
  // rank r's W1 and W2, its local experts' rows of the given weights (`ffn`'s
  // w1 and w2, global expert order) or generated on GPU r from its
  // weight_seed, keyed by their global ids (experts::generate_weights), and
  // its y rows.
  DeviceBuffers(const Problem& p, std::span<const RankInputs> in, WorkspaceNeed ws, const SetOptions& o,
                const FfnInputs* ffn = nullptr)
      : p_(p) {
    for (int r = 0; r < p.ranks; ++r) {
      const DeviceScope on(r);
      Rank& k = *ranks_.emplace_back(std::make_unique<Rank>(o));
      const RankInputs& x = in[std::size_t(r)];
      k.maps[0] = p.placement;
      k.maps[1] = expert_map(p, r);
      // Not misalignable: the row copies take their width from the row size alone.
      k.hidden = k.set.input("hidden", x.hidden.data(), x.hidden.size(), {.rotate = true});
      k.ids = k.set.input("topk_ids", x.ids.data(), x.ids.size_bytes());
      k.weights = k.set.input("topk_weights", x.weights.data(), x.weights.size_bytes());
      k.placement = k.set.input("placement", k.maps[0].data(), k.maps[0].size() * 4);
      k.map = k.set.input("expert_map", k.maps[1].data(), k.maps[1].size() * 4);
      const permute::Problem& lp = p.layout(r);
      k.permuted = k.set.output("permuted", std::size_t(lp.align.max_num_tokens_padded) * std::size_t(p.row_bytes()));
      k.offsets = k.set.output("expert_offsets", std::size_t(lp.align.num_experts + 1) * 8);
      k.out = k.set.output("out", std::size_t(p.tokens) * std::size_t(p.row_bytes()));
      if (p.ffn) {
        const experts::Problem& fp = p.ffn_problem(r);
        k.y = k.set.output("y", std::size_t(fp.rows()) * std::size_t(p.row_bytes()));
        std::vector<std::int32_t> global = local_experts(p, r);  // local id -> global id
        global.resize(std::size_t(fp.experts), global.empty() ? 0 : global.back());  // a rank without experts: one unused
        k.globals = global;
        k.global = k.set.input("expert_globals", k.globals.data(), k.globals.size() * 4);
        if (ffn != nullptr && !ffn->w1.empty()) {
          // The rank's experts' rows of the given weights, gathered on the host.
          const std::size_t n1 = fp.w1_elements() / std::size_t(fp.experts), n2 = fp.w2_elements() / std::size_t(fp.experts);
          std::vector<std::uint16_t> w1(fp.w1_elements()), w2(fp.w2_elements());
          for (std::size_t l = 0; l < global.size(); ++l) {
            std::copy_n(ffn->w1.begin() + std::ptrdiff_t(std::size_t(global[l]) * n1), n1, w1.begin() + std::ptrdiff_t(l * n1));
            std::copy_n(ffn->w2.begin() + std::ptrdiff_t(std::size_t(global[l]) * n2), n2, w2.begin() + std::ptrdiff_t(l * n2));
          }
          k.w1 = k.set.input("w1", w1.data(), w1.size() * 2);
          k.w2 = k.set.input("w2", w2.data(), w2.size() * 2);
        } else {
          k.w1 = k.set.input("w1", nullptr, fp.w1_elements() * 2);
          k.w2 = k.set.input("w2", nullptr, fp.w2_elements() * 2);
          cuda_check(experts::generate_weights(fp, ffn != nullptr ? ffn->weight_seed : 0, k.set.ptr(k.w1),
                                               k.set.ptr(k.w2), process_stream(), k.set.as<std::int32_t>(k.global)),
                     "generating the expert weights");
          cuda_sync("generating the expert weights");
        }
      }
      k.ws = k.set.workspace(ws);
    }
  }

  Buffers buffers(int copy, Comm* comm) const {
    Buffers b;
    b.comm = comm;
    for (int r = 0; r < p_.ranks; ++r) {
      const Rank& k = (*ranks_[std::size_t(r)]);
      RankBuffers& x = b.rank[std::size_t(r)];
      x.hidden = k.set.ptr(k.hidden, copy % k.set.copies());
      x.topk_ids = k.set.as<std::int32_t>(k.ids);
      x.weights = k.set.as<float>(k.weights);
      x.placement = k.set.as<std::int32_t>(k.placement);
      x.expert_map = k.set.as<std::int32_t>(k.map);
      x.permuted = k.set.ptr(k.permuted);
      x.expert_offsets = k.set.as<std::int64_t>(k.offsets);
      x.out = k.set.ptr(k.out);
      if (p_.ffn) {
        x.w1 = k.set.ptr(k.w1);
        x.w2 = k.set.ptr(k.w2);
        x.y = k.set.ptr(k.y);
      }
      x.workspace = k.set.ptr(k.ws);
    }
    return b;
  }

  ~DeviceBuffers() {
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const DeviceScope on{static_cast<int>(r)};  // each rank's memory freed on its own device
      ranks_[r].reset();
    }
  }
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  int copies() const { return ranks_.empty() ? 1 : ranks_[0]->set.copies(); }

  // Every rank's outputs: its local experts' offsets (local + 1) and rows,
  // and out. "" or what is wrong (a changed guard zone, offsets out of range).
  std::string download(std::vector<RankOutputs>& got) const {
    got.assign(std::size_t(p_.ranks), {});
    const std::size_t rb = std::size_t(p_.row_bytes());
    for (int r = 0; r < p_.ranks; ++r) {
      const DeviceScope on(r);
      const Rank& k = (*ranks_[std::size_t(r)]);
      RankOutputs& o = got[std::size_t(r)];
      if (std::string g = k.set.broken_guard(); !g.empty())
        return "rank " + std::to_string(r) + " wrote outside its outputs (guard zone of " + g + " changed)";
      o.offsets.resize(std::size_t(p_.local[std::size_t(r)]) + 1);
      k.set.download(k.offsets, o.offsets.data(), o.offsets.size() * 8);
      const std::size_t cap = k.set.slots()[k.permuted.index].bytes / std::max<std::size_t>(rb, 1);
      for (std::size_t i = 0; i < o.offsets.size(); ++i)
        if (o.offsets[i] < 0 || std::size_t(o.offsets[i]) > cap || (i > 0 && o.offsets[i] < o.offsets[i - 1]))
          return "rank " + std::to_string(r) + ": expert_offsets[" + std::to_string(i) + "] = " +
                 std::to_string(o.offsets[i]) + " is out of order or past the " + std::to_string(cap) + " rows";
      o.rows.resize(std::size_t(o.offsets.back()) * rb);
      k.set.download(k.permuted, o.rows.data(), o.rows.size());
      if (p_.ffn) {
        o.y.resize(o.rows.size());
        k.set.download(k.y, o.y.data(), o.y.size());
      }
      o.out.resize(std::size_t(p_.tokens) * rb);
      k.set.download(k.out, o.out.data(), o.out.size());
    }
    return {};
  }

  void poison() {
    for (int r = 0; r < p_.ranks; ++r) {
      const DeviceScope on(r);
      (*ranks_[std::size_t(r)]).set.poison();
    }
  }
  // Every rank's outputs poisoned and its workspace filled again
  // (DeviceSet::refill_workspace): what a launch reads, it must have written.
  void poison_all() {
    for (int r = 0; r < p_.ranks; ++r) {
      const DeviceScope on(r);
      Rank& k = *ranks_[std::size_t(r)];
      k.set.poison();
      k.set.refill_workspace(k.ws);
    }
  }

 private:
  struct Rank {
    explicit Rank(const SetOptions& o) : set(o) {}
    DeviceSet set;
    std::vector<std::int32_t> maps[2];  // placement, this rank's expert map (host copies the set uploads)
    std::vector<std::int32_t> globals;  // p.ffn: its local experts' global ids
    DeviceSet::Handle hidden, ids, weights, placement, map, permuted, offsets, out, y, global, w1, w2, ws;
  };
  Problem p_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace moekit::ep
