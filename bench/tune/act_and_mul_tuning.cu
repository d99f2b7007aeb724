// The flat-grid tuning candidates (act_and_mul_tuning.hpp): their own thin
// launchers over the kernel templates of kernels/act_and_mul/activation.cuh,
// bf16 silu only to keep the bench build small.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "act_and_mul/activation.cuh"
#include "act_and_mul_tuning.hpp"
#include "common/cuda_check.cuh"
#include "common/device.hpp"

namespace moekit::act::tune {
namespace {

using T = __nv_bfloat16;
constexpr Activation kAct = Activation::silu;
constexpr std::int64_t kU32Limit = std::int64_t{1} << 32;

bool aligned_to(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

// kN elements per vector, kUnroll vectors per thread, kBlock threads per
// block; kPersist > 0 caps the grid at kPersist blocks per SM (grid-stride),
// 0 launches one block per chunk. Rows that do not split into whole vectors
// take the element-gather kernel with the same kN and block.
template <int kN, int kUnroll, unsigned kBlock, int kPersist>
LaunchStatus launch_candidate(const Problem& p, const Buffers& b, Stream s, bool) {  // never PDL
  if (p.tokens <= 0 || p.d <= 0 || p.dtype != DType::bf16 || p.act != kAct) return cudaSuccess;
  auto in = static_cast<const T*>(b.input);
  auto out = static_cast<T*>(b.out);
  constexpr std::uintptr_t kVecBytes = kN * sizeof(T);
  if (p.d % kN == 0 && aligned_to(in, kVecBytes) && aligned_to(out, kVecBytes)) {
    const std::int64_t dv = p.d / kN;
    const std::int64_t nvec = p.tokens * dv;
    std::int64_t blocks = ceil_div<std::int64_t>(nvec, std::int64_t{kBlock} * kUnroll);
    if (kPersist > 0)
      blocks = std::min<std::int64_t>(blocks, std::int64_t{std::max(device_caps().sm_count, 1)} * kPersist);
    const unsigned grid = clamp_grid(blocks);
    if (nvec < kU32Limit)
      detail::flat_kernel<T, kAct, kN, kUnroll, false, detail::kPdlNone>
          <<<grid, kBlock, 0, s>>>(in, out, nvec, dv, FastDivU32(static_cast<std::uint32_t>(dv)), true);
    else
      detail::flat_kernel<T, kAct, kN, kUnroll, true, detail::kPdlNone><<<grid, kBlock, 0, s>>>(in, out, nvec, dv,
                                                                                             FastDivU32(), true);
  } else {
    const std::int64_t n = p.tokens * p.d;
    const unsigned grid = clamp_grid(ceil_div<std::int64_t>(ceil_div<std::int64_t>(n, kN), kBlock));
    const bool out_aligned = aligned_to(out, kVecBytes);
    if (n < kU32Limit)
      detail::flat_unaligned_kernel<T, kAct, kN, false, detail::kPdlNone><<<grid, kBlock, 0, s>>>(
          in, out, n, p.d, FastDivU32(static_cast<std::uint32_t>(p.d)), out_aligned);
    else
      detail::flat_unaligned_kernel<T, kAct, kN, true, detail::kPdlNone>
          <<<grid, kBlock, 0, s>>>(in, out, n, p.d, FastDivU32(), out_aligned);
  }
  return cudaGetLastError();
}

const char* bf16_silu_only(const Problem& p, const DeviceCaps&) {
  return p.dtype != DType::bf16 || p.act != kAct ? "bf16 silu only" : nullptr;
}
std::size_t no_workspace(const Problem&, const DeviceCaps&) { return 0; }
std::string bf16_silu_limits(const DeviceCaps&) { return "bf16 silu"; }

#define MOEKIT_CANDIDATE(n, u, blk, per)                                                            \
  Variant{{"n" #n "-u" #u "-b" #blk "-p" #per,                                                      \
           "tuning candidate: " #n " elements per vector, " #u " vectors per thread, " #blk         \
           " threads, grid capped at " #per " blocks per SM (0: uncapped)",                         \
           "flat_kernel flat_unaligned_kernel"},                                                                  \
          false, bf16_silu_limits, bf16_silu_only, no_workspace, launch_candidate<n, u, blk, per>}
const std::array<Variant, 9> kCandidates{{
    MOEKIT_CANDIDATE(1, 1, 128, 0), MOEKIT_CANDIDATE(2, 1, 256, 0), MOEKIT_CANDIDATE(4, 1, 128, 0),
    MOEKIT_CANDIDATE(8, 1, 128, 0), MOEKIT_CANDIDATE(8, 1, 512, 0), MOEKIT_CANDIDATE(8, 2, 512, 0),
    MOEKIT_CANDIDATE(8, 1, 256, 4), MOEKIT_CANDIDATE(8, 1, 256, 8), MOEKIT_CANDIDATE(8, 4, 256, 2),
}};
#undef MOEKIT_CANDIDATE

}  // namespace

std::span<const Variant> flat_grid_candidates() { return kCandidates; }

}  // namespace moekit::act::tune
