// moe_align_block_size: public interface of the align kernel family.
// Host-visible: no CUDA headers. Semantics: docs/align.md and issue #5.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/device.hpp"
#include "common/registry.hpp"
#include "common/variant.hpp"

namespace moekit::align {

// No align variant takes more experts: each keeps at least one 4-byte counter
// per expert in one block's shared memory, and no GPU has 256 KiB of it. The
// CLI refuses larger E before allocating anything E-long.
inline constexpr std::int32_t kMaxExperts = 65536;
// An expert map (global experts) is read whole into host and device memory.
inline constexpr std::int64_t kMaxMapSize = std::int64_t(1) << 24;

// What becomes of an invalid slot (docs/align.md, "Invalid ids and expert
// parallelism"): its id is -1 or outside [0, E) (without a map, or with
// MapSemantics::vllm), or outside the map, or (MapSemantics::local) mapped to
// a local expert outside [0, E), -1 included.
enum class Invalid : std::uint8_t {
  reject,  // the CLI refuses ids outside [0, E) / the map (exit 2); slots mapped to -1 are dropped
  drop,    // the slot gets no row
  bucket,  // SGLang's expert parallelism: one more group after the E experts, padded to B like
           // them, its blocks' expert_ids -1
};
// How an expert map is read.
enum class MapSemantics : std::uint8_t {
  local,  // ids go through the map to local experts 0..E-1 before alignment; E = the local count
  vllm,   // E = the global count = the map's length; align per global expert, then
          // expert_ids[j] = map[expert_ids[j]] (blocks of non-local experts get -1)
};

// The names typed after --invalid / --map-semantics, in enum order (the only
// spelling: CLI, reports, tests).
inline constexpr std::array<std::string_view, 3> kInvalidNames = {"reject", "drop", "bucket"};
inline constexpr std::array<std::string_view, 2> kMapSemanticsNames = {"local", "vllm"};
inline std::string_view name_of(Invalid v) { return kInvalidNames[static_cast<std::size_t>(v)]; }
inline std::string_view name_of(MapSemantics v) { return kMapSemanticsNames[static_cast<std::size_t>(v)]; }
inline std::optional<Invalid> parse_invalid(std::string_view s) {
  for (std::size_t i = 0; i < kInvalidNames.size(); ++i)
    if (kInvalidNames[i] == s) return static_cast<Invalid>(i);
  return std::nullopt;
}
inline std::optional<MapSemantics> parse_map_semantics(std::string_view s) {
  for (std::size_t i = 0; i < kMapSemanticsNames.size(); ++i)
    if (kMapSemanticsNames[i] == s) return static_cast<MapSemantics>(i);
  return std::nullopt;
}

struct Problem {
  std::int64_t numel = 0;           // token slots (all ids), fits int32 outputs
  std::int32_t num_experts = 0;     // E: experts that own rows (local count with a local map,
                                    // global count with a vllm map)
  std::int32_t block_size = 0;      // B
  bool ids_int64 = false;           // dtype of topk_ids: int64 if true, else int32
  std::int32_t map_size = 0;        // length of expert_map (global experts); 0 = no map
  std::int64_t max_num_tokens_padded = 0;  // length of sorted_token_ids
  std::int64_t max_num_blocks = 0;         // length of expert_ids
  Invalid invalid = Invalid::reject;       // kernels treat reject as drop
  MapSemantics map_semantics = MapSemantics::local;
};

// Device pointers. Without launch_ep, ids outside [0, E) (after the map) and
// ids mapped to -1 are dropped by every variant; no variant writes outside
// these arrays.
struct Buffers {
  const void* topk_ids = nullptr;          // numel ids, int32 or int64
  const std::int32_t* expert_map = nullptr;  // map_size entries, or nullptr
  std::int32_t* sorted_token_ids = nullptr;  // max_num_tokens_padded
  std::int32_t* expert_ids = nullptr;        // max_num_blocks
  std::int32_t* num_tokens_post_pad = nullptr;  // 1
  void* workspace = nullptr;
};

// The Problem of `numel` ids over E experts with block size B: fills the
// derived sizes (the padded length counts the bucket as one more expert).
// Throws ProblemError (common/problem_error.hpp) when an argument is out of
// range (E < 1, B < 1 or B > 1024, E + the bucket > kMaxExperts, a vllm map
// whose length is not E, ...) or an output would not fit int32. Host only
// (problem.cpp).
Problem make_problem(std::int64_t numel, std::int32_t num_experts, std::int32_t block_size, bool ids_int64,
                     std::int32_t map_size, bool pad_sorted_ids, Invalid invalid = Invalid::reject,
                     MapSemantics map_semantics = MapSemantics::local);

using Variant = moekit::Variant<Problem, Buffers>;

using Registry = moekit::Registry<Problem, Buffers>;
const Registry& registry();  // variants, find, auto rows and rule (registry.cu)
// The variant `stable` runs for p on `caps`.
const Variant& pick_stable(const Problem& p, const DeviceCaps& caps);

// ---- expert parallelism: --invalid bucket and --map-semantics vllm ----------
// Composed around any variant, which itself only ever drops invalid slots:
//  - bucket: a pre-pass writes each slot's group (its local expert, or E for
//    the bucket) as int32 into the workspace; the variant runs on those with
//    E + 1 experts and no map; a post-pass rewrites expert_ids == E to -1;
//  - vllm (with a map): the variant runs with the E global experts and no
//    map; a post-pass sets expert_ids[j] = map[expert_ids[j]].
// Both together: both passes. Otherwise the variant runs on p unchanged.

// Groups that own rows: the E experts, and the bucket.
inline std::int32_t row_groups(const Problem& p) {
  return p.num_experts + (p.invalid == Invalid::bucket ? 1 : 0);
}
inline bool vllm_map(const Problem& p) { return p.map_semantics == MapSemantics::vllm && p.map_size > 0; }
// Whether launch_ep runs passes around the variant.
inline bool has_ep_passes(const Problem& p) { return p.invalid == Invalid::bucket || vllm_map(p); }
// The problem the variant itself runs (p when there are no passes): pick,
// applicability and the variant's workspace are the variant's on this one.
inline Problem variant_problem(const Problem& p) {
  if (!has_ep_passes(p)) return p;
  Problem v = p;
  v.num_experts = row_groups(p);
  v.map_size = 0;
  if (p.invalid == Invalid::bucket) v.ids_int64 = false;  // the pre-pass's int32 groups
  v.invalid = Invalid::drop;
  v.map_semantics = MapSemantics::local;
  return v;
}

// The variant's answers for p, through variant_problem(p).
const char* ep_not_applicable(const Variant& v, const Problem& p, const DeviceCaps& caps);
// Workspace of launch_ep: the variant's own first (v.workspace_bytes of the
// variant problem: ep_variant_workspace_bytes), then, with the bucket, the
// pre-pass's numel int32 groups at a 256-byte boundary.
std::size_t ep_workspace_bytes(const Variant& v, const Problem& p, const DeviceCaps& caps);
std::size_t ep_variant_workspace_bytes(const Variant& v, const Problem& p, const DeviceCaps& caps);
// True when the variant keeps its own part zero: the caller zeroes the whole
// workspace once; every launch leaves the first ep_variant_workspace_bytes
// zero (the pre-pass's part is scratch, rewritten by every launch).
bool ep_zeroed_workspace(const Variant& v, const Problem& p, const DeviceCaps& caps);
// One launch of v on p with the passes above, every kernel with PDL when
// `pdl` (as Variant::launch); the first CUDA error of its launches (0: all
// were issued). Capturable like a variant's launch.
LaunchStatus launch_ep(const Variant& v, const Problem& p, const Buffers& b, Stream stream, bool pdl);

}  // namespace moekit::align
