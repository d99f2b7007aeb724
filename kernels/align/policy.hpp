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

// sm_90: measured on the H100 (bench_align; probe_align sweep / onepass /
// twopass / micro / relay; micro, relay and tiny against SGLang on the same
// ids: docs/bench/align-notes.md "micro for up to 128 slots, relay").
// micro_wide_*, relay: H200, 2026-11-26, align-notes.md "auto at 129-256
// slots" (after tiny's re-fit, one process per shape, PDL off and on; B = 128:
// tiny fastest for E = 64-1024, E = 1024 at 32 tokens x 8 2.86 us against
// micro 2.96 and relay 3.27; micro from E = 2048: 3.07 against tiny 3.61;
// B = 16, top-1: relay 2.21-2.29 against tiny 2.40-2.70; B = 32: a tie).
// tiny_*: H200, 2026-11-26, align-notes.md "tiny re-fit" (probe_align sweep:
// 512 threads beat 256 at 512 slots for every E; one thread per expert,
// E = 512 at 64 tokens x 8: 3.43 -> 2.73 us, E = 1024: 4.16 -> 3.01; ~256
// rows per block 0.1-0.3 us faster than 1024 at 16-64 tokens).
// solo_*: H200, 2026-11-26, align-notes.md "solo" (one process per shape,
// PDL off and on, SGLang on the same ids; with the in-warp scan): Llama-4
// decode (128 top-1 slots, B = 16, 2,048 rows) 1.49 us against micro 2.19;
// DeepSeek-V2-Lite 64 tokens (384 slots, 4,416 rows) 1.82 against tiny 2.25;
// 256 x 2, E = 8 1.53 against 2.28; 8,256-8,640 rows still level (16 x 8,
// E = 64: 1.82 against micro 1.87; 64 x 8: 2.32 against tiny 2.36), 16,384
// rows not (2.54 against 1.86); 32 slots 1.44 against micro 1.31; 1,024
// top-1 slots of E = 128 2.73 against tiny 2.63, but 2,048 slots of E = 8
// 2.28 against 2.91 and 4,096 3.68 against 4.21 (E = 16: 4.24 against 4.22;
// 8,192 slots of E = 8: 6.35 against onepass 4.64: 1,024 atomics per
// counter). E > 512 and E < 8 at more than 512 slots are not measured.
// *_late_trigger_max_slots: H100, 2026-11-26, align-notes.md "PDL trigger"
// (both placements in one call, PDL on): every micro shape up to 128 slots
// and solo up to 135 slots faster late (0.04-0.17 us), micro at 256 and solo
// at 384 and 2048 slots slower (0.07-0.26); solo at 512 slots of E = 8 was
// faster late (1.35 -> 1.25) but is left early with the 384-slot case.
// stable_stripe_*: H200, 2026-11-26, align-notes.md "stable" (micro, stripe,
// oneshot in one process per shape, PDL off / on): stripe 1.73-4.21 us at
// 128-1024 slots of E = 8-512 where stable took micro (1.77-3.24) or oneshot
// (4.79-6.74); micro still faster at 128 slots of E = 256 (1.88 against
// 2.06: stripe's block scan) and at E = 4096 (3.03 against 4.76).
// cluster_*, solo_max_slots_few_experts: H100, 2026-11-26 (fifteenth session),
// align-notes.md "cluster, lean" (one process per shape, PDL off / on,
// B = 128, uniform ids unless said; the kernel with the in-warp scan): cluster
// beat the best other variant from 4096 to 16384 slots for E = 8-48 (E = 8
// at 4096 slots 2.82 / 2.47 us against solo 3.31 / 2.97; E = 16 at 4096
// 2.83 / 2.46 against tiny 3.80 / 3.47; E = 32 at 16384 4.24 / 3.84 against
// onepass 5.07 / 4.65; E = 48 at 16384 4.88 / 4.50 against 5.14 / 4.79;
// int64 ids E = 8 at 16384 3.99 / 3.55 against 4.64 / 4.34), E = 64 up to
// 12288 (4.75 / 4.34 against onepass 4.94 / 4.62; 16384: 5.19 / 4.78
// against 5.13 / 4.74) and E = 96-128 up to 8192 (E = 128 4.15 / 3.77
// against tiny 4.46 / 4.12; 12288: 5.51 against onepass 4.99). Not at 2048
// slots (E = 8: solo 2.18 against 2.79; E = 32: tiny 2.98 against 3.10;
// E = 64: tiny 3.01 against 3.48) nor at 32768 (E = 8: 5.11 against onepass
// 5.00; E = 16: 5.63 against 5.12): the switch from solo / tiny at the
// midpoint of 2048 and 4096; DeepSeek-V2-Lite's first 1024 tokens (6144
// slots, E = 64, B = 64): 3.63 / 3.25 against tiny 4.06 / 3.75.
// stripe_*: H200, 2026-11-26, align-notes.md "stripe" (probe_align stripe and
// the same-call table against SGLang, PDL off / on): 16 x 8, E = 64 (8,256
// rows) 1.80 / 1.38 us against solo 1.85 / 1.54; 64 x 8, E = 64 2.16 / 1.78
// against solo 2.35 / 2.05; 16 x 8, E = 128 1.84 / 1.44 against micro 1.93 /
// 1.66; 64 x 8, E = 128 2.32 / 1.92 against tiny 2.40 / 2.09; but 128 x 8
// (1,024 slots) 3.23 against tiny 2.58, E = 256-512 (block scan) level with or
// behind micro / tiny, 4,416 rows (E = 64, B = 64, 384 slots) 2.07 against
// solo 1.84, 32 slots 1.80 against micro 1.36.
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
