// The two small kernels launch_ep (kernels/align/ep.cu) composes around any
// align variant for expert parallelism (docs/align.md, "Invalid ids and
// expert parallelism"): the bucket's pre-pass and the expert_ids post-pass.
// The variants themselves are untouched.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "align/common.cuh"

namespace moekit::align::detail {

// Pre-pass of --invalid bucket: groups[i] = the expert of slot i as every
// variant computes it (expert_of: through the map when a.map is set), or
// `bucket` (= E) for a slot a variant would drop. Grid-stride, one id per
// thread per step (coalesced; the variant that follows re-reads the groups).
template <class IdT>
__global__ void ep_group_kernel(Args a, std::int32_t bucket, std::int32_t* __restrict__ groups) {
  prim::pdl_wait();  // the ids; groups the previous launch's variant may still read
  prim::pdl_launch_dependents();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel;
       i += stride) {
    const int e = expert_at<IdT>(a, i);
    groups[i] = e < 0 ? bucket : e;
  }
}

// Post-pass over the used blocks j < num_tokens_post_pad / B (the tail is
// already -1): expert_ids[j] == bucket becomes -1 (bucket < 0: no bucket);
// with a map (vllm semantics), any other entry e becomes map[e], and -1
// where e is outside the map (which the map's length, E, rules out).
__global__ void ep_relabel_kernel(std::int32_t* __restrict__ eids, const std::int32_t* __restrict__ total,
                                  std::int32_t block_size, std::int32_t max_blocks, std::int32_t bucket,
                                  const std::int32_t* __restrict__ map, std::int32_t map_size) {
  prim::pdl_wait();  // the variant's expert_ids and num_tokens_post_pad
  prim::pdl_launch_dependents();
  const std::int64_t used = min(*total / block_size, max_blocks);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < used; j += stride) {
    const std::int32_t e = eids[j];
    std::int32_t out = e;
    if (e == bucket)
      out = -1;
    else if (map != nullptr)
      out = static_cast<std::uint32_t>(e) < static_cast<std::uint32_t>(map_size) ? __ldg(map + e) : -1;
    eids[j] = out;
  }
}

}  // namespace moekit::align::detail
