// moe_align_block_size: public interface of the align kernel family.
// Host-visible: no CUDA headers. Semantics: docs/align.md and issue #5.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/auto_rule.hpp"
#include "common/device.hpp"
#include "common/variant.hpp"

namespace moekit::align {

// No align variant takes more experts: each keeps at least one 4-byte counter
// per expert in one block's shared memory, and no GPU has 256 KiB of it. The
// CLI refuses larger E before allocating anything E-long.
inline constexpr std::int32_t kMaxExperts = 65536;
// An expert map (global experts) is read whole into host and device memory.
inline constexpr std::int64_t kMaxMapSize = std::int64_t(1) << 24;

struct Problem {
  std::int64_t numel = 0;           // token slots (all ids), fits int32 outputs
  std::int32_t num_experts = 0;     // E: experts that own rows (local count with a map)
  std::int32_t block_size = 0;      // B
  bool ids_int64 = false;           // dtype of topk_ids: int64 if true, else int32
  std::int32_t map_size = 0;        // length of expert_map (global experts); 0 = no map
  std::int64_t max_num_tokens_padded = 0;  // length of sorted_token_ids
  std::int64_t max_num_blocks = 0;         // length of expert_ids
};

// Device pointers. Ids outside [0, E) (after the map) and ids mapped to -1 are
// dropped by every variant; no variant writes outside these arrays.
struct Buffers {
  const void* topk_ids = nullptr;          // numel ids, int32 or int64
  const std::int32_t* expert_map = nullptr;  // map_size entries, or nullptr
  std::int32_t* sorted_token_ids = nullptr;  // max_num_tokens_padded
  std::int32_t* expert_ids = nullptr;        // max_num_blocks
  std::int32_t* num_tokens_post_pad = nullptr;  // 1
  void* workspace = nullptr;
};

using Variant = moekit::Variant<Problem, Buffers>;

std::span<const Variant> variants();            // registered product variants
const Variant* find(std::string_view name);     // nullptr if unknown (no fallback)
// The `auto` choice for p on the current device / on `caps`: from auto_rows().
const Variant& pick_auto(const Problem& p);
const Variant& pick_auto(const Problem& p, const DeviceCaps& caps);
std::span<const AutoRow<Problem>> auto_rows();  // the table itself (docs, tests)
std::string auto_rule();                        // generated from auto_rows()

}  // namespace moekit::align
