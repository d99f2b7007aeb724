// Expert-parallel dispatch and combine across the GPUs of one host (the ep
// family): each token's row goes once to every rank that owns one of its
// experts, arrives there in permute's compact layout of that rank's experts,
// and the expert outputs come back to be combined on the token's rank with
// combine's rule. Host-visible: no CUDA headers. Semantics: docs/ep.md.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "combine/combine.hpp"
#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"
#include "experts/experts.hpp"
#include "permute/permute.hpp"

namespace moekit::ep {

// The GPUs of one host that one process drives (an HGX board has 8).
inline constexpr int kMaxRanks = 8;
// Most slots a token may have: the plan counts a token's slots to each rank
// in one byte of a 64-bit word (plan.cuh).
inline constexpr int kMaxTopk = 255;

struct Problem {
  std::int32_t ranks = 1;    // R
  std::int64_t tokens = 0;   // T per rank
  std::int32_t topk = 0;     // K ids per token (-1 or ids outside [0, E): a dropped slot)
  std::int32_t experts = 0;  // E, global
  std::int64_t hidden = 0;   // H
  combine::DType dtype = combine::DType::bf16;
  float scaling = 1.0f;      // S, applied once by the combine on the token's rank
  // placement[e]: the rank that owns global expert e. A rank's local experts
  // are the ones it owns, in ascending global order (local id = that index).
  std::vector<std::int32_t> placement;
  std::array<std::int32_t, kMaxRanks> local{};  // experts each rank owns

  std::int64_t row_bytes() const { return hidden * (dtype == combine::DType::f32 ? 4 : 2); }
  // A rank receives at most every token of every rank once: R * T rows.
  std::int64_t recv_capacity() const { return std::int64_t(ranks) * tokens; }
  // Expert outputs per peer come back into fixed strides of T * K rows (the
  // most one rank's tokens can have on another), so a slot's place is known
  // before the counts are: R * T * K rows per rank.
  std::int64_t slot_capacity() const { return std::int64_t(ranks) * tokens * topk; }
  // Rank r's receive side: permute's compact layout of its local experts over
  // recv_capacity() received rows (rows past those received carry only -1
  // ids, so every launch plans the same problem), ids through the rank's
  // expert map (expert_map()), every id outside it dropped. Planned once by
  // make_problem (layouts).
  const permute::Problem& layout(int rank) const { return layouts[std::size_t(rank)]; }
  std::array<permute::Problem, kMaxRanks> layouts{};
  // The combine on the token's rank: T tokens of K slots over the
  // slot_capacity() returned rows.
  combine::Problem combine() const;
  // p2p-reduce's combine on the token's rank: T tokens of R partials (weight
  // 1, rank ascending, dropped where the token sent nothing) over R * T rows.
  combine::Problem combine_partials() const;

  // The experts between dispatch and combine: identity (the back kernels
  // read the received rows) or, with `ffn`, the expert FFN of the experts
  // family on each rank's received rows: rank r's experts::Problem over the
  // same layout(r), its local experts, writing y in permuted's row order,
  // which the back kernels read instead. Planned by make_problem.
  bool ffn = false;
  const experts::Problem& ffn_problem(int rank) const { return ffns[std::size_t(rank)]; }
  std::array<experts::Problem, kMaxRanks> ffns{};
};

// The Problem of R ranks of T tokens with K of E experts each, rows of H
// elements of `dtype`; `placement` empty: contiguous, E / R experts a rank
// (R must divide E). Throws ProblemError (R outside [1, kMaxRanks], a
// placement of the wrong length or naming a rank outside [0, R), sizes past
// the layout's int32 limits; with `ffn`, experts::make_problem's and f32
// rows). `ffn`: the expert FFN between the phases (bf16 or f16 rows). Host
// only (problem.cpp).
Problem make_problem(std::int32_t ranks, std::int64_t tokens, std::int32_t topk, std::int32_t experts,
                     std::int64_t hidden, combine::DType dtype, float scaling,
                     std::vector<std::int32_t> placement = {}, const experts::FfnArgs* ffn = nullptr);

// Rank r's expert map over the E global experts: local id, or -1 where
// another rank owns the expert (align's local map semantics).
std::vector<std::int32_t> expert_map(const Problem& p, int rank);
// Rank r's local experts' global ids, local id order (the inverse of its map).
std::vector<std::int32_t> local_experts(const Problem& p, int rank);

class Comm;  // the ranks' NCCL communicators and streams (comm.hpp)

// One rank's device pointers, all on that rank's GPU.
struct RankBuffers {
  const void* hidden = nullptr;              // [T, H]
  const std::int32_t* topk_ids = nullptr;    // [T, K]
  const float* weights = nullptr;            // [T, K]
  const std::int32_t* placement = nullptr;   // [E] owning rank per expert
  const std::int32_t* expert_map = nullptr;  // [E] this rank's (expert_map())
  void* permuted = nullptr;                  // [layout(r).align.max_num_tokens_padded, H] received rows, compact
  std::int64_t* expert_offsets = nullptr;    // [local + 1]
  // p.ffn only: the rank's local experts' weights (local id order) and the
  // FFN's output rows.
  const void* w1 = nullptr;                  // [local, 2I, H]
  const void* w2 = nullptr;                  // [local, H, I]
  void* y = nullptr;                         // [layout(r).align.max_num_tokens_padded, H] permuted's row order
  void* out = nullptr;                       // [T, H]
  void* workspace = nullptr;                 // workspace_bytes of the variant
};

struct Buffers {
  std::array<RankBuffers, kMaxRanks> rank{};
  Comm* comm = nullptr;  // created for p.ranks GPUs, devices 0 .. R-1
};

using Variant = moekit::Variant<Problem, Buffers>;
using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)

// The phases of a launch, each launchable alone once a launch has run
// (per-phase timing): dispatch (rows to their experts' ranks, laid out
// there), experts (p.ffn: each rank's FFN on its received rows; identity
// experts launch nothing) and combine (expert outputs back, combined on the
// token's rank).
enum class Stage { dispatch, experts, combine };
// Whether v's launches go through NCCL (a Comm for it needs communicators).
bool needs_nccl(const Variant& v);
// A launch as a process per GPU issues it: each rank's whole launch on its
// Comm stream (Comm::stream(r)), with no dependency between the streams, so
// each stream may be captured into a graph of its own and replayed alone.
// The ranks agree only through device-side counters: the variant's two
// barriers, which also keep a rank's next launch from writing into a peer
// that still reads its previous one. For variants whose
// barriers are on the device (launches_per_rank: p2p-signal,
// p2p-reduce-signal); any other returns cudaErrorNotSupported. The caller
// orders its own work after it through the Comm's streams, and joins them
// before a launch of another kind on the same Comm (whose fork orders only
// the launch's own stream). Every rank's
// stream must run its part concurrently with the others' (a tool that
// serializes the GPUs' work would wait for ever, and the wait traps).
bool launches_per_rank(const Variant& v);
LaunchStatus launch_per_rank(const Variant& v, const Problem& p, const Buffers& b, bool pdl);

// What comes back to a token's rank: every kept slot's row, combined there
// with combine's rule (out bit for bit that rule), or one partial sum per
// (token, rank), each rounded to the row dtype and added rank by rank
// (p2p-reduce; docs/ep.md bounds its distance to combine's rule).
enum class Return { slots, partials };
Return returns(const Variant& v);
LaunchStatus launch_stage(const Variant& v, const Problem& p, const Buffers& b, Stage s, Stream stream, bool pdl);

// Bytes a rank sends for the rows and slots counted on the host (the
// payload behind every GB/s figure): dispatch sends each (token,
// destination) row once, combine returns one row per kept slot.
struct Traffic {
  std::int64_t dispatch_rows = 0;  // (token, destination) rows sent, all ranks (a rank's own included)
  std::int64_t combine_rows = 0;   // kept slots' rows returned, all ranks (a rank's own included)
  std::int64_t dispatch_remote = 0;  // of those, the rows that leave their rank's GPU
  std::int64_t combine_remote = 0;   // the slot rows that come back from another GPU
};
Traffic traffic(const Problem& p, const std::vector<std::vector<std::int32_t>>& ids);

// The permute variant that lays out rank r's received rows on `caps`:
// permute's auto pick, with R > 1 without `fused` past the ep policy's slot
// count (kernels/ep/policy.hpp).
const permute::Variant& layout_variant(const Problem& p, int rank, const DeviceCaps& caps);

// p.ffn: the experts variant rank r's FFN stage runs (experts::pick_on_layout
// on `caps`; its workspace is a part of the rank's).
const experts::Variant& ffn_variant(const Problem& p, int rank, const DeviceCaps& caps);

}  // namespace moekit::ep
