// Launchers and registry of the ep family.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
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
#include "ep/policy.hpp"
#include "primitives/launch.cuh"

namespace moekit::ep {

// Rank r's receive layout: permute's own auto at one rank (every slot kept,
// the problems its rows were fitted on), else no `fused` past the ep
// policy's slot count. No permute auto row reads PDL
// (Registry::auto_reads_pdl), so one pick serves launches with and without.
const permute::Variant& layout_variant(const Problem& p, int rank, const DeviceCaps& caps) {
  const permute::Problem& lp = p.layout(rank);
  if (p.ranks > 1 && lp.align.numel > policy_for(caps).layout_fused_max_slots)
    return permute::registry().pick_auto_except(lp, caps, false, "fused");
  return permute::registry().pick_auto(lp, caps, false);
}

namespace {

// The plan's blocks: a token a thread; one block up to kPlanThreads tokens,
// else two passes of one block per kPlanThreads tokens (plan.cuh).
constexpr int kPlanThreads = 256;
constexpr int kRowThreads = 128;
using detail::kP2pMaxTopk;
static_assert(kP2pMaxTopk <= kRowThreads, "pack_peer_kernel: one thread a slot");

// The parts of a rank's workspace (a2a.cuh says what each holds; kPlanTotals:
// the plan's per-block sums, plan.cuh; kFfnWs: the FFN pick's whole
// workspace, of which its FFN stage uses its own scratch), in order;
// permute's slice first (its pick may keep it zero).
enum Part {
  kPermuteWs, kSendTok, kSlotPos, kCounts, kSendAux, kSendIds, kSendRows, kRecvAux, kRecvIds, kRecvRows,
  kInverse, kSorted, kExpertIds, kPostPad, kBackSend, kBackRecv, kCombineWs, kRecvW, kPartialInv, kOnes,
  kPlanTotals, kFfnWs, kParts
};

const combine::Variant& combine_pick(const Problem& p, const DeviceCaps& caps, bool pdl) {
  return combine::registry().pick_auto(p.combine(), caps, pdl);
}
// p2p-reduce's combine of the R partials a token gets back.
const combine::Variant& partials_pick(const Problem& p, const DeviceCaps& caps, bool pdl) {
  return combine::registry().pick_auto(p.combine_partials(), caps, pdl);
}

// nccl-a2a stages its sends and returns (send runs, back_send); p2p writes
// into its peers' receive parts directly and has neither; p2p-reduce also
// sends the weights and combines R partials a token (kRecvW, kPartialInv,
// kOnes: only it has them).
enum class Mode { nccl, p2p, reduce };

// A rank's workspace parts and the mode they were placed for (what the
// launchers below write and read depends on it, not on which parts are empty).
struct Slices : WorkspaceSlices<kParts> {
  Mode mode = Mode::nccl;
};

// The plan's blocks in its two passes (a batch past one block).
unsigned plan_blocks(const Problem& p) {
  return static_cast<unsigned>((p.tokens + kPlanThreads - 1) / kPlanThreads);
}

Slices slices(const Problem& p, const DeviceCaps& caps, Mode mode) {
  Slices w;
  w.mode = mode;
  const auto n = [](std::int64_t v) { return static_cast<std::size_t>(std::max<std::int64_t>(v, 0)); };
  const std::size_t RT = n(p.recv_capacity()), TK = n(p.tokens * p.topk), rb = n(p.row_bytes());
  std::size_t permute_ws = 0, padded = 0, blocks = 0;
  for (int r = 0; r < p.ranks; ++r) {
    const permute::Problem& lp = p.layout(r);
    permute_ws = std::max(permute_ws, layout_variant(p, r, caps).workspace_bytes(lp, caps));
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
  w.bytes[kPlanTotals] = p.tokens > kPlanThreads ? std::size_t(plan_blocks(p)) * kMaxRanks * 8 : 0;
  if (p.ffn)
    for (int r = 0; r < p.ranks; ++r)
      w.bytes[kFfnWs] = std::max(w.bytes[kFfnWs], ffn_variant(p, r, caps).workspace_bytes(p.ffn_problem(r), caps));
  // p2p places every row by its token (pack_peer_kernel): no plan, no send
  // runs, no staging.
  if (mode != Mode::nccl)
    w.bytes[kSendTok] = w.bytes[kSendAux] = w.bytes[kCounts] = w.bytes[kPlanTotals] = w.bytes[kSendIds] =
        w.bytes[kSendRows] = w.bytes[kBackSend] = 0;
  if (mode == Mode::reduce) {
    w.bytes[kBackRecv] = RT * rb;  // one partial per (token, rank), not one row per slot
    w.bytes[kCombineWs] = partials_pick(p, caps, false).workspace_bytes(p.combine_partials(), caps);
    w.bytes[kRecvW] = RT * n(p.topk) * 4;
    w.bytes[kPartialInv] = w.bytes[kOnes] = n(p.tokens) * n(p.ranks) * 4;
  }
  w.place();
  return w;
}

template <class T>
T* part(const Slices& w, const RankBuffers& rb, Part i) {
  return static_cast<T*>(w.at(rb.workspace, i));
}

// What the experts wrote, in permuted's row order: the FFN's y, or the
// received rows themselves (identity experts).
const void* expert_out(const Problem& p, const RankBuffers& x) { return p.ffn ? x.y : x.permuted; }

// The current device, restored on scope exit (a launch visits every rank's).
struct DeviceScope {
  int prev = 0;
  DeviceScope() { cudaGetDevice(&prev); }
  ~DeviceScope() { cudaSetDevice(prev); }
};

// f.template operator()<kVec>() for the widest copy a thread can make of rows
// of `row_bytes` (every row starts at a multiple of row_bytes from a
// 256-byte-aligned part): 16, 4 or 2 bytes.
template <class F>
LaunchStatus by_vec(std::int64_t row_bytes, F&& f) {
  if (row_bytes % 16 == 0) return f.template operator()<16>();
  if (row_bytes % 4 == 0) return f.template operator()<4>();
  return f.template operator()<2>();
}

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

// `pdl`: the plan's first kernel may overlap its predecessor (the caller
// knows whether that is a kernel); `pdl_inner`: the second pass after the
// first (always a kernel).
LaunchStatus launch_plan(const Problem& p, const RankBuffers& x, const Slices& w, int r, Stream s,
                         bool pdl, bool pdl_inner) {
  detail::PlanArgs a{x.topk_ids, x.placement, p.tokens, p.topk, p.experts, p.ranks, r,
                     part<std::int32_t>(w, x, kSendTok), part<std::int32_t>(w, x, kSendAux),
                     part<std::int32_t>(w, x, kSlotPos), part<std::int32_t>(w, x, kCounts),
                     w.mode == Mode::reduce ? part<std::int32_t>(w, x, kPartialInv) : nullptr,
                     w.mode == Mode::reduce ? part<float>(w, x, kOnes) : nullptr,
                     part<unsigned long long>(w, x, kPlanTotals)};
  if (p.tokens <= kPlanThreads)
    return prim::launch_ex(detail::plan_kernel<kPlanThreads>, 1, kPlanThreads, 0, s, prim::pdl_attrs(pdl), a);
  const unsigned blocks = plan_blocks(p);
  EP_TRY(prim::launch_ex(detail::plan_count_kernel<kPlanThreads>, blocks, kPlanThreads, 0, s, prim::pdl_attrs(pdl), a));
  return prim::launch_ex(detail::plan_place_kernel<kPlanThreads>, blocks, kPlanThreads, 0, s,
                         prim::pdl_attrs(pdl_inner), a);
}

template <int kVec>
LaunchStatus launch_pack(const Problem& p, const RankBuffers& rb, const Slices& w, Stream s,
                         bool pdl) {
  return prim::launch_ex(detail::pack_kernel<kVec>, row_grid(p.recv_capacity()), kRowThreads, 0, s,
                         prim::pdl_attrs(pdl), static_cast<const char*>(rb.hidden), rb.topk_ids, p.tokens, p.topk,
                         p.ranks, p.row_bytes(), part<const std::int32_t>(w, rb, kSendTok),
                         part<const std::int32_t>(w, rb, kCounts), part<char>(w, rb, kSendRows),
                         part<std::int32_t>(w, rb, kSendIds));
}

template <int kVec>
LaunchStatus launch_back(const Problem& p, const RankBuffers& rb, const Slices& w, Stream s,
                         bool pdl) {
  return prim::launch_ex(detail::back_kernel<kVec>, row_grid(p.recv_capacity()), kRowThreads, 0, s,
                         prim::pdl_attrs(pdl), static_cast<const char*>(expert_out(p, rb)),
                         part<const std::int32_t>(w, rb, kInverse), part<const std::int32_t>(w, rb, kRecvAux),
                         part<const std::int32_t>(w, rb, kCounts), p.ranks, p.tokens, p.topk, p.row_bytes(),
                         part<char>(w, rb, kBackSend));
}

// Rank x's receive side as its layout reads and writes it: the received
// rows and ids in, the compact layout and its maps out (workspace not set).
permute::Buffers layout_buffers(const Slices& w, const RankBuffers& x) {
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
  return pb;
}

// Rank r's receive side laid out (layout_variant over its receive capacity,
// its expert map), on rank r's stream.
LaunchStatus lay_out(const Problem& p, const Buffers& b, const Slices& w, int r, bool pdl) {
  const RankBuffers& x = b.rank[std::size_t(r)];
  EP_TRY(cudaSetDevice(r));
  const DeviceCaps& caps = device_caps();
  const permute::Problem& lp = p.layout(r);
  // The pick the workspace was sized for (slices()).
  const permute::Variant& v = layout_variant(p, r, caps);
  void* pws = w.at(x.workspace, kPermuteWs);
  // A pick that agrees through counters gets its slice zeroed here (the
  // rest of the workspace is scratch), so any pick may share it.
  if (needs_zeroed_workspace(v, lp, caps) && w.bytes[kPermuteWs] > 0)
    EP_TRY(cudaMemsetAsync(pws, 0, w.bytes[kPermuteWs], b.comm->stream(r)));
  permute::Buffers pb = layout_buffers(w, x);
  pb.workspace = pws;
  return v.launch(lp, pb, b.comm->stream(r), pdl);
}

// Rank r's expert FFN over its received rows (p.ffn; identity experts:
// nothing), on rank r's stream: the FFN stage of its pick, which reads
// permuted and the expert offsets the layout wrote and writes y.
LaunchStatus experts_on(const Problem& p, const Buffers& b, const Slices& w, int r, bool pdl) {
  if (!p.ffn) return cudaSuccess;
  const RankBuffers& x = b.rank[std::size_t(r)];
  EP_TRY(cudaSetDevice(r));
  const experts::Problem& fp = p.ffn_problem(r);
  if (fp.tokens == 0) return cudaSuccess;  // as the experts variants' own launch (T = 0: no rows)
  experts::Buffers eb;
  permute::copy_layout_outputs(eb, layout_buffers(w, x));
  eb.w1 = x.w1;
  eb.w2 = x.w2;
  eb.y = x.y;
  eb.workspace = w.at(x.workspace, kFfnWs);
  return experts::launch_stage(ffn_variant(p, r, device_caps()), fp, eb, experts::Stage::ffn, b.comm->stream(r), pdl);
}
LaunchStatus experts_all(const Problem& p, const Buffers& b, const Slices& w, bool pdl) {
  for (int r = 0; r < p.ranks; ++r) EP_TRY(experts_on(p, b, w, r, pdl));
  return cudaSuccess;
}

// Rank r's tokens combined (combine's auto pick over the returned rows, the
// slot places as its inverse map), on rank r's stream.
// p2p-reduce (Mode::reduce): the token's R partials instead, weight 1
// each, rank ascending.
LaunchStatus combine_on(const Problem& p, const Buffers& b, const Slices& w, int r, bool pdl) {
  const RankBuffers& x = b.rank[std::size_t(r)];
  EP_TRY(cudaSetDevice(r));
  combine::Buffers cb;
  cb.expert_out = part<const void>(w, x, kBackRecv);
  cb.out = x.out;
  cb.workspace = w.at(x.workspace, kCombineWs);
  if (w.mode == Mode::reduce) {
    cb.inverse = part<const std::int32_t>(w, x, kPartialInv);
    cb.weights = part<const float>(w, x, kOnes);
    return partials_pick(p, device_caps(), false).launch(p.combine_partials(), cb, b.comm->stream(r), pdl);
  }
  cb.inverse = part<const std::int32_t>(w, x, kSlotPos);
  cb.weights = x.weights;
  return combine_pick(p, device_caps(), false).launch(p.combine(), cb, b.comm->stream(r), pdl);
}

// Every rank's stream waits for what every rank's stream has issued so far
// (cross-device events: the kernels before it are complete and their writes
// to peers visible).
LaunchStatus all_ranks_barrier(const Problem& p, Comm& c) {
  for (int r = 0; r < p.ranks; ++r) {
    EP_TRY(cudaSetDevice(r));
    EP_TRY(cudaEventRecord(static_cast<cudaEvent_t>(c.join_event(r)), c.stream(r)));
  }
  for (int r = 0; r < p.ranks; ++r)
    for (int s = 0; s < p.ranks; ++s)
      if (s != r) EP_TRY(cudaStreamWaitEvent(c.stream(r), static_cast<cudaEvent_t>(c.join_event(s)), 0));
  return cudaSuccess;
}

// Dispatch: plan and pack on every rank, the counts exchanged and read back
// (the host sync), the rows, ids and slot bases exchanged, then each rank's
// layout (permute's auto pick over its received rows).
LaunchStatus dispatch(const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  Comm& c = *b.comm;
  const DeviceCaps& caps0 = device_caps();
  const Slices w = slices(p, caps0, Mode::nccl);
  const std::size_t rb = static_cast<std::size_t>(p.row_bytes()), K = static_cast<std::size_t>(p.topk);
  const std::int64_t T = p.tokens;
  return forked(p, c, stream, [&]() -> LaunchStatus {
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      EP_TRY(cudaSetDevice(r));
      // After the fork a rank's predecessor is an event wait (with R > 1 even on
      // the launch's own stream: the previous join), not a kernel: PDL only for one rank.
      EP_TRY(launch_plan(p, x, w, r, c.stream(r), pdl && p.ranks == 1, pdl));
      EP_TRY(by_vec(p.row_bytes(), [&]<int V>() { return launch_pack<V>(p, x, w, c.stream(r), pdl); }));
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
    for (int r = 0; r < p.ranks; ++r) EP_TRY(lay_out(p, b, w, r, pdl));
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
  const Slices w = slices(p, device_caps(), Mode::nccl);
  const std::size_t rb = static_cast<std::size_t>(p.row_bytes());
  const std::size_t TK = static_cast<std::size_t>(p.tokens * p.topk);
  return forked(p, c, stream, [&]() -> LaunchStatus {
    for (int r = 0; r < p.ranks; ++r) {
      const RankBuffers& x = b.rank[std::size_t(r)];
      EP_TRY(cudaSetDevice(r));
      const bool own = pdl && p.ranks == 1;  // as the plan: no PDL after the fork's event waits
      EP_TRY(by_vec(p.row_bytes(), [&]<int V>() { return launch_back<V>(p, x, w, c.stream(r), own); }));
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
    for (int r = 0; r < p.ranks; ++r) EP_TRY(combine_on(p, b, w, r, pdl));
    return cudaSuccess;
  });
}

// p2p: no NCCL, no host sync and no plan. Each rank writes its rows into
// its fixed segment of every destination's receive buffer over NVLink, each
// token at its own place (pack_peer_kernel); a barrier of cross-device events; each rank lays out
// what it received. Combine: each rank writes its slots' outputs straight
// into the senders' returned rows (back_peer_kernel), a barrier, each rank
// combines. The first launch after a barrier goes without PDL: its
// predecessor in the stream is another device's event, not a kernel.
//
// How the ranks of a p2p launch wait for each other's writes: cross-device
// events in the stream graph (p2p), or device-side counters (p2p-signal,
// p2p-reduce-signal: a2a.cuh's PeerSignal, inside the writing kernels).
enum class Sync { events, signal };
struct Flavor {
  Sync sync;
  Return ret;
  Mode mode() const { return ret == Return::partials ? Mode::reduce : Mode::p2p; }
};
constexpr Flavor kP2p{Sync::events, Return::slots}, kP2pSignal{Sync::signal, Return::slots},
    kP2pReduce{Sync::events, Return::partials}, kP2pReduceSignal{Sync::signal, Return::partials};

// A wait for a signal that never comes traps after this long (a CUDA error,
// not a hang); a barrier of a healthy launch takes microseconds, but a
// sanitizer's instrumented peers can take seconds.
constexpr unsigned long long kSignalTimeoutNs = 20'000'000'000ull;

// Rank r's signal of a writing kernel: its own finished-block count, every
// rank's arrival counter of the phase (its last block waits on r's); nothing
// for Sync::events.
detail::PeerSignal peer_signal(const Problem& p, const Comm& c, int r, Sync sync, Comm::Signal done,
                               Comm::Signal arrive) {
  detail::PeerSignal s{};
  if (sync == Sync::events) return s;
  s.done = c.signal(r, done);
  for (int d = 0; d < p.ranks; ++d) s.arrive[d] = c.signal(d, arrive);
  s.rank = r;
  s.timeout_ns = kSignalTimeoutNs;
  return s;
}

// Every rank's stream waits for every rank's writes of the phase. Events: the
// next kernel's predecessor is another device's event, so it goes without
// PDL. Signal: nothing to add, the writing kernel itself ended with the
// barrier (signal_peers), and the next kernel may take PDL after it.
LaunchStatus barrier(const Problem& p, Comm& c, Sync sync) {
  return sync == Sync::events ? all_ranks_barrier(p, c) : cudaSuccess;
}

template <int kVec>
LaunchStatus launch_pack_peer(const Problem& p, const Buffers& b, const Slices& w, int r, bool pdl,
                              Sync sync) {
  const RankBuffers& x = b.rank[std::size_t(r)];
  detail::PeerRecv to{};
  for (int d = 0; d < p.ranks; ++d) {
    to.rows[d] = part<char>(w, b.rank[std::size_t(d)], kRecvRows);
    to.ids[d] = part<std::int32_t>(w, b.rank[std::size_t(d)], kRecvIds);
    to.aux[d] = part<std::int32_t>(w, b.rank[std::size_t(d)], kRecvAux);
    if (w.mode == Mode::reduce) to.w[d] = part<float>(w, b.rank[std::size_t(d)], kRecvW);
  }
  const bool reduce = w.mode == Mode::reduce;
  const detail::SenderMaps own{reduce ? nullptr : part<std::int32_t>(w, x, kSlotPos),
                               reduce ? part<std::int32_t>(w, x, kPartialInv) : nullptr,
                               reduce ? part<float>(w, x, kOnes) : nullptr};
  return prim::launch_ex(detail::pack_peer_kernel<kVec>, row_grid(p.recv_capacity()), kRowThreads, 0,
                         b.comm->stream(r), prim::pdl_attrs(pdl), static_cast<const char*>(x.hidden), x.topk_ids,
                         x.weights, x.placement, p.experts, p.tokens, p.topk, p.ranks, r, p.row_bytes(), own, to,
                         peer_signal(p, *b.comm, r, sync, Comm::kPackDone, Comm::kDispatchArrive));
}

template <int kVec>
LaunchStatus launch_back_peer(const Problem& p, const Buffers& b, const Slices& w, int r, bool pdl,
                              Sync sync) {
  const RankBuffers& x = b.rank[std::size_t(r)];
  detail::PeerBack to{};
  for (int d = 0; d < p.ranks; ++d) to.rows[d] = part<char>(w, b.rank[std::size_t(d)], kBackRecv);
  return prim::launch_ex(detail::back_peer_kernel<kVec>, row_grid(p.slot_capacity()), kRowThreads, 0,
                         b.comm->stream(r), prim::pdl_attrs(pdl), static_cast<const char*>(expert_out(p, x)),
                         part<const std::int32_t>(w, x, kInverse), part<const std::int32_t>(w, x, kRecvAux), p.ranks,
                         r, p.tokens, p.topk, p.row_bytes(), to,
                         peer_signal(p, *b.comm, r, sync, Comm::kBackDone, Comm::kCombineArrive));
}

// p2p-reduce's return: 16-byte vectors where H allows (combine's gather
// rule), kPer column vectors a thread: the smallest whose (row, chunk) items
// fit the blocks the GPU holds at once (reduce_peer_kernel says why), else 8.
LaunchStatus launch_reduce_peer(const Problem& p, const Buffers& b, const Slices& w, int r,
                                bool pdl, Sync sync) {
  const RankBuffers& x = b.rank[std::size_t(r)];
  detail::PeerBack to{};
  for (int d = 0; d < p.ranks; ++d) to.rows[d] = part<char>(w, b.rank[std::size_t(d)], kBackRecv);
  const auto go = [&]<class T, int kVec>() -> LaunchStatus {
    const std::int64_t rows = p.recv_capacity(), vecs = p.hidden / kVec;
    int per_sm = 0;
    EP_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, detail::reduce_peer_kernel<T, kVec, 8>,
                                                         kRowThreads, 0));
    const std::int64_t wave = std::int64_t{std::max(per_sm, 1)} * std::max(device_caps().sm_count, 1);
    auto items = [&](std::int64_t per) { return rows * ((vecs + kRowThreads * per - 1) / (kRowThreads * per)); };
    const auto launch = [&]<int kPer>() -> LaunchStatus {
      return prim::launch_ex(detail::reduce_peer_kernel<T, kVec, kPer>, row_grid(items(kPer)), kRowThreads, 0,
                             b.comm->stream(r), prim::pdl_attrs(pdl), static_cast<const T*>(expert_out(p, x)),
                             part<const std::int32_t>(w, x, kInverse), part<const float>(w, x, kRecvW),
                             part<const std::int32_t>(w, x, kRecvAux), p.ranks, r, p.tokens, p.topk, p.hidden, to,
                             peer_signal(p, *b.comm, r, sync, Comm::kBackDone, Comm::kCombineArrive));
    };
    if (items(1) <= wave) return launch.template operator()<1>();
    if (items(2) <= wave) return launch.template operator()<2>();
    if (items(4) <= wave) return launch.template operator()<4>();
    return launch.template operator()<8>();
  };
  const auto by_type = [&]<class T>() {
    constexpr int V = 16 / sizeof(T);
    return p.hidden % V == 0 ? go.template operator()<T, V>() : go.template operator()<T, 1>();
  };
  switch (p.dtype) {
    case combine::DType::f32: return by_type.template operator()<float>();
    case combine::DType::bf16: return by_type.template operator()<__nv_bfloat16>();
    case combine::DType::f16: return by_type.template operator()<__half>();
  }
  return cudaErrorInvalidValue;
}

// The phases' launches on every rank's stream, without the fork and join
// around them (a whole launch forks once).
// `per_rank` (launch_per_rank): no fork before, so the pack may take PDL
// after the rank's previous launch.
LaunchStatus dispatch_p2p_body(const Problem& p, const Buffers& b, const Slices& w, bool pdl,
                               Flavor f, bool per_rank = false) {
  const Sync sync = f.sync;
  Comm& c = *b.comm;
  for (int r = 0; r < p.ranks; ++r) {
    EP_TRY(cudaSetDevice(r));
    // No barrier before the writes into the peers: every rank's stream
    // already waits, through the fork, for every rank's previous launch (the
    // join), so no peer still reads the receive buffer written here (per
    // rank: per_rank_flavor says why its previous barriers suffice). After
    // the fork a rank's predecessor is an event wait (with R > 1 even on the
    // launch's own stream: the previous join), not a kernel: PDL only for
    // one rank or per rank.
    const bool first = pdl && (p.ranks == 1 || per_rank);
    EP_TRY(by_vec(p.row_bytes(), [&]<int V>() { return launch_pack_peer<V>(p, b, w, r, first, sync); }));
  }
  EP_TRY(barrier(p, c, sync));
  for (int r = 0; r < p.ranks; ++r) EP_TRY(lay_out(p, b, w, r, pdl && sync == Sync::signal));
  return cudaSuccess;
}

// `after_layout`: the rank's stream holds its own layout's kernels just
// before (a whole launch), so the first kernel may take PDL; after a fork it
// may not.
LaunchStatus combine_p2p_body(const Problem& p, const Buffers& b, const Slices& w, bool pdl,
                              bool after_layout, Flavor f) {
  const Sync sync = f.sync;
  const bool first = pdl && after_layout;
  // The returned rows written here were read by every rank's previous
  // combine, which the fork (or, in a whole launch, the dispatch's barrier)
  // orders before.
  for (int r = 0; r < p.ranks; ++r) {
    EP_TRY(cudaSetDevice(r));
    if (f.ret == Return::partials) EP_TRY(launch_reduce_peer(p, b, w, r, first, sync));
    else EP_TRY(by_vec(p.row_bytes(), [&]<int V>() { return launch_back_peer<V>(p, b, w, r, first, sync); }));
  }
  EP_TRY(barrier(p, *b.comm, sync));
  for (int r = 0; r < p.ranks; ++r) EP_TRY(combine_on(p, b, w, r, pdl && sync == Sync::signal));
  return cudaSuccess;
}

// A launch that fails half issued may have queued some ranks' signals and
// not others': outside a capture (where nothing ran), every rank's queued work
// is waited for and the counters zeroed, so the next launch's barriers count
// from zero again. A writing kernel already queued on a rank whose peers'
// were not waits for them in its last block: that wait traps after
// kSignalTimeoutNs (a CUDA error on that rank's context), not a hang.
LaunchStatus after_failure(const Comm& c, Stream stream, Sync sync, LaunchStatus e) {
  if (e == cudaSuccess || sync != Sync::signal) return e;
  auto capturing = [](Stream s) {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(static_cast<cudaStream_t>(s), &st) != cudaSuccess ||
           st != cudaStreamCaptureStatusNone;
  };
  bool any = capturing(stream);
  for (int r = 0; r < c.ranks(); ++r) any = any || capturing(c.stream(r));
  if (!any) (void)c.reset_signals();
  return e;
}

// A p2p launch's own preconditions (the variants' not_applicable says why to
// a user; a direct caller past it gets cudaErrorInvalidValue, never a pack
// that misses slots past its block).
bool comm_fits(const Problem& p, const Buffers& b) {
  return b.comm != nullptr && b.comm->ranks() == p.ranks && b.comm->has_peers() && p.topk <= kP2pMaxTopk;
}

// The experts phase alone (Stage::experts): each rank's FFN after the fork
// (an event wait before it with R > 1, so PDL only for one rank).
LaunchStatus experts_stage(const Problem& p, const Buffers& b, Stream stream, bool pdl, Mode mode) {
  const Slices w = slices(p, device_caps(), mode);
  return forked(p, *b.comm, stream, [&] { return experts_all(p, b, w, pdl && p.ranks == 1); });
}

LaunchStatus p2p_stage(const Problem& p, const Buffers& b, Stage st, Stream stream, bool pdl, Flavor f) {
  if (!comm_fits(p, b)) return cudaErrorInvalidValue;
  if (st == Stage::experts) return experts_stage(p, b, stream, pdl, f.mode());
  const Slices w = slices(p, device_caps(), f.mode());
  return after_failure(*b.comm, stream, f.sync, forked(p, *b.comm, stream, [&] {
    return st == Stage::dispatch ? dispatch_p2p_body(p, b, w, pdl, f) : combine_p2p_body(p, b, w, pdl, false, f);
  }));
}

LaunchStatus launch_flavor(const Problem& p, const Buffers& b, Stream s, bool pdl, Flavor f) {
  if (!comm_fits(p, b)) return cudaErrorInvalidValue;
  const Slices w = slices(p, device_caps(), f.mode());
  return after_failure(*b.comm, s, f.sync, forked(p, *b.comm, s, [&]() -> LaunchStatus {
    EP_TRY(dispatch_p2p_body(p, b, w, pdl, f));
    EP_TRY(experts_all(p, b, w, pdl));  // after each rank's layout kernels: PDL holds
    return combine_p2p_body(p, b, w, pdl, true, f);
  }));
}
// launch_per_rank (ep.hpp): each rank's whole launch on its Comm stream, no
// fork and join; the flavor's own two barriers are the only ones. None is
// needed at the start: a rank's writes into a peer's receive parts come
// after its previous launch's combine barrier, which every rank passes only
// once every rank's return kernel (the last reader of its receive parts)
// has finished; and its returns into a peer come after this launch's
// dispatch barrier, which that peer's pack raises only after the peer's
// previous combine (the last reader of its returned rows) in stream order.
LaunchStatus per_rank_flavor(const Problem& p, const Buffers& b, bool pdl, Flavor f) {
  if (!comm_fits(p, b)) return cudaErrorInvalidValue;
  if (f.sync != Sync::signal) return cudaErrorNotSupported;  // events would tie the ranks' streams together
  Comm& c = *b.comm;
  const Slices w = slices(p, device_caps(), f.mode());
  DeviceScope scope;
  const LaunchStatus e = [&]() -> LaunchStatus {
    EP_TRY(dispatch_p2p_body(p, b, w, pdl, f, /*per_rank=*/true));
    EP_TRY(experts_all(p, b, w, pdl));
    return combine_p2p_body(p, b, w, pdl, /*after_layout=*/true, f);
  }();
  return after_failure(c, c.stream(0), f.sync, e);
}

LaunchStatus launch_p2p(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  return launch_flavor(p, b, s, pdl, kP2p);
}
LaunchStatus launch_p2p_signal(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  return launch_flavor(p, b, s, pdl, kP2pSignal);
}
LaunchStatus launch_p2p_reduce(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  return launch_flavor(p, b, s, pdl, kP2pReduce);
}
LaunchStatus launch_p2p_reduce_signal(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  return launch_flavor(p, b, s, pdl, kP2pReduceSignal);
}

std::size_t p2p_workspace(const Problem& p, const DeviceCaps& caps) { return slices(p, caps, Mode::p2p).total; }
std::size_t reduce_workspace(const Problem& p, const DeviceCaps& caps) { return slices(p, caps, Mode::reduce).total; }

std::string p2p_limits(const DeviceCaps&) {
  return "R <= " + std::to_string(kMaxRanks) + " GPUs of one host with peer access between every pair; K <= " +
         std::to_string(kP2pMaxTopk);
}
const char* topk_na(const Problem& p) {
  static const std::string why =
      "K > " + std::to_string(kP2pMaxTopk) + " (the pack looks a token's owners up one a thread)";
  return p.topk > kP2pMaxTopk ? why.c_str() : nullptr;
}
// Each rank's layout and (p.ffn) FFN pick.
const char* layouts_na(const Problem& p, const DeviceCaps& caps) {
  for (int r = 0; r < p.ranks; ++r) {
    if (const char* why = layout_variant(p, r, caps).not_applicable(p.layout(r), caps)) return why;
    if (p.ffn)
      if (const char* why = ffn_variant(p, r, caps).not_applicable(p.ffn_problem(r), caps)) return why;
  }
  return nullptr;
}
const char* layout_and_combine_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = combine_pick(p, caps, false).not_applicable(p.combine(), caps)) return why;
  return layouts_na(p, caps);
}
const char* p2p_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = topk_na(p)) return why;
  if (caps.present() && !peer_access_missing(p.ranks).empty()) return "no peer access between the GPUs";
  return layout_and_combine_na(p, caps);
}
std::string p2p_signal_limits(const DeviceCaps&) {
  return "R <= " + std::to_string(kMaxRanks) +
         " GPUs of one host with peer access and native atomics between every pair (NVLink); K <= " +
         std::to_string(kP2pMaxTopk);
}
const char* p2p_signal_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = topk_na(p)) return why;
  if (caps.present() && !peer_atomics_missing(p.ranks).empty())
    return "no peer access with native atomics between the GPUs (NVLink)";
  return layout_and_combine_na(p, caps);
}
// Its layouts and the combine of partials (combine's slot problem is not run).
const char* p2p_reduce_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = topk_na(p)) return why;
  if (caps.present() && !peer_access_missing(p.ranks).empty()) return "no peer access between the GPUs";
  if (const char* why = layouts_na(p, caps)) return why;
  return partials_pick(p, caps, false).not_applicable(p.combine_partials(), caps);
}
const char* p2p_reduce_signal_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = topk_na(p)) return why;
  if (caps.present() && !peer_atomics_missing(p.ranks).empty())
    return "no peer access with native atomics between the GPUs (NVLink)";
  return p2p_reduce_na(p, caps);
}

LaunchStatus launch_a2a(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (b.comm == nullptr || b.comm->ranks() != p.ranks || !b.comm->has_nccl()) return cudaErrorInvalidValue;
  b.comm->clear_error();
  EP_TRY(dispatch(p, b, s, pdl));
  if (p.ffn) EP_TRY(experts_stage(p, b, s, pdl, Mode::nccl));
  return combine_back(p, b, s, pdl);
}

std::size_t a2a_workspace(const Problem& p, const DeviceCaps& caps) { return slices(p, caps, Mode::nccl).total; }

std::string a2a_limits(const DeviceCaps&) {
  return "R <= " + std::to_string(kMaxRanks) + " GPUs of one host; K <= 64 (combine's); NCCL at run time";
}
const char* a2a_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present()) {
    static const std::string missing = nccl_missing();  // loaded (or not) once a process
    if (!missing.empty()) return missing.c_str();
  }
  return layout_and_combine_na(p, caps);
}

// Not stable_order: a rank's rows within an expert come in its layout pick's
// order, which the checker takes as a set (out is bit for bit all the same).
const std::array<Variant, 5> kVariants{{
    {{"p2p-signal",
      "moekit's own, p2p with its barriers on the device, inside the writing kernels: the last block of each rank's "
      "writing kernel raises a counter on every rank over NVLink (release at system scope), then spins on its own "
      "(acquire) until every rank has arrived and takes the arrivals back, a counting semaphore a graph replays "
      "without a reset; no graph edge crosses GPUs between the fork and the join, no wait kernel runs, and the "
      "kernels after a barrier keep PDL; launches per rank (a process per GPU) need no other barrier",
      "pack_peer_kernel back_peer_kernel permute:* experts:* combine:*"},
     false, p2p_signal_limits, p2p_signal_na, p2p_workspace, launch_p2p_signal},
    {{"p2p-reduce",
      "moekit's own, p2p returning partial sums as DeepEP's combine does: the weights go with the rows, each "
      "expert rank sums a received row's slots (combine's arithmetic over its own slots, rounded to the row dtype) "
      "and writes one row per (token, rank) straight into the sender, which adds its R partials rank by rank "
      "(combine's auto pick, weight 1) and scales once; out is not combine's rule bit for bit (docs/ep.md derives "
      "the bound) but the sum of rounded partials, checked exactly against that reference; up to K / R times fewer "
      "returned bytes",
      "pack_peer_kernel reduce_peer_kernel permute:* experts:* combine:*"},
     false, p2p_limits, p2p_reduce_na, reduce_workspace, launch_p2p_reduce},
    {{"p2p-reduce-signal",
      "moekit's own, p2p-reduce with p2p-signal's device-side barriers (no graph edge crosses GPUs inside a launch; "
      "the kernels after a barrier keep PDL): the same out",
      "pack_peer_kernel reduce_peer_kernel permute:* experts:* combine:*"},
     false, p2p_signal_limits, p2p_reduce_signal_na, reduce_workspace, launch_p2p_reduce_signal},
    {{"p2p",
      "moekit's own, no NCCL, no host sync and no plan: each rank writes each token's row (ids, slot base) "
      "straight into the token's place in its fixed segment of every destination that owns one of its experts, "
      "over NVLink (peer access), and marks the token's place dropped at the others; cross-device events order "
      "the phases; each receiver lays them out with permute's auto "
      "pick; each rank writes its slots' outputs straight back into the senders' fixed slot strides, which "
      "combine's auto pick reads",
      "pack_peer_kernel back_peer_kernel permute:* experts:* combine:*"},
     false, p2p_limits, p2p_na, p2p_workspace, launch_p2p},
    {{"nccl-a2a",
      "the baseline a user would write: each rank plans and packs its rows per destination, the counts go over "
      "NCCL and back to the host, then grouped ncclSend/ncclRecv move the rows and ids; each receiver lays them "
      "out with permute's auto pick (compact, its experts); the outputs return the same way, combined with "
      "combine's auto pick (waits on the host between count and payload)",
      "plan_kernel plan_count_kernel plan_place_kernel pack_kernel drop_tail_kernel back_kernel permute:* experts:* combine:*"},
     false, a2a_limits, a2a_na, a2a_workspace, launch_a2a, nullptr, false, /*host_sync=*/true},
}};

// p2p where the GPUs map each other's memory, else NCCL. Not p2p-signal,
// though it leads at R 4 since its barrier moved into the writing kernels
// (docs/bench/peers-ep.md "4 H200s (the twenty-eighth session)"): a device-
// side barrier needs every rank's kernels running at once, which a tool that
// serializes kernels (ncu) does not give, and auto must run there. Not
// p2p-reduce*: their out is the partial-sum rule, not combine's.
const std::array<AutoRow<Problem>, 2> kAutoRows = {{
    {"p2p", "", nullptr},
    {"nccl-a2a", "", nullptr},
}};

}  // namespace

namespace {

// The p2p variant v launches, by its launch function: the one place that
// ties a variant to its Flavor (nullptr: nccl-a2a).
const Flavor* flavor_of(const Variant& v) {
  static constexpr std::pair<decltype(&launch_p2p), Flavor> kFlavors[] = {
      {launch_p2p, kP2p}, {launch_p2p_signal, kP2pSignal}, {launch_p2p_reduce, kP2pReduce},
      {launch_p2p_reduce_signal, kP2pReduceSignal}};
  for (const auto& [launch, flavor] : kFlavors)
    if (v.launch == launch) return &flavor;
  return nullptr;
}

}  // namespace

bool needs_nccl(const Variant& v) { return v.launch == launch_a2a; }
bool launches_per_rank(const Variant& v) {
  const Flavor* f = flavor_of(v);
  return f != nullptr && f->sync == Sync::signal;
}

LaunchStatus launch_per_rank(const Variant& v, const Problem& p, const Buffers& b, bool pdl) {
  const Flavor* f = flavor_of(v);
  return f != nullptr ? per_rank_flavor(p, b, pdl, *f) : cudaErrorNotSupported;
}

Return returns(const Variant& v) {
  const Flavor* f = flavor_of(v);
  return f != nullptr ? f->ret : Return::slots;
}

LaunchStatus launch_stage(const Variant& v, const Problem& p, const Buffers& b, Stage s, Stream stream, bool pdl) {
  if (b.comm == nullptr || b.comm->ranks() != p.ranks) return cudaErrorInvalidValue;
  b.comm->clear_error();
  if (v.launch == launch_a2a && !b.comm->has_nccl()) return cudaErrorInvalidValue;
  if (v.launch == launch_a2a) {
    if (s == Stage::experts) return experts_stage(p, b, stream, pdl, Mode::nccl);
    return s == Stage::dispatch ? dispatch(p, b, stream, pdl) : combine_back(p, b, stream, pdl);
  }
  if (const Flavor* f = flavor_of(v)) return p2p_stage(p, b, s, stream, pdl, *f);
  return cudaErrorInvalidValue;
}

const experts::Variant& ffn_variant(const Problem& p, int rank, const DeviceCaps& caps) {
  return experts::pick_on_layout(p.ffn_problem(rank), caps);
}

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::ep
