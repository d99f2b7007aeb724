// Registry of the align variants: thin launchers over the kernels in the
// .cuh headers, their limits, and the `auto` rule (docs/align.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "align/align.hpp"
#include "align/baseline.cuh"
#include "align/blelloch.cuh"
#include "align/cluster.cuh"
#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/micro.cuh"
#include "align/onepass.cuh"
#include "align/oneshot.cuh"
#include "align/persistent.cuh"
#include "align/relay.cuh"
#include "align/scatter.cuh"
#include "align/small_batch.cuh"
#include "align/solo.cuh"
#include "align/stripe.cuh"
#include "align/tiny.cuh"
#include "align/twopass.cuh"
#include "align/vecpad.cuh"
#include "align/warpscan.cuh"
#include "common/auto_rule.hpp"

namespace moekit::align {
namespace {

using namespace detail;

cudaStream_t cu(Stream s) { return reinterpret_cast<cudaStream_t>(s); }

// The one registry launcher of every variant: a design's launcher template
// (`launch_<design><IdT>(p, b, stream, pdl)`, in its header or below) for
// int32 and int64 ids, dispatched on the id dtype.
using I32 = std::int32_t;
using I64 = std::int64_t;
using Launcher = cudaError_t (*)(const Problem&, const Buffers&, cudaStream_t, bool);
template <Launcher L32, Launcher L64>
LaunchStatus by_ids(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  return static_cast<LaunchStatus>(p.ids_int64 ? L64(p, b, cu(s), pdl) : L32(p, b, cu(s), pdl));
}

std::size_t cursor_workspace(const Problem& p, const DeviceCaps&) {
  return sizeof(int) * (static_cast<std::size_t>(p.num_experts) + 1);
}
std::size_t no_workspace(const Problem&, const DeviceCaps&) { return 0; }

const char* needs_smem(const DeviceCaps& caps, std::size_t bytes) {
  return fits_smem(caps, bytes) ? nullptr : "E too large for one block's shared memory";
}

std::size_t scan_smem(const Problem& p) { return expert_table_smem(p.num_experts); }
std::size_t blelloch_smem(const Problem& p) {
  return sizeof(int) * (static_cast<std::size_t>(next_pow2(p.num_experts)) + p.num_experts + 1);
}

// ---- limits as text -----------------------------------------------------------
std::string num(std::int64_t v) { return std::to_string(v); }

// Largest E in [1, 2^20] for which fits(E) holds (fits is monotone), 0 if none.
template <class F>
std::int64_t max_experts(F fits) {
  std::int64_t lo = 0, hi = std::int64_t{1} << 20;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    if (fits(static_cast<int>(mid)))
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// "E <= N (what)" on a device, "what" without one.
std::string smem_bound(const DeviceCaps& caps, const char* what, std::size_t (*bytes)(int E)) {
  if (!caps.present()) return std::string(what) + " <= the per-block shared memory opt-in";
  const std::int64_t e = max_experts([&](int E) { return bytes(E) <= caps.smem_optin; });
  return "E <= " + num(e) + " (" + what + " <= " + num(static_cast<std::int64_t>(caps.smem_optin)) +
         " bytes of shared memory)";
}

std::size_t blelloch_bytes(int E) {
  return sizeof(int) * (static_cast<std::size_t>(next_pow2(E)) + E + 1);
}
std::size_t oneshot_bytes(int E) { return oneshot_smem(E); }
std::size_t onepass_bytes(int E) { return onepass_smem(E); }
std::size_t twopass_bytes(int E) {
  const int rows = twopass_rows(E);
  return rows < 1 ? ~std::size_t{0} : sizeof(int) * (static_cast<std::size_t>(rows + 2) * E + 1);
}
std::size_t persistent_bytes(int E) {
  const int rows = persistent_rows(E);
  return rows < 1 ? ~std::size_t{0} : persistent_smem(rows, E);
}

std::string baseline_limits(const DeviceCaps& c) { return smem_bound(c, "4(E+1) bytes", expert_table_smem); }
std::string blelloch_limits(const DeviceCaps& c) {
  return smem_bound(c, "4(next_pow2(E)+E+1) bytes", blelloch_bytes);
}
std::string small_batch_limits(const DeviceCaps&) {
  return "numel <= " + num(kSmallBatchMaxNumel) + " and E <= " + num(kSmallBatchMaxExperts);
}
std::string fill_overlap_limits(const DeviceCaps& c) {
  return baseline_limits(c) + "; one launch when numel <= " + num(kSmallBatchMaxNumel) +
         " and E <= " + num(kSmallBatchMaxExperts);
}
std::string tiny_limits(const DeviceCaps& c) {
  std::string o = "numel <= " + num(kTinyMaxNumel) + ", E <= " + num(kTinyMaxExperts) +
                  ", 4(numel+2E+1)+256 bytes of shared memory";
  if (c.present()) o += " <= " + num(static_cast<std::int64_t>(c.smem_optin));
  return o;
}
std::string micro_limits(const DeviceCaps&) { return "numel <= " + num(kMicroMaxNumel); }
std::string solo_limits(const DeviceCaps& c) {
  return "numel <= " + num(kSoloMaxNumel) + ", " + smem_bound(c, "4(E+1)+256 bytes", expert_table_block_smem);
}
std::string stripe_limits(const DeviceCaps& c) {
  std::string o = "numel <= " + num(kStripeMaxNumel) + ", " + kStripeSmemText;
  if (c.present()) o += " <= " + num(static_cast<std::int64_t>(c.smem_optin));
  return o;
}
std::string relay_limits(const DeviceCaps& c) {
  return "numel <= " + num(kRelayMaxNumel) + ", " + smem_bound(c, "4(E+1)+256 bytes", expert_table_block_smem) +
         ", cooperative launch, 2 SMs";
}
std::string oneshot_limits(const DeviceCaps& c) {
  return "numel <= " + num(kOneshotMaxNumel) + ", " + smem_bound(c, "8E+4 bytes", oneshot_bytes);
}
std::string persistent_limits(const DeviceCaps& c) {
  return smem_bound(c, "a counter row per warp, 4(rows+1)E+4 bytes", persistent_bytes) +
         ", cooperative launch";
}
// Slots one wave of onepass blocks holds: 4 16-byte loads x 1024 threads x SMs.
std::string onepass_limits(const DeviceCaps& c) {
  constexpr std::int64_t per_sm = 4LL * 1024 * 16;  // bytes of ids per SM
  std::string o = "numel <= 4 16-byte loads x 1024 threads x SMs";
  if (c.present())
    o += " (" + num(per_sm / 4 * c.sm_count) + " int32 / " + num(per_sm / 8 * c.sm_count) +
         " int64 ids)";
  return o + ", " + smem_bound(c, "8E+4 bytes", onepass_bytes) + ", cooperative launch";
}
std::string twopass_limits(const DeviceCaps& c) {
  return smem_bound(c, "12E+4 bytes", twopass_bytes);
}
std::string stable_limits(const DeviceCaps& c) {
  return "as twopass: " + twopass_limits(c) + "; beyond it as persistent: " + persistent_limits(c);
}
std::string any_limits(const DeviceCaps&) { return "any"; }

// ---- baseline ------------------------------------------------------------------
template <class IdT>
cudaError_t launch_baseline(const Problem& p, const Buffers& b, cudaStream_t s, bool pdl) {
  const Args a = make_args(p, b);
  const prim::LaunchAttrs at = prim::pdl_attrs(pdl);
  int* cursor = static_cast<int*>(b.workspace);
  if (const cudaError_t e = prim::launch_ex(fill_sorted_scalar_kernel,
                                            clamp_grid(ceil_div<long long>(a.max_padded, 256), 1024), 256, 0, s,
                                            at, a);
      e != cudaSuccess)
    return e;
  if (const cudaError_t e = prim::launch_with_smem(baseline_count_kernel<IdT>, 1, kCountThreads, scan_smem(p), s,
                                                   at, a, cursor);
      e != cudaSuccess)
    return e;
  return launch_scatter_atomic<IdT>(a, cursor, s, at);
}
const char* baseline_na(const Problem& p, const DeviceCaps& caps) {
  return needs_smem(caps, scan_smem(p));
}

// ---- small-batch ---------------------------------------------------------------
// Device-independent: the one-block design's own limits.
bool small_batch_fits(const Problem& p) {
  return p.numel <= kSmallBatchMaxNumel && p.num_experts <= kSmallBatchMaxExperts;
}
const char* small_batch_na(const Problem& p, const DeviceCaps&) {
  return small_batch_fits(p) ? nullptr : "needs numel < 1024 and E <= 64";
}
template <class IdT>
cudaError_t launch_small_batch(const Problem& p, const Buffers& b, cudaStream_t s, bool pdl) {
  return prim::launch_ex(small_batch_kernel<IdT, 0>, 1, kSmallBatchThreads, small_batch_smem(p.num_experts), s,
                         prim::pdl_attrs(pdl), make_args(p, b));
}

// ---- vecpad --------------------------------------------------------------------
template <class IdT>
cudaError_t launch_vecpad(const Problem& p, const Buffers& b, cudaStream_t s, bool pdl) {
  const Args a = make_args(p, b);
  const prim::LaunchAttrs at = prim::pdl_attrs(pdl);
  int* cursor = static_cast<int*>(b.workspace);
  if (const cudaError_t e =
          prim::launch_with_smem(vecpad_count_kernel<IdT>, 1, kCountThreads, scan_smem(p), s, at, a, cursor);
      e != cudaSuccess)
    return e;
  return launch_scatter_atomic<IdT>(a, cursor, s, at);
}

// ---- blelloch ------------------------------------------------------------------
template <class IdT>
cudaError_t launch_blelloch(const Problem& p, const Buffers& b, cudaStream_t s, bool pdl) {
  const Args a = make_args(p, b);
  const prim::LaunchAttrs at = prim::pdl_attrs(pdl);
  int* cursor = static_cast<int*>(b.workspace);
  if (const cudaError_t e = prim::launch_with_smem(blelloch_count_kernel<IdT>, 1, kCountThreads, blelloch_smem(p),
                                                   s, at, a, cursor, next_pow2(p.num_experts));
      e != cudaSuccess)
    return e;
  return launch_scatter_atomic<IdT>(a, cursor, s, at);
}
const char* blelloch_na(const Problem& p, const DeviceCaps& caps) {
  return needs_smem(caps, blelloch_smem(p));
}

// ---- warpscan ------------------------------------------------------------------
template <class IdT>
cudaError_t launch_warpscan(const Problem& p, const Buffers& b, cudaStream_t s, bool pdl) {
  const Args a = make_args(p, b);
  const prim::LaunchAttrs at = prim::pdl_attrs(pdl);
  int* cursor = static_cast<int*>(b.workspace);
  if (const cudaError_t e = prim::launch_with_smem(warpscan_count_kernel<IdT, false>, 1, kCountThreads,
                                                   scan_smem(p), s, at, a, cursor);
      e != cudaSuccess)
    return e;
  return launch_scatter_atomic<IdT>(a, cursor, s, at);
}

// ---- fill-overlap --------------------------------------------------------------
template <class IdT>
cudaError_t launch_fill_overlap(const Problem& p, const Buffers& b, cudaStream_t s, bool pdl) {
  const Args a = make_args(p, b);
  const prim::LaunchAttrs at = prim::pdl_attrs(pdl);
  if (small_batch_fits(p))  // one launch: fill threads + compute threads
    return prim::launch_ex(small_batch_kernel<IdT, kOverlapFillThreads>, 1,
                           kOverlapFillThreads + kSmallBatchThreads, small_batch_smem(p.num_experts), s, at, a);
  int* cursor = static_cast<int*>(b.workspace);
  if (const cudaError_t e = prim::launch_with_smem(warpscan_count_kernel<IdT, true>, 2, kCountThreads,
                                                   scan_smem(p), s, at, a, cursor);
      e != cudaSuccess)
    return e;
  return launch_scatter_atomic<IdT>(a, cursor, s, at);
}
std::size_t fill_overlap_workspace(const Problem& p, const DeviceCaps& caps) {
  return small_batch_fits(p) ? 0 : cursor_workspace(p, caps);
}

// ---- one-launch and cooperative designs, stable ------------------------------
const char* tiny_na(const Problem& p, const DeviceCaps& caps) { return tiny_not_applicable(p, caps); }

const char* micro_na(const Problem& p, const DeviceCaps& caps) { return micro_not_applicable(p, caps); }

const char* relay_na(const Problem& p, const DeviceCaps& caps) { return relay_not_applicable(p, caps); }
std::size_t relay_ws(const Problem&, const DeviceCaps&) { return relay_workspace(); }

const char* solo_na(const Problem& p, const DeviceCaps& caps) { return solo_not_applicable(p, caps); }

const char* cluster_na(const Problem& p, const DeviceCaps& caps) {
  return p.ids_int64 ? cluster_not_applicable<std::int64_t>(p, caps) : cluster_not_applicable<std::int32_t>(p, caps);
}
std::string cluster_limits(const DeviceCaps&) {
  return "E <= " + num(kClusterMaxExperts) + ", numel <= " + num(cluster_max_numel<std::int32_t>()) + " (int64 ids: " +
         num(cluster_max_numel<std::int64_t>()) + "), thread block clusters (sm_90+)";
}

const char* stripe_na(const Problem& p, const DeviceCaps& caps) { return stripe_not_applicable(p, caps); }

const char* oneshot_na(const Problem& p, const DeviceCaps& caps) {
  return oneshot_not_applicable(p, caps);
}

std::size_t persistent_ws(const Problem& p, const DeviceCaps& caps) {
  return p.ids_int64 ? persistent_workspace<std::int64_t>(p, caps)
                     : persistent_workspace<std::int32_t>(p, caps);
}
const char* persistent_na(const Problem& p, const DeviceCaps& caps) {
  return persistent_not_applicable(p, caps);
}

const char* onepass_na(const Problem& p, const DeviceCaps& caps) {
  return p.ids_int64 ? onepass_not_applicable<std::int64_t>(p, caps)
                     : onepass_not_applicable<std::int32_t>(p, caps);
}
std::size_t onepass_ws(const Problem& p, const DeviceCaps&) { return onepass_workspace(p); }
bool zeroed(const Problem&, const DeviceCaps&) { return true; }

std::size_t twopass_ws(const Problem& p, const DeviceCaps& caps) {
  return p.ids_int64 ? twopass_workspace<std::int64_t>(p, caps)
                     : twopass_workspace<std::int32_t>(p, caps);
}
const char* twopass_na(const Problem& p, const DeviceCaps& caps) {
  return twopass_not_applicable(p, caps);
}

// Stable designs by size (docs/align.md): stripe from 128 to 1024 slots for
// E <= 512 (from 129 slots when E > 128: its block scan), faster there than
// micro and oneshot (record: docs/bench/align-notes.md "stable (2026-11-26",
// H200); micro for the other decode-sized inputs (<= 256 slots); oneshot
// while every block can afford to re-read all slots (<= 8192: ahead of
// twopass at 1024 tokens x 8); then twopass (since its launch-shape fit ahead
// of persistent at every measured shape with E <= 1024); the cooperative
// persistent kernel only where twopass does not apply. From E = 4096
// twopass's G x E table cap leaves it <= 8 blocks with one counting warp
// each, so there oneshot runs as long as it applies and persistent after it.
// Record: bench/results/align.jsonl tables "E=256 topk=8 uniform" (tokens
// 1024), "E=512 topk=8 uniform" (tokens 16384), "E=16384 topk=8 uniform"
// (tokens 4096) and "E=4096 topk=8 uniform" (tokens 16384), variants
// oneshot / twopass / persistent.
bool oneshot_preferred(const Problem& p, const Policy& pol) { return p.numel <= pol.oneshot_max_slots; }
bool huge_experts(const Problem& p, const Policy& pol) { return p.num_experts >= pol.huge_experts; }

// The variant `stable` runs; the registry entry of that variant then answers
// for it (limits check, workspace, launch), as `auto` does.
const char* stable_choice(const Problem& p, const DeviceCaps& caps) {
  const bool one_ok = oneshot_not_applicable(p, caps) == nullptr;
  const bool two_ok = twopass_not_applicable(p, caps) == nullptr;
  const bool per_ok = persistent_not_applicable(p, caps) == nullptr;
  const Policy& pol = policy_for(caps);
  const bool block_scan = warp_scan_per_lane(p.num_experts) == 0;  // stripe's scan
  if (stable_stripe_preferred(pol, p.numel, p.num_experts, block_scan) && stripe_not_applicable(p, caps) == nullptr)
    return "stripe";
  if (micro_not_applicable(p, caps) == nullptr) return "micro";
  if (one_ok && (oneshot_preferred(p, pol) || huge_experts(p, pol))) return "oneshot";
  if (per_ok && huge_experts(p, pol)) return "persistent";
  if (two_ok) return "twopass";
  if (per_ok) return "persistent";
  return "oneshot";  // applicable or nothing is
}
const Variant& stable_pick(const Problem& p, const DeviceCaps& caps);
const char* stable_na(const Problem& p, const DeviceCaps& caps) {
  return stable_pick(p, caps).not_applicable(p, caps);
}
std::size_t stable_ws(const Problem& p, const DeviceCaps& caps) {
  return stable_pick(p, caps).workspace_bytes(p, caps);
}
LaunchStatus stable_launch(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  return stable_pick(p, moekit::device_caps()).launch(p, b, s, pdl);
}

const Variant& auto_pick(const Problem& p, const DeviceCaps& caps);
const char* auto_na(const Problem& p, const DeviceCaps& caps) {
  return auto_pick(p, caps).not_applicable(p, caps);
}
std::size_t auto_ws(const Problem& p, const DeviceCaps& caps) {
  return auto_pick(p, caps).workspace_bytes(p, caps);
}
LaunchStatus auto_launch(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  return auto_pick(p, moekit::device_caps()).launch(p, b, s, pdl);
}
bool auto_zeroed(const Problem& p, const DeviceCaps& caps) {
  return needs_zeroed_workspace(auto_pick(p, caps), p, caps);
}

const std::array<Variant, 18> kVariants{{
    {{"baseline",
      "fill kernel; one block counts (shared atomics) and scans serially; scatter by a global "
      "atomic per slot", "fill_sorted_scalar_kernel baseline_count_kernel scatter_atomic_kernel"},
     false, baseline_limits, baseline_na, cursor_workspace, by_ids<launch_baseline<I32>, launch_baseline<I64>>},
    {{"small-batch", "small inputs: one block, per-thread counter rows, no atomics, one launch", "small_batch_kernel"},
     false, small_batch_limits, small_batch_na, no_workspace, by_ids<launch_small_batch<I32>, launch_small_batch<I64>>},
    {{"vecpad",
      "baseline with the padding fused into the count block (16-byte stores): no fill launch", "vecpad_count_kernel scatter_atomic_kernel"},
     false, baseline_limits, baseline_na, cursor_workspace, by_ids<launch_vecpad<I32>, launch_vecpad<I64>>},
    {{"blelloch", "vecpad with a Blelloch scan; expert_ids by binary search over all blocks", "blelloch_count_kernel scatter_atomic_kernel"},
     false, blelloch_limits, blelloch_na, cursor_workspace, by_ids<launch_blelloch<I32>, launch_blelloch<I64>>},
    {{"warpscan", "vecpad with a two-level warp-shuffle scan (3 barriers)", "warpscan_count_kernel scatter_atomic_kernel"},
     false, baseline_limits, baseline_na, cursor_workspace, by_ids<launch_warpscan<I32>, launch_warpscan<I64>>},
    {{"fill-overlap",
      "warpscan with the padding written by a 2nd block (or 256 fill threads on the small path) "
      "while the count runs", "small_batch_kernel warpscan_count_kernel scatter_atomic_kernel"},
     false, fill_overlap_limits, baseline_na, fill_overlap_workspace, by_ids<launch_fill_overlap<I32>, launch_fill_overlap<I64>>},
    {{"tiny",
      "small inputs: one launch, every block ranks all slots (shared atomics), writes its "
      "own chunk of rows; no workspace; unstable", "tiny_kernel<TinyPlaceNone>"},
     false, tiny_limits, tiny_na, no_workspace, by_ids<launch_tiny<I32>, launch_tiny<I64>>},
    {{"micro",
      "decode: one launch; the <= 256 slots laid out from ballots over their experts (no scan "
      "over E; up to 8 slots with numel <= B from keys shuffled across the warp): every warp "
      "alone up to 32 slots (no barrier), above one warp per 32 slots (two barriers); rows "
      "filled while the ids load; stable", "micro_kernel"},
     true, micro_limits, micro_na, no_workspace, by_ids<launch_micro<I32>, launch_micro<I64>>},
    {{"relay",
      "small and mid-sized inputs: one cooperative launch; fill blocks write the padding and -1 "
      "expert_ids and raise a counter, the last block alone ranks (shared atomics) and scans, "
      "waits for the counter, writes slots and expert_ids; self-clearing workspace; unstable", "relay_kernel"},
     false, relay_limits, relay_na, relay_ws, by_ids<launch_relay<I32>, launch_relay<I64>>, zeroed},
    {{"solo",
      "decode and small prefill: ONE block; rows and expert_ids filled while the ids load, "
      "slots ranked by shared atomics, block counts scanned, then slots and the first "
      "expert_ids entry of each block written; no workspace; unstable", "solo_kernel"},
     false, solo_limits, solo_na, no_workspace, by_ids<launch_solo<I32>, launch_solo<I64>>},
    {{"stripe",
      "decode and small prefill with many padded rows: one launch; every block lays out all "
      "slots (ranks from ballots, a per-warp count table) and writes only its own stripe of "
      "rows, filled while the ids load; no workspace; stable", "stripe_kernel"},
     true, stripe_limits, stripe_na, no_workspace, by_ids<launch_stripe<I32>, launch_stripe<I64>>},
    {{"oneshot",
      "small inputs: one launch, every block counts all slots, blocks split the writes; stable", "oneshot_kernel"},
     true, oneshot_limits, oneshot_na, no_workspace, by_ids<launch_oneshot<I32>, launch_oneshot<I64>>},
    {{"persistent",
      "large inputs: one cooperative launch, per-warp rows, blocks x experts table, 2 grid "
      "barriers; stable", "persistent_kernel"},
     true, persistent_limits, persistent_na, persistent_ws, by_ids<launch_persistent<I32>, launch_persistent<I64>>},
    {{"onepass",
      "mid-sized and large inputs: one cooperative launch, every slot loaded once; block ranks + one global "
      "atomic per (block, expert) give offsets; one grid barrier; self-clearing workspace; "
      "unstable", "onepass_kernel"},
     false, onepass_limits, onepass_na, onepass_ws, by_ids<launch_onepass<I32>, launch_onepass<I64>>, zeroed},
    {{"cluster",
      "mid-sized inputs, up to 128 experts: ONE thread block cluster (sm_90+) of up to 16 blocks; "
      "each ranks its slots with shared atomics and stores its counts into every block's shared "
      "memory before a cluster barrier, then every warp sums them and scans the block counts itself; "
      "rows filled while the ids load; no workspace; unstable", "cluster_kernel"},
     false, cluster_limits, cluster_na, no_workspace, by_ids<launch_cluster<I32>, launch_cluster<I64>>},
    {{"twopass",
      "large inputs: count + place kernels chained by PDL, blocks x experts table, no global "
      "atomics; stable", "twopass_kernel"},
     true, twopass_limits, twopass_na, twopass_ws, by_ids<launch_twopass<I32>, launch_twopass<I64>>},
    {{"stable",
      "slots ascend inside each expert (bit-exact vs the reference): stripe, micro, oneshot or "
      "twopass by size (persistent where twopass does not apply; E >= 4096: oneshot, then "
      "persistent)", "@stripe @micro @oneshot @twopass @persistent"},
     true, stable_limits, stable_na, stable_ws, stable_launch},
    {{"auto", "picks per shape from measured data (docs/align.md)", "@stripe @solo @micro @relay @cluster @tiny @onepass @oneshot @persistent @twopass @warpscan"},
     false, any_limits, auto_na, auto_ws, auto_launch, auto_zeroed},
}};

// The designs by size (B = 128, E 8..16384, 1..65536 tokens; the numbers are
// the device's row of align/policy.hpp, whose comment cites the record of
// each):
//  - `stripe` from 128 to 512 slots for E <= 128 where the padded rows are
//    many (>= 8192: E x B large): every block lays out all slots, so the
//    fill spreads over SMs without a hand-over; stable;
//  - `solo` from 33 to 512 slots (when E <= 16 up to 4096 and 512 per
//    expert) while the padded rows are few (<= 8704: small E or small B) and
//    E <= 512: one block, no hand-over, but one SM writes every row and
//    every slot;
//  - `micro` up to 128 slots, and up to 256 with E >= 2048 and B >= 64 (its
//    cost hardly grows with E): stable;
//  - `relay` up to 256 slots where B < 64;
//  - `cluster` from 3073 to 16384 slots (8192 when E > 64), E <= 128: one
//    thread block cluster, no global atomics, no grid-wide wait;
//  - `tiny` up to 8192 slots (4096 when E <= 16: its few shared counters
//    contend in every block; 16384 when E >= 1024, where onepass's per-block
//    E-wide passes cost more): one launch, no barrier between blocks;
//  - `onepass` beyond: one launch, each slot loaded once, ahead of tiny and
//    twopass from 4096 tokens x 8 at E = 256 and far ahead of twopass at
//    E = 16384, whose G x E table cap leaves it two blocks (record:
//    bench/results/align.jsonl tables "E=256 topk=8 uniform" and
//    "E=16384 topk=8 uniform", tokens 4096, variants onepass / tiny /
//    twopass);
//  - where onepass does not apply (more slots than a wave of blocks holds),
//    the stable rule: oneshot while preferred, twopass, persistent where
//    twopass does not apply (or first when E >= 4096);
// warpscan is the last resort (E <= 16384 always fits it). Thresholds: the
// device's row of align/policy.hpp.
const std::array<AutoRow<Problem>, 15> kAutoRows = {{
    {"stripe",
     "policy.stripe_min_slots <= numel <= policy.stripe_max_slots and E <= policy.stripe_max_experts and "
     "max_num_tokens_padded >= policy.stripe_min_rows",
     [](const Problem& p, const DeviceCaps& caps) {
       return stripe_preferred(policy_for(caps), p.numel, p.num_experts, p.max_num_tokens_padded);
     }},
    {"solo",
     "policy.solo_min_slots <= numel <= policy.solo_max_slots (when E <= 16: up to "
     "policy.solo_max_slots_few_experts and policy.solo_max_slots_per_expert * E) and "
     "max_num_tokens_padded <= policy.solo_max_rows and E <= policy.solo_max_experts",
     [](const Problem& p, const DeviceCaps& caps) {
       return solo_preferred(policy_for(caps), p.numel, p.num_experts, p.max_num_tokens_padded);
     }},
    {"micro", "numel <= policy.micro_max_slots",
     [](const Problem& p, const DeviceCaps& caps) { return p.numel <= policy_for(caps).micro_max_slots; }},
    {"micro",
     "numel <= policy.micro_wide_max_slots and E >= policy.micro_wide_min_experts and B >= policy.small_block",
     [](const Problem& p, const DeviceCaps& caps) {
       return micro_wide_preferred(policy_for(caps), p.numel, p.num_experts, p.block_size);
     }},
    {"relay",
     "numel <= policy.relay_max_slots and B < policy.small_block",
     [](const Problem& p, const DeviceCaps& caps) {
       return relay_preferred(policy_for(caps), p.numel, p.block_size);
     }},
    {"cluster",
     "policy.cluster_min_slots <= numel <= policy.cluster_max_slots (policy.cluster_max_slots_wide "
     "when E > policy.cluster_wide_experts)",
     [](const Problem& p, const DeviceCaps& caps) {
       return cluster_preferred(policy_for(caps), p.numel, p.num_experts);
     }},
    {"tiny",
     "numel <= policy.tiny_max_slots (policy.tiny_max_slots_few_experts when E <= 16, "
     "policy.tiny_max_slots_many_experts when E >= 1024)",
     [](const Problem& p, const DeviceCaps& caps) {
       return p.numel <= tiny_max_slots(policy_for(caps), p.num_experts);
     }},
    {"onepass", "", nullptr},
    {"oneshot", "numel <= policy.oneshot_max_slots or E >= policy.huge_experts",
     [](const Problem& p, const DeviceCaps& caps) {
       const Policy& pol = policy_for(caps);
       return oneshot_preferred(p, pol) || huge_experts(p, pol);
     }},
    {"persistent", "E >= policy.huge_experts",
     [](const Problem& p, const DeviceCaps& caps) { return huge_experts(p, policy_for(caps)); }},
    {"twopass", "", nullptr},
    {"persistent", "", nullptr},
    {"oneshot", "", nullptr},
    {"tiny", "", nullptr},
    {"warpscan", "", nullptr},
}};

// align's auto rows read no PDL (none is pdl_only; tests/align/cpu_auto_rule.cpp
// checks), so one pick, asked without it, answers for the workspace, the
// applicability and the launch alike.
const Variant& auto_pick(const Problem& p, const DeviceCaps& caps) { return registry().pick_auto(p, caps, false); }

const Variant& stable_pick(const Problem& p, const DeviceCaps& caps) {
  const char* name = stable_choice(p, caps);
  const Variant* v = registry().find(name);
  if (v == nullptr) throw std::logic_error(std::string("align stable: no variant ") + name);
  return *v;
}

}  // namespace

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

const Variant& pick_stable(const Problem& p, const DeviceCaps& caps) { return stable_pick(p, caps); }

}  // namespace moekit::align
