// The `grouped` variant's FFN: moekit's sm_90a grouped GEMM (CUTLASS 3.x
// ptr-array kernel on TMA + WGMMA, problem shapes on the device) over the
// compact layout. Host-visible and CUTLASS-free, so registry.cu calls it
// without including CUTLASS; grouped_sm90.cu implements it where the build
// has CUTLASS and sm_90 in gpu_arch, grouped_absent.cpp says why not elsewhere.
//
// One FFN launch, all on the stream, no host sync (graph-capturable):
//   1. group_args_kernel (grouped_args.cuh): from expert_offsets [E + 1] on
//      the device, every expert's problem shape, pointers and strides for
//      both GEMMs (experts with no rows: 0-row groups, no tiles);
//   2. gemm1: h[rows_e, 2I] = permuted[rows_e, H] . W1[e]^T  (f32 accumulate,
//      one rounding to the dtype; 64 x 256 ping-pong tiles, or 128 x 256
//      cooperative tiles in clusters of two where experts average 1024 rows
//      or more);
//   3. act_rows_kernel (act_rows.cuh): a[r, i] = act(gate) * up from the
//      rounded h (either W1 layout, every activation);
//   4. gemm2: y[rows_e, H] = a[rows_e, I] . W2[e]^T.
// h, a, the group arrays and CUTLASS's own workspace (per-SM TMA descriptors)
// are slices of the FFN workspace: nothing is allocated per launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/device.hpp"
#include "common/variant.hpp"
#include "experts/experts.hpp"

namespace moekit::experts::grouped {

// nullptr when this binary has the variant's kernels, else why not (built
// without CUTLASS, or without sm_90 among the build's GPU targets).
const char* not_built();

// The variant's `kernels` spec (VariantInfo): the stages' and, where built,
// its own (the prep kernel, act_rows_kernel, CUTLASS's device_kernel), by
// unqualified name (a token with ':' is a family:variant reference). A
// constant, so the registry's table stays constant-initialized: the build
// defines MOEKIT_GROUPED_SM90 for the family's library where it links
// grouped_sm90.cu (kernels/experts/meson.build).
#if defined(MOEKIT_GROUPED_SM90)
inline constexpr std::string_view kKernelSpec =
    "permute:* group_args_kernel act_rows_kernel device_kernel<KernelPtrArrayTmaWarpSpecializedPingpong> "
    "device_kernel<KernelPtrArrayTmaWarpSpecializedCooperative> "
    "combine:*";
#else
inline constexpr std::string_view kKernelSpec = "permute:* combine:*";  // the stages only
#endif

// Which of the two tile configurations a launch takes: the wide one (128 x
// 256 tiles in 2-CTA clusters) where the mean expert holds at least
// kWideMinRows rows (T*K/E), the short one (64 x 256 ping-pong tiles) below.
// The sm_90 policy, fitted on two H200 calls (twentieth session,
// docs/bench/experts-notes.md, "grouped tile shapes"): wide won at 1024 rows
// on Qwen3-235B (T 16384, 8 %) and 4096 on Mixtral (T 16384, 3 %), short at
// 128-512 rows everywhere (3-20 %) and at 1024 on Mixtral (T 4096, 4 %).
inline constexpr std::int64_t kWideMinRows = 1024;
inline bool wide_tiles(const Problem& p) {
  return p.tokens * std::int64_t(p.topk) >= kWideMinRows * std::int64_t(p.experts);
}

// The limits of the kernels themselves (beyond the stages'), as text.
const char* limits_text();

// nullptr when the FFN handles p on this device (device-independent limits
// checked without one), else the reason.
const char* not_applicable(const Problem& p, const DeviceCaps& caps);

// Bytes of the FFN's workspace slice: h, a, the group arrays, CUTLASS's
// workspace for E groups on caps' SM count.
std::size_t workspace_bytes(const Problem& p, const DeviceCaps& caps);

// The FFN (steps 1-4 above) into b.y, scratch in `ws` (workspace_bytes).
// The CUTLASS GEMMs launch without the PDL attribute whatever `pdl` says: the
// sm_90 ptr-array kernel of CUTLASS 4.2 issues no griddepcontrol.wait, so it
// must not start before the previous kernel ends; the kernels after it wait
// for it in full (griddepcontrol.wait).
LaunchStatus launch(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl);

}  // namespace moekit::experts::grouped
