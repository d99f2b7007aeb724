// launch_ep: expert-parallel modes (--invalid bucket, --map-semantics vllm)
// composed around any registered align variant: pre-pass, the variant on
// variant_problem(p), post-pass (align.hpp; docs/align.md, "Invalid ids and
// expert parallelism"). The variants are not touched.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "align/align.hpp"
#include "align/common.cuh"
#include "align/ep.cuh"
#include "align/host_util.cuh"
#include "common/cuda_check.cuh"
#include "primitives/launch.cuh"

namespace moekit::align {
namespace {

constexpr std::size_t kGroupsAlign = 256;  // the pre-pass's groups start on this boundary
constexpr int kPassThreads = 256;

std::size_t groups_offset(std::size_t variant_bytes) {
  return (variant_bytes + kGroupsAlign - 1) / kGroupsAlign * kGroupsAlign;
}

// Grid of a grid-stride pass over n items: enough blocks to fill the GPU a few
// times over, never more than the items need.
unsigned pass_grid(std::int64_t n) {
  const std::int64_t per_wave = std::int64_t{4} * std::max(device_caps().sm_count, 1);
  return clamp_grid(std::min(ceil_div<std::int64_t>(n, kPassThreads), per_wave));
}

}  // namespace

const char* ep_not_applicable(const Variant& v, const Problem& p, const DeviceCaps& caps) {
  return v.not_applicable(variant_problem(p), caps);
}

std::size_t ep_variant_workspace_bytes(const Variant& v, const Problem& p, const DeviceCaps& caps) {
  return v.workspace_bytes(variant_problem(p), caps);
}

std::size_t ep_workspace_bytes(const Variant& v, const Problem& p, const DeviceCaps& caps) {
  const std::size_t own = ep_variant_workspace_bytes(v, p, caps);
  if (p.invalid != Invalid::bucket || p.numel == 0) return own;
  return groups_offset(own) + sizeof(std::int32_t) * static_cast<std::size_t>(p.numel);
}

bool ep_zeroed_workspace(const Variant& v, const Problem& p, const DeviceCaps& caps) {
  return needs_zeroed_workspace(v, variant_problem(p), caps);
}

LaunchStatus launch_ep(const Variant& v, const Problem& p, const Buffers& b, Stream stream, bool pdl) {
  if (!has_ep_passes(p)) return v.launch(p, b, stream, pdl);
  const cudaStream_t s = reinterpret_cast<cudaStream_t>(stream);
  const Problem vp = variant_problem(p);
  Buffers vb = b;
  vb.expert_map = nullptr;
  const std::int32_t bucket = p.invalid == Invalid::bucket ? p.num_experts : -1;
  if (bucket >= 0) {
    // The groups go after the variant's own workspace; an empty input needs none.
    auto* groups = reinterpret_cast<std::int32_t*>(
        static_cast<unsigned char*>(b.workspace) +
        (p.numel > 0 ? groups_offset(v.workspace_bytes(vp, device_caps())) : 0));
    if (p.numel > 0) {
      // The pre-pass reads the ids as every variant does (expert_of), through
      // the map only with local semantics.
      Problem mp = p;
      if (p.map_semantics == MapSemantics::vllm) mp.map_size = 0;
      const Args a = make_args(mp, b);
      const cudaError_t e =
          p.ids_int64 ? prim::launch_ex(detail::ep_group_kernel<std::int64_t>, pass_grid(p.numel), kPassThreads, 0,
                                        s, prim::pdl_attrs(pdl), a, bucket, groups)
                      : prim::launch_ex(detail::ep_group_kernel<std::int32_t>, pass_grid(p.numel), kPassThreads, 0,
                                        s, prim::pdl_attrs(pdl), a, bucket, groups);
      if (e != cudaSuccess) return e;
    }
    vb.topk_ids = groups;
  }
  if (const LaunchStatus e = v.launch(vp, vb, stream, pdl); e != 0) return e;
  if (p.max_num_blocks == 0) return cudaSuccess;
  const std::int32_t* map = vllm_map(p) ? b.expert_map : nullptr;
  return prim::launch_ex(detail::ep_relabel_kernel, pass_grid(p.max_num_blocks), kPassThreads, 0, s,
                         prim::pdl_attrs(pdl), b.expert_ids, b.num_tokens_post_pad, p.block_size,
                         static_cast<std::int32_t>(p.max_num_blocks), bucket, map, map != nullptr ? p.map_size : 0);
}

}  // namespace moekit::align
