// Launch shapes and `auto` thresholds of the align family, per architecture.
// Host-visible: no CUDA headers. Values are per SM or per block; the device's
// SM count and shared memory (DeviceCaps) scale them at launch.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::align {

struct Policy {
  // --- auto (docs/align.md) ---
  // `stripe` first, from stripe_min_slots (below, micro's layout from ballots
  // alone is faster) to stripe_max_slots, for E up to stripe_max_experts
  // (its in-warp scan; the block scan beyond lost to micro and tiny), where
  // the padded rows are many (>= stripe_min_rows: solo's one SM writes fewer
  // faster than stripe's blocks lay out the slots).
  std::int64_t stripe_min_slots = 0;
  std::int64_t stripe_max_slots = 0;
  int stripe_max_experts = 0;
  std::int64_t stripe_min_rows = 0;
  // `solo` first, from solo_min_slots (below, micro's one-warp layout needs
  // no barrier at all) to solo_max_slots (E <= 16: up to
  // solo_max_slots_few_experts while no counter takes more than
  // solo_max_slots_per_expert atomics on average; a warp's slot stores then
  // meet few rows) where the padded rows stay few (one SM writes every row
  // and every slot), for E up to solo_max_experts (measured up to 512).
  std::int64_t solo_min_slots = 0;
  std::int64_t solo_max_slots = 0;
  std::int64_t solo_max_slots_few_experts = 0;
  std::int64_t solo_max_slots_per_expert = 0;
  int solo_max_experts = 0;
  std::int64_t solo_max_rows = 0;
  // `micro` up to micro_max_slots, then `relay` up to relay_max_slots where
  // B < small_block (where tiny's per-block walk over the experts meeting
  // its rows weighs most).
  std::int64_t micro_max_slots = 0;
  // ... and up to micro_wide_max_slots where E >= micro_wide_min_experts and
  // B >= small_block: its layout work grows with the slots squared but only
  // with log2(E), while relay's and tiny's passes over E grow with E.
  std::int64_t micro_wide_max_slots = 0;
  int micro_wide_min_experts = 0;
  int small_block = 0;
  std::int64_t relay_max_slots = 0;
  // `cluster` from cluster_min_slots (below, solo's one block and tiny) up to
  // cluster_max_slots, cluster_max_slots_wide for E > cluster_wide_experts
  // (every warp reads every block's E counts).
  std::int64_t cluster_min_slots = 0;
  std::int64_t cluster_max_slots = 0;
  std::int64_t cluster_max_slots_wide = 0;
  int cluster_wide_experts = 0;
  // `tiny` up to this many slots (its few shared counters contend in every
  // block when E <= 16; onepass's per-block E-wide passes cost more when
  // E >= 1024), then onepass.
  std::int64_t tiny_max_slots_few_experts = 0;   // E <= 16
  std::int64_t tiny_max_slots = 0;
  std::int64_t tiny_max_slots_many_experts = 0;  // E >= 1024
  // The stable rule: stripe from stable_stripe_min_slots (from
  // stable_stripe_min_slots_block_scan where stripe takes its block scan,
  // E > 128: slower than its in-warp scan) to
  // stable_stripe_max_slots for E up to stable_stripe_max_experts, else micro;
  // then oneshot while every block can afford to re-read all slots, and from
  // huge_experts on (twopass's G x E table cap starves it).
  std::int64_t stable_stripe_min_slots = 0;
  std::int64_t stable_stripe_min_slots_block_scan = 0;
  std::int64_t stable_stripe_max_slots = 0;
  int stable_stripe_max_experts = 0;
  std::int64_t oneshot_max_slots = 0;
  int huge_experts = 0;
  // --- tiny: rows of sorted_token_ids per block, blocks per SM, block size
  // steps by numel, and (up to 1024 threads) at least one thread per this
  // many rows of a chunk and per this many experts (every block zeroes,
  // scans and walks all E).
  int tiny_rows_per_block = 0;
  int tiny_blocks_per_sm = 0;
  std::int64_t tiny_256_threads_max_slots = 0;
  std::int64_t tiny_512_threads_max_slots = 0;
  int tiny_rows_per_thread = 0;
  int tiny_experts_per_thread = 0;
  // --- micro: rows per block, and blocks per SM before chunks grow.
  int micro_rows_per_block = 0;
  int micro_blocks_per_sm = 0;
  // --- relay: threads of every block at least (more for more slots), and
  // rows of sorted_token_ids per thread of a fill block.
  int relay_min_threads = 0;
  int relay_rows_per_thread = 0;
  // --- solo: threads at least (more for more slots or experts; 256 or
  // more: launch_solo's smallest block).
  int solo_min_threads = 0;
  // --- PDL trigger of micro and solo: after the layout (not right after
  // pdl_wait) up to this many slots (align/common.cuh pdl_late_trigger).
  std::int64_t micro_late_trigger_max_slots = 0;
  std::int64_t solo_late_trigger_max_slots = 0;
  // --- stripe: threads at least (256 or more: launch_stripe's smallest
  // block); rows per block (one stripe per SM at most).
  int stripe_min_threads = 0;
  int stripe_rows_per_block = 0;
  // --- cluster: threads per block at least (more when 8 blocks of them
  // cannot hold the slots).
  int cluster_min_threads = 0;
  // --- onepass: blocks per SM (one: residency certain without an occupancy
  // query) and padding rows per thread before the grid grows.
  int onepass_blocks_per_sm = 0;
  int onepass_pad_rows_per_thread = 0;
  // --- twopass: grid cap (E <= 64, else).
  int twopass_max_grid_few_experts = 0;
  int twopass_max_grid = 0;
};

// sm_90, measured on the H100 and H200. Each group of fields, what decided it
// and the record it was fitted on (the cells: the variants named, one process
// per shape, PDL off and on unless said):
// - micro_max_slots, relay_max_slots: micro (no barrier) up to 128 slots, relay
//   past it where B is small; record: docs/bench/align-notes.md
//   "micro up to 128 slots, relay", micro / relay / tiny against SGLang.
// - micro_wide_*, small_block: at 129-256 slots tiny leads for E = 64-1024,
//   micro from E = 2048, relay at B = 16 (B = 32 a tie); record:
//   docs/bench/align-notes.md "auto at 129-256 slots".
// - tiny_*_threads_max_slots, tiny_rows_per_block, tiny_experts_per_thread,
//   tiny_rows_per_thread, tiny_blocks_per_sm: 512 threads beat 256 at 512
//   slots, one thread per expert, ~256 rows per block; record:
//   docs/bench/align-notes.md "tiny re-fit" (probe_align sweep), after
//   docs/bench/align-notes.md "tiny launch shapes".
// - tiny_max_slots*: where onepass overtakes tiny: past 4096 slots for E = 8,
//   8192 for E = 256, 16384 for E = 4096; record: bench/results/align.jsonl
//   table "E=8 topk=2 uniform", tokens 2048..4096, and tables
//   "E=256 topk=8 uniform" (tokens 1024..2048) and "E=4096 topk=8 uniform"
//   (tokens 2048..4096), variants tiny / onepass.
// - solo_*, solo_min_threads: one SM wins while the padded rows stay few
//   (up to ~8,700 rows level, 16,384 not) and from 33 slots (micro below);
//   E > 512 and E < 8 past 512 slots not measured; record:
//   docs/bench/align-notes.md "solo (2026-11-26", "solo: in-warp scan" and
//   "solo up to 8192 slots".
// - *_late_trigger_max_slots: micro up to 128 slots and solo up to 135 faster
//   with the trigger after the layout, micro at 256 and solo at 384 and 2048
//   slower (solo at 512 slots of E = 8 faster but left early); record:
//   docs/bench/align-notes.md "PDL trigger (2026-11-26", both placements in
//   one call, PDL on.
// - stable_stripe_*, oneshot_max_slots, huge_experts: stripe where stable took
//   micro or oneshot at 128-1024 slots of E = 8-512, micro kept at 128 slots
//   of E = 256 (stripe's block scan) and at E = 4096; record:
//   docs/bench/align-notes.md "stable (2026-11-26". oneshot_max_slots: fitted
//   on 4359230 (record not kept; bench/results/align.jsonl table
//   "E=256 topk=8 uniform" has oneshot still ahead of twopass at 2048 tokens
//   x 8, past the cap). huge_experts: fitted on b29ea1d (record not kept).
// - cluster_*, cluster_min_threads, solo_max_slots_few_experts: cluster beat
//   every other variant from 4096 to 16384 slots for E = 8-48, to 12288 for
//   E = 64 and to 8192 for E = 96-128, not at 2048 nor 32768 slots (switch at
//   the midpoint of 2048 and 4096); record: docs/bench/align-notes.md
//   "cluster, lean" (B = 128, uniform ids, int64 ids at E = 8).
// - stripe_*: stripe ahead of solo / micro / tiny at 16-64 tokens x 8 of
//   E = 64-128 (8,256+ rows), not at 1,024 slots, at E = 256-512 (block
//   scan), at 4,416 rows or 32 slots; record: docs/bench/align-notes.md
//   "stripe (2026-11-26" (probe_align stripe, same-call table against
//   SGLang).
// - micro_rows_per_block, micro_blocks_per_sm: fitted on 4359230 (record not
//   kept). relay_min_threads, relay_rows_per_thread: record:
//   docs/bench/align-notes.md "micro up to 128 slots, relay" (probe_align
//   relay).
// - onepass_*: record: docs/bench/align-notes.md "onepass launch shapes";
//   twopass_max_grid*: record: docs/bench/align-notes.md "twopass launch
//   shapes".
inline constexpr Policy kPolicySm90 = {
    .stripe_min_slots = 128,
    .stripe_max_slots = 512,
    .stripe_max_experts = 128,
    .stripe_min_rows = 8192,
    .solo_min_slots = 33,
    .solo_max_slots = 512,
    .solo_max_slots_few_experts = 3072,
    .solo_max_slots_per_expert = 512,
    .solo_max_experts = 512,
    .solo_max_rows = 8704,
    .micro_max_slots = 128,
    .micro_wide_max_slots = 256,
    .micro_wide_min_experts = 2048,
    .small_block = 64,
    .relay_max_slots = 256,
    .cluster_min_slots = 3073,
    .cluster_max_slots = 16384,
    .cluster_max_slots_wide = 8192,
    .cluster_wide_experts = 64,
    .tiny_max_slots_few_experts = 4096,
    .tiny_max_slots = 8192,
    .tiny_max_slots_many_experts = 16384,
    .stable_stripe_min_slots = 128,
    .stable_stripe_min_slots_block_scan = 129,
    .stable_stripe_max_slots = 1024,
    .stable_stripe_max_experts = 512,
    .oneshot_max_slots = 8192,
    .huge_experts = 4096,
    .tiny_rows_per_block = 256,
    .tiny_blocks_per_sm = 1,
    .tiny_256_threads_max_slots = 256,
    .tiny_512_threads_max_slots = 4096,
    .tiny_rows_per_thread = 16,
    .tiny_experts_per_thread = 1,
    .micro_rows_per_block = 1024,
    .micro_blocks_per_sm = 2,
    .relay_min_threads = 256,
    .relay_rows_per_thread = 4,
    .solo_min_threads = 256,
    .micro_late_trigger_max_slots = 128,
    .solo_late_trigger_max_slots = 256,
    .stripe_min_threads = 256,
    .stripe_rows_per_block = 2048,
    .cluster_min_threads = 256,
    .onepass_blocks_per_sm = 1,
    .onepass_pad_rows_per_thread = 8,
    .twopass_max_grid_few_experts = 128,
    .twopass_max_grid = 64,
};

static_assert(kPolicySm90.tiny_experts_per_thread > 0 && kPolicySm90.tiny_rows_per_thread > 0);
// cluster_plan's blocks: powers of two from 32 threads up to 1024.
static_assert(kPolicySm90.cluster_min_threads >= 32 && kPolicySm90.cluster_min_threads <= 1024 &&
              (kPolicySm90.cluster_min_threads & (kPolicySm90.cluster_min_threads - 1)) == 0);
// launch_solo's blocks: powers of two from 256.
static_assert(kPolicySm90.solo_min_threads >= 256 && (kPolicySm90.solo_min_threads & (kPolicySm90.solo_min_threads - 1)) == 0);

// One row, measured on sm_90 (H100/H200). sm_80 and older devices, and no
// device, take it too (policy_row_for: the oldest row) until a run there
// gives them a row of their own.
inline constexpr std::array<PolicyRow<Policy>, 1> kPolicyRows = {{
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) {
  return policy_row_for<Policy>(kPolicyRows, caps);
}

// Whether `auto` picks cluster (after solo, micro and relay; where the
// variant applies: E <= 128).
inline bool cluster_preferred(const Policy& pol, std::int64_t numel, int num_experts) {
  const std::int64_t most = num_experts > pol.cluster_wide_experts ? pol.cluster_max_slots_wide : pol.cluster_max_slots;
  return numel >= pol.cluster_min_slots && numel <= most;
}

// Whether `auto` picks stripe (first).
inline bool stripe_preferred(const Policy& pol, std::int64_t numel, int num_experts, std::int64_t rows) {
  return numel >= pol.stripe_min_slots && numel <= pol.stripe_max_slots && num_experts <= pol.stripe_max_experts &&
         rows >= pol.stripe_min_rows;
}

// Whether `auto` picks solo (after stripe).
inline bool solo_preferred(const Policy& pol, std::int64_t numel, int num_experts, std::int64_t rows) {
  const std::int64_t most =
      num_experts <= 16 ? std::max(pol.solo_max_slots, std::min(pol.solo_max_slots_few_experts,
                                                                pol.solo_max_slots_per_expert * num_experts))
                        : pol.solo_max_slots;
  return numel >= pol.solo_min_slots && numel <= most && rows <= pol.solo_max_rows &&
         num_experts <= pol.solo_max_experts;
}

// Whether `stable` picks stripe (where it applies); block_scan: stripe scans
// E with its block scan (warp_scan_per_lane(E) == 0).
inline bool stable_stripe_preferred(const Policy& pol, std::int64_t numel, int num_experts, bool block_scan) {
  const std::int64_t lo = block_scan ? pol.stable_stripe_min_slots_block_scan : pol.stable_stripe_min_slots;
  return numel >= lo && numel <= pol.stable_stripe_max_slots && num_experts <= pol.stable_stripe_max_experts;
}

// Whether `auto` picks micro past micro_max_slots.
inline bool micro_wide_preferred(const Policy& pol, std::int64_t numel, int num_experts, int block_size) {
  return numel <= pol.micro_wide_max_slots && num_experts >= pol.micro_wide_min_experts &&
         block_size >= pol.small_block;
}

// Whether `auto` picks relay (after micro).
inline bool relay_preferred(const Policy& pol, std::int64_t numel, int block_size) {
  return numel <= pol.relay_max_slots && block_size < pol.small_block;
}

// Slots up to which `auto` picks tiny for E experts.
inline std::int64_t tiny_max_slots(const Policy& pol, int num_experts) {
  return num_experts <= 16 ? pol.tiny_max_slots_few_experts
         : num_experts >= 1024 ? pol.tiny_max_slots_many_experts
                               : pol.tiny_max_slots;
}

}  // namespace moekit::align
