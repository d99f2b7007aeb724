// Variant `tiny` (small inputs): ONE launch, no global atomics, no
// workspace, no memset node. Built for latency: a short barrier chain and a
// padding fill spread over many blocks. The kernel, its launch shape and its
// placement hook are align's public building block (tiny_kernel.cuh); here:
// the default shape from the policy, the variant's limits and its launchers,
// which instantiate the no-op TinyPlaceNone.
#pragma once

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/tiny_kernel.cuh"

#include <algorithm>

namespace moekit::align::detail {

// Default shape (policy.hpp; probe_align sweep, docs/align.md): ~256 rows
// of sorted_token_ids per block, at most one block per SM; 256 threads while
// numel <= 256 (fewer warps = shorter barriers), 512 up to 4096, 1024 beyond
// (every block ranks all slots: more threads, more atomics in flight), and,
// up to 1024 threads, at least one thread per 16 rows of a chunk and per
// expert (every block zeroes, scans and walks all E counters).
inline TinyPlan tiny_plan(const Problem& p, const DeviceCaps& caps) {
  const Policy& pol = policy_for(caps);
  const std::int64_t most = std::int64_t{pol.tiny_blocks_per_sm} * std::max(caps.sm_count, 1);
  const std::int64_t g = std::clamp<std::int64_t>(
      ceil_div<std::int64_t>(p.max_num_tokens_padded, pol.tiny_rows_per_block), 1, most);
  int threads = p.numel <= pol.tiny_256_threads_max_slots   ? 256
                : p.numel <= pol.tiny_512_threads_max_slots ? 512
                                                            : 1024;
  const std::int64_t chunk = ceil_div<std::int64_t>(std::max<std::int64_t>(p.max_num_tokens_padded, 1), g);
  while (threads < 1024 && (chunk > std::int64_t{pol.tiny_rows_per_thread} * threads ||
                            p.num_experts > pol.tiny_experts_per_thread * threads))
    threads *= 2;
  return tiny_plan_with(p, static_cast<int>(g), threads);
}

inline const char* tiny_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.numel > kTinyMaxNumel) return "needs numel <= 32768 (every block reads all ids)";
  if (p.num_experts > kTinyMaxExperts) return "needs E <= 16384";
  if (!fits_smem(caps, tiny_smem(p.numel, p.num_experts) + 256))
    return "needs 4*(numel + 2E + 1) bytes of shared memory per block";
  return nullptr;
}

template <class IdT, int kThreads, bool kWide>
inline cudaError_t launch_tiny_as(const Args& a, const TinyPlan& pl, std::size_t smem,
                                  cudaStream_t s, prim::LaunchAttrs at) {
  return prim::launch_with_smem(tiny_kernel<IdT, kThreads, kWide>, pl.grid, kThreads, smem, s, at, a, pl.chunk,
                                TinyPlaceNone::Params{});
}

template <class IdT, int kThreads>
inline cudaError_t launch_tiny_threads(const Args& a, const TinyPlan& pl, std::size_t smem,
                                       cudaStream_t s, prim::LaunchAttrs at) {
  if (a.numel > kTinyNarrow * kThreads) return launch_tiny_as<IdT, kThreads, true>(a, pl, smem, s, at);
  return launch_tiny_as<IdT, kThreads, false>(a, pl, smem, s, at);
}

template <class IdT>
inline cudaError_t launch_tiny(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl,
                               const TinyPlan& pl) {
  const Args a = make_args(p, bufs);
  const std::size_t smem = tiny_smem(p.numel, p.num_experts);
  const prim::LaunchAttrs at = prim::pdl_attrs(pdl);
  switch (pl.threads) {
    case 512: return launch_tiny_threads<IdT, 512>(a, pl, smem, s, at);
    case 1024: return launch_tiny_threads<IdT, 1024>(a, pl, smem, s, at);
    default: return launch_tiny_threads<IdT, 256>(a, pl, smem, s, at);
  }
}

template <class IdT>
inline cudaError_t launch_tiny(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  return launch_tiny<IdT>(p, bufs, s, pdl, tiny_plan(p, device_caps()));
}

}  // namespace moekit::align::detail
