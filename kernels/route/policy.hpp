// The route `auto` threshold per architecture. Host-visible: no CUDA.
#pragma once

#include <array>
#include <cstdint>

#include "common/device.hpp"
#include "common/policy.hpp"

namespace moekit::route {

struct Policy {
  // Tokens per SM up to which a block per token (`block-rank`, or `block`
  // where warp-regs does not apply) beats a warp per token (fewer
  // instructions per token): latency-bound up to there.
  int rank_tokens_per_sm = 0;
  // Tokens up to which block-rank-align (route and align in one launch)
  // beats block-rank followed by an align launch; 0: never.
  int fused_max_tokens = 0;
};

// sm_90, from bench_route on the H100: block-rank beat warp-regs up to T = 256
// and lost from T = 1024 in every config with 64 <= E <= 512 and K >= 2; at
// E = 1024 `block` beat warp-smem up to T = 256 and lost from T = 1024 (so 2
// tokens per SM of 132); block-rank-align never beat block-rank followed by
// align. Record: bench/results/route.jsonl table "DeepSeek-V3 (E 256, K 8, G 8,
// KG 4, sigmoid + bias, renorm, S 2.5), PDL off" and table "Qwen3 (E 128, K 8,
// softmax, renorm), PDL off", tokens 256..1024, variants block-rank /
// warp-regs; table "E 1024, K 16, softmax, renorm, PDL off", variants block /
// warp-smem; table "DeepSeek-V3 (E 256, K 8, G 8, KG 4, sigmoid + bias, renorm,
// S 2.5), then align (B 64), PDL off", variants block-rank / block-rank-align.
inline constexpr Policy kPolicySm90 = {.rank_tokens_per_sm = 2, .fused_max_tokens = 0};
// One row, measured on sm_90 (H100/H200). sm_80 and older devices, and no
// device, take it too (policy_row_for: the oldest row) until a run there
// gives them a row of their own.
inline constexpr std::array<PolicyRow<Policy>, 1> kPolicyRows = {{
    {90, kPolicySm90},
}};

inline const Policy& policy_for(const DeviceCaps& caps) { return policy_row_for<Policy>(kPolicyRows, caps); }

// Tokens up to which a problem is latency-bound on `caps` (0 without a device).
inline std::int64_t rank_max_tokens(const DeviceCaps& caps) {
  return std::int64_t{policy_for(caps).rank_tokens_per_sm} * caps.sm_count;
}

}  // namespace moekit::route
