// Launchers and registry of the ep family.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "common/cuda_check.cuh"
#include "common/workspace_slices.hpp"
#include "ep/a2a.cuh"
#include "ep/comm.hpp"
#include "ep/ep.hpp"
#include "primitives/launch.cuh"

namespace moekit::ep {
namespace {

constexpr int kPlanThreads = 1024;
constexpr int kRowThreads = 128;

// The parts of a rank's workspace (a2a.cuh says what each holds), in order;
// permute's slice first (its pick may keep it zero).
enum Part {
  kPermuteWs, kSendTok, kSlotPos, kCounts, kSendAux, kSendIds, kSendRows, kRecvAux, kRecvIds, kRecvRows,
  kInverse, kSorted, kExpertIds, kPostPad, kBackSend, kBackRecv, kCombineWs, kParts
};

const permute::Variant& layout_pick(const Problem& p, int r, const DeviceCaps& caps, bool pdl) {
  return permute::registry().pick_auto(p.layout(r), caps, pdl);
}
const combine::Variant& combine_pick(const Problem& p, const DeviceCaps& caps, bool pdl) {
  return combine::registry().pick_auto(p.combine(), caps, pdl);
}

WorkspaceSlices<kParts> slices(const Problem& p, const DeviceCaps& caps) {
  WorkspaceSlices<kParts> w;
  const auto n = [](std::int64_t v) { return static_cast<std::size_t>(std::max<std::int64_t>(v, 0)); };
  const std::size_t RT = n(p.recv_capacity()), TK = n(p.tokens * p.topk), rb = n(p.row_bytes());
  std::size_t permute_ws = 0, padded = 0, blocks = 0;
  for (int r = 0; r < p.ranks; ++r) {
    const permute::Problem lp = p.layout(r);
    permute_ws = std::max(permute_ws, layout_pick(p, r, caps, false).workspace_bytes(lp, caps));
    padded = std::max(padded, n(lp.align.max_num_tokens_padded));
    blocks = std::max(blocks, n(lp.align.max_num_blocks));
  }
  w.bytes[kPermuteWs] = permute_ws;
  w.bytes[kSendTok] = RT * 4;
  w.bytes[kSlotPos] = TK * 4;
  w.bytes[kCounts] = std::size_t(Comm::kCountsPerRank) * 4;
  w.bytes[kSendAux] = RT * 8;
  w.bytes[kSendIds] = RT * n(p.topk) * 4;
  w.bytes[kSendRows] = RT * rb;
  w.bytes[kRecvAux] = RT * 8;
  w.bytes[kRecvIds] = RT * n(p.topk) * 4;
  w.bytes[kRecvRows] = RT * rb;
  w.bytes[kInverse] = RT * n(p.topk) * 4;
  w.bytes[kSorted] = padded * 4;
  w.bytes[kExpertIds] = blocks * 4;
  w.bytes[kPostPad] = 4;
  w.bytes[kBackSend] = n(p.slot_capacity()) * rb;
  w.bytes[kBackRecv] = n(p.slot_capacity()) * rb;
  w.bytes[kCombineWs] = combine_pick(p, caps, false).workspace_bytes(p.combine(), caps);
  w.place();
  return w;
}

template <class T>
T* part(const WorkspaceSlices<kParts>& w, const RankBuffers& rb, Part i) {
  return static_cast<T*>(w.at(rb.workspace, i));
}

// The current device, restored on scope exit (a launch visits every rank's).
struct DeviceScope {
  int prev = 0;
  DeviceScope() { cudaGetDevice(&prev); }
  ~DeviceScope() { cudaSetDevice(prev); }
};

// The widest copy a thread can make of rows of `row_bytes` (every row starts
// at a multiple of row_bytes from a 256-byte-aligned part).
int vec_of(std::int64_t row_bytes) { return row_bytes % 16 == 0 ? 16 : row_bytes % 4 == 0 ? 4 : 2; }

// Rank r's grid-strided row kernels: a few blocks an SM.
unsigned row_grid(std::int64_t rows) {
  return clamp_grid(std::max<std::int64_t>(1, std::min<std::int64_t>(rows, 8LL * std::max(device_caps().sm_count, 1))));
}

#define EP_TRY(x)                                   \
  do {                                              \
    if (const LaunchStatus e_ = (x); e_ != 0) return e_; \
  } while (0)

// Rank streams wait for `stream`; after `body`, `stream` waits for them.
template <class F>
LaunchStatus forked(const Problem& p, Comm& c, Stream stream, F&& body) {
  EP_TRY(cudaEventRecord(static_cast<cudaEvent_t>(c.fork_event()), stream));
  for (int r = 0; r < p.ranks; ++r)
    if (c.stream(r) != stream) EP_TRY(cudaStreamWaitEvent(c.stream(r), static_cast<cudaEvent_t>(c.fork_event()), 0));
  DeviceScope scope;
  EP_TRY(body());
  for (int r = 0; r < p.ranks; ++r) {
    if (c.stream(r) == stream) continue;
    EP_TRY(cudaSetDevice(r));
    EP_TRY(cudaEventRecord(static_cast<cudaEvent_t>(c.join_event(r)), c.stream(r)));
    EP_TRY(cudaStreamWaitEvent(stream, static_cast<cudaEvent_t>(c.join_event(r)), 0));
  }
  return cudaSuccess;
}

template <int kVec>
LaunchStatus launch_pack(const Problem& p, const RankBuffers& rb, const WorkspaceSlices<kParts>& w, Stream s,
                         bool pdl) {
  return prim::launch_ex(detail::pack_kernel<kVec>, row_grid(p.recv_capacity()), kRowThreads, 0, s,
                         prim::pdl_attrs(pdl), static_cast<const char*>(rb.hidden), rb.topk_ids, p.tokens, p.topk,
                         p.ranks, p.row_bytes(), part<const std::int32_t>(w, rb, kSendTok),
                         part<const std::int32_t>(w, rb, kCounts), part<char>(w, rb, kSendRows),
                         part<std::int32_t>(w, rb, kSendIds));
}

template <int kVec>
LaunchStatus launch_back(const Problem& p, const RankBuffers& rb, const WorkspaceSlices<kParts>& w, Stream s,
                         bool pdl) {
  return prim::launch_ex(detail::back_kernel<kVec>, row_grid(p.recv_capacity()), kRowThreads, 0, s,
                         prim::pdl_attrs(pdl), static_cast<const char*>(rb.permuted),
                         part<const std::int32_t>(w, rb, kInverse), part<const std::int32_t>(w, rb, kRecvAux),
                         part<const std::int32_t>(w, rb, kCounts), p.ranks, p.tokens, p.topk, p.row_bytes(),
                         part<char>(w, rb, kBackSend));
}

// Dispatch: plan and pack on every rank, the counts exchanged and read back
// (the host sync), the rows, ids and slot bases exchanged, then each rank's
// layout (permute's auto pick over its received rows).
LaunchStatus dispatch(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  Comm& c = *b.comm;
  const DeviceCaps& caps0 = device_caps();
  const WorkspaceSlices<kParts> w = slices(p, caps0);
  const std::size_t rb = static_cast<std::size_t>(p.row_bytes()), K = static_cast<std::size_t>(p.topk);
  const std::int64_t T = p.tokens;
  const int vec = vec_of(p.row_bytes());
  return forked(p, c, stream, [&]() -> LaunchStatus {
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      EP_TRY(cudaSetDevice(r));
      EP_TRY(prim::launch_ex(detail::plan_kernel<kPlanThreads>, 1, kPlanThreads, 0, c.stream(r), prim::pdl_attrs(pdl),
                             x.topk_ids, x.placement, T, p.topk, p.experts, p.ranks, r,
                             part<std::int32_t>(w, x, kSendTok), part<std::int32_t>(w, x, kSendAux),
                             part<std::int32_t>(w, x, kSlotPos), part<std::int32_t>(w, x, kCounts)));
      EP_TRY(vec == 16 ? launch_pack<16>(p, x, w, c.stream(r), pdl)
             : vec == 4 ? launch_pack<4>(p, x, w, c.stream(r), pdl)
                        : launch_pack<2>(p, x, w, c.stream(r), pdl));
    }
    // The counts: rank r's [2 d, 2 d + 2) to rank d's [kCountsFrom + 2 r, ...).
    EP_TRY(c.group_start());
    for (int r = 0; r < p.ranks; ++r) {
      auto* counts = part<std::int32_t>(w, b.rank[std::size_t(r)], kCounts);
      for (int d = 0; d < p.ranks; ++d) {
        EP_TRY(c.send(r, d, counts + 2 * d, 8));
        EP_TRY(c.recv(r, d, counts + detail::kCountsFrom + 2 * d, 8));
      }
    }
    EP_TRY(c.group_end());
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      EP_TRY(cudaSetDevice(r));
      EP_TRY(cudaMemcpyAsync(c.host_counts(r), part<std::int32_t>(w, x, kCounts),
                             sizeof(std::int32_t) * Comm::kCountsPerRank, cudaMemcpyDeviceToHost, c.stream(r)));
      EP_TRY(prim::launch_ex(detail::drop_tail_kernel, row_grid(p.recv_capacity() * p.topk / 256 + 1), 256, 0,
                             c.stream(r), prim::LaunchAttrs{}, part<const std::int32_t>(w, x, kCounts), p.ranks,
                             p.recv_capacity(), p.topk, part<std::int32_t>(w, x, kRecvIds)));
    }
    // The host sync: NCCL's sizes are host arguments.
    for (int r = 0; r < p.ranks; ++r) EP_TRY(cudaStreamSynchronize(c.stream(r)));
    c.dispatched = true;
    EP_TRY(c.group_start());
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      const std::int32_t* h = c.host_counts(r);
      std::size_t from = 0;  // received rows from lower ranks
      for (int d = 0; d < p.ranks; ++d) {
        const std::size_t out = std::size_t(h[2 * d]), in = std::size_t(h[detail::kCountsFrom + 2 * d]);
        const std::size_t q = std::size_t(d) * std::size_t(T);
        if (out > 0) {
          EP_TRY(c.send(r, d, part<char>(w, x, kSendRows) + q * rb, out * rb));
          EP_TRY(c.send(r, d, part<std::int32_t>(w, x, kSendIds) + q * K, out * K * 4));
          EP_TRY(c.send(r, d, part<std::int32_t>(w, x, kSendAux) + q * 2, out * 8));
        }
        if (in > 0) {
          EP_TRY(c.recv(r, d, part<char>(w, x, kRecvRows) + from * rb, in * rb));
          EP_TRY(c.recv(r, d, part<std::int32_t>(w, x, kRecvIds) + from * K, in * K * 4));
          EP_TRY(c.recv(r, d, part<std::int32_t>(w, x, kRecvAux) + from * 2, in * 8));
        }
        from += in;
      }
    }
    EP_TRY(c.group_end());
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      EP_TRY(cudaSetDevice(r));
      const DeviceCaps& caps = device_caps();
      const permute::Problem lp = p.layout(r);
      const permute::Variant& v = layout_pick(p, r, caps, pdl);
      void* pws = w.at(x.workspace, kPermuteWs);
      // A pick that agrees through counters gets its slice zeroed here (the
      // rest of the workspace is scratch), so any pick may share it.
      if (needs_zeroed_workspace(v, lp, caps) && w.bytes[kPermuteWs] > 0)
        EP_TRY(cudaMemsetAsync(pws, 0, w.bytes[kPermuteWs], c.stream(r)));
      permute::Buffers pb;
      pb.hidden = part<const void>(w, x, kRecvRows);
      pb.topk_ids = part<const std::int32_t>(w, x, kRecvIds);
      pb.expert_map = x.expert_map;
      pb.permuted = x.permuted;
      pb.inverse = part<std::int32_t>(w, x, kInverse);
      pb.sorted_token_ids = part<std::int32_t>(w, x, kSorted);
      pb.expert_ids = part<std::int32_t>(w, x, kExpertIds);
      pb.num_tokens_post_pad = part<std::int32_t>(w, x, kPostPad);
      pb.expert_offsets = x.expert_offsets;
      pb.workspace = pws;
      EP_TRY(v.launch(lp, pb, c.stream(r), pdl));
    }
    return cudaSuccess;
  });
}

// Combine: every rank returns its expert outputs (identity experts: the
// permuted rows) in the senders' slot order, the rows are exchanged, and
// each rank combines its tokens (combine's auto pick over the returned rows,
// slot_pos as its inverse map).
LaunchStatus combine_back(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  Comm& c = *b.comm;
  if (!c.dispatched) return cudaErrorNotReady;  // combine alone needs a dispatch's counts
  const WorkspaceSlices<kParts> w = slices(p, device_caps());
  const std::size_t rb = static_cast<std::size_t>(p.row_bytes());
  const std::size_t TK = static_cast<std::size_t>(p.tokens * p.topk);
  const int vec = vec_of(p.row_bytes());
  return forked(p, c, stream, [&]() -> LaunchStatus {
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      EP_TRY(cudaSetDevice(r));
      EP_TRY(vec == 16 ? launch_back<16>(p, x, w, c.stream(r), pdl)
             : vec == 4 ? launch_back<4>(p, x, w, c.stream(r), pdl)
                        : launch_back<2>(p, x, w, c.stream(r), pdl));
    }
    EP_TRY(c.group_start());
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      const std::int32_t* h = c.host_counts(r);
      for (int d = 0; d < p.ranks; ++d) {
        const std::size_t out = std::size_t(h[detail::kCountsFrom + 2 * d + 1]), in = std::size_t(h[2 * d + 1]);
        const std::size_t q = std::size_t(d) * TK;
        if (out > 0) EP_TRY(c.send(r, d, part<char>(w, x, kBackSend) + q * rb, out * rb));
        if (in > 0) EP_TRY(c.recv(r, d, part<char>(w, x, kBackRecv) + q * rb, in * rb));
      }
    }
    EP_TRY(c.group_end());
    const combine::Problem cp = p.combine();
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      EP_TRY(cudaSetDevice(r));
      combine::Buffers cb;
      cb.expert_out = part<const void>(w, x, kBackRecv);
      cb.inverse = part<const std::int32_t>(w, x, kSlotPos);
      cb.weights = x.weights;
      cb.out = x.out;
      cb.workspace = w.at(x.workspace, kCombineWs);
      EP_TRY(combine_pick(p, device_caps(), pdl).launch(cp, cb, c.stream(r), pdl));
    }
    return cudaSuccess;
  });
}

LaunchStatus launch_a2a(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (b.comm == nullptr || b.comm->ranks() != p.ranks) return cudaErrorInvalidValue;
  EP_TRY(dispatch(p, b, s, pdl));
  return combine_back(p, b, s, pdl);
}

std::size_t a2a_workspace(const Problem& p, const DeviceCaps& caps) { return slices(p, caps).total; }

std::string a2a_limits(const DeviceCaps&) {
  return "R <= " + std::to_string(kMaxRanks) + " GPUs of one host; K <= 64 (combine's); NCCL at run time";
}
const char* a2a_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = combine_pick(p, caps, false).not_applicable(p.combine(), caps)) return why;
  for (int r = 0; r < p.ranks; ++r)
    if (const char* why = layout_pick(p, r, caps, false).not_applicable(p.layout(r), caps)) return why;
  return nullptr;
}

const std::array<Variant, 1> kVariants{{
    {{"nccl-a2a",
      "the baseline a user would write: each rank plans and packs its rows per destination, the counts go over "
      "NCCL and back to the host, then grouped ncclSend/ncclRecv move the rows and ids; each receiver lays them "
      "out with permute's auto pick (compact, its experts); the outputs return the same way, combined with "
      "combine's auto pick (waits on the host between count and payload)",
      "plan_kernel pack_kernel drop_tail_kernel back_kernel permute:* combine:*"},
     true, a2a_limits, a2a_na, a2a_workspace, launch_a2a, nullptr, false, /*host_sync=*/true},
}};

const std::array<AutoRow<Problem>, 1> kAutoRows = {{
    {"nccl-a2a", "", nullptr},
}};

}  // namespace

LaunchStatus launch_stage(const Variant& v, const Problem& p, const Buffers& b, Stage s, Stream stream, bool pdl) {
  if (v.launch != launch_a2a || b.comm == nullptr) return cudaErrorInvalidValue;
  return s == Stage::dispatch ? dispatch(p, b, stream, pdl) : combine_back(p, b, stream, pdl);
}

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::ep
