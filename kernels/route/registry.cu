// Launchers and registry of the route family: one launcher per variant, each
// a thin shell that picks the kernel template for the problem's dtype,
// scoring and row width.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <string>

#include "common/cuda_check.cuh"
#include "primitives/launch.cuh"
#include "route/block.cuh"
#include "route/block_rank.cuh"
#include "route/policy.hpp"
#include "route/route.hpp"
#include "route/warp_regs.cuh"
#include "route/warp_smem.cuh"

namespace moekit::route {
namespace {

using detail::Args;

// Calls f.template operator()<T, S>() for the problem's dtype and scoring.
template <class F>
cudaError_t dispatch(const Problem& p, F&& f) {
  auto by_scoring = [&]<class T>() -> cudaError_t {
    return p.scoring == Scoring::softmax ? f.template operator()<T, Scoring::softmax>()
                                         : f.template operator()<T, Scoring::sigmoid>();
  };
  switch (p.dtype) {
    case DType::f32: return by_scoring.template operator()<float>();
    case DType::bf16: return by_scoring.template operator()<__nv_bfloat16>();
    case DType::f16: return by_scoring.template operator()<__half>();
  }
  return cudaErrorInvalidValue;
}

// Calls f.template operator()<N>() for N = the smallest power of two with
// lanes * N >= E (N <= 16).
template <class F>
cudaError_t by_width(int experts, int lanes, F&& f) {
  if (experts <= lanes) return f.template operator()<1>();
  if (experts <= 2 * lanes) return f.template operator()<2>();
  if (experts <= 4 * lanes) return f.template operator()<4>();
  if (experts <= 8 * lanes) return f.template operator()<8>();
  return f.template operator()<16>();
}

std::size_t elem_bytes(DType d) { return d == DType::f32 ? 4 : 2; }

// Whole-vector loads of N-element chunks: E a multiple of N, rows and chunks
// aligned to the vector (8 or 16 bytes; 4-byte chunks are not worth it).
bool vector_rows(const Problem& p, const Buffers& b, int n) {
  const std::size_t chunk = n * elem_bytes(p.dtype);
  const std::size_t vec = chunk % 16 == 0 ? 16 : chunk % 8 == 0 ? 8 : 0;  // as load_row_chunk
  return vec != 0 && p.experts % n == 0 && (p.experts * elem_bytes(p.dtype)) % vec == 0 &&
         reinterpret_cast<std::uintptr_t>(b.logits) % vec == 0;
}

bool empty(const Problem& p) { return p.tokens <= 0; }

// ---- warp-smem ----------------------------------------------------------------
constexpr int kSmemWarpsPerBlock = 4;

std::size_t warp_smem_per_warp(const Problem& p) { return 4 * static_cast<std::size_t>(detail::warp_smem_floats(p)); }

LaunchStatus launch_warp_smem(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Scoring S>() {
    const int words = detail::warp_smem_floats(p);
    const int warps = kSmemWarpsPerBlock;
    const unsigned grid = clamp_grid(ceil_div<std::int64_t>(p.tokens, warps));
    return prim::launch_with_smem(detail::warp_smem_kernel<T, S>, dim3(grid), dim3(32 * warps),
                                  warp_smem_per_warp(p) * warps, s, prim::pdl_attrs(pdl), detail::make_args(p, b), warps,
                                  words);
  });
}

const char* warp_smem_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present() && warp_smem_per_warp(p) * kSmemWarpsPerBlock > caps.smem_optin)
    return "the row, group and pick arrays of 4 warps exceed the device's shared memory per block";
  return nullptr;
}
std::string warp_smem_limits(const DeviceCaps&) {
  return "E <= " + std::to_string(kMaxExperts) + ", any K, any groups";
}
std::size_t no_workspace(const Problem&, const DeviceCaps&) { return 0; }

// ---- warp-regs ----------------------------------------------------------------
bool lane_groups(const Problem& p, int n) {
  if (p.groups <= 1 || p.experts != 32 * n) return false;
  const int gs = p.experts / p.groups;
  if (gs % n != 0) return false;
  const int lanes = gs / n;
  return (lanes & (lanes - 1)) == 0;
}

// Lanes per token: enough 16-byte chunks to cover E, at least K (lane j
// keeps pick j), 32 with groups (group selection is warp-wide); N values per
// lane. Several tokens share a warp when E is small (Mixtral's E = 8 takes 2
// lanes of 4 f32 values).
struct RegsShape {
  int lanes, n;
};
RegsShape regs_shape(const Problem& p) {
  const int vec = static_cast<int>(16 / elem_bytes(p.dtype));
  int lanes = 2;
  while (lanes < 32 && (lanes * vec < p.experts || lanes < p.topk)) lanes *= 2;
  if (p.groups > 1) lanes = 32;
  if (lanes < 32) return {lanes, vec};
  int n = 1;
  while (32 * n < p.experts) n *= 2;
  return {32, n};
}

template <class T, Scoring S, int N, int kLanes>
cudaError_t launch_regs_typed(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  constexpr int W = detail::kRegsWarpsPerBlock;
  const unsigned grid = clamp_grid(ceil_div<std::int64_t>(p.tokens, std::int64_t{W} * (32 / kLanes)));
  const bool lg = kLanes == 32 && lane_groups(p, N);
  const std::size_t smem = p.groups > 1 && !lg ? 4 * std::size_t(p.experts + 2 * p.groups) * W : 0;
  auto go = [&](auto kernel) {
    return prim::launch_with_smem(kernel, dim3(grid), dim3(32 * W), smem, s, prim::pdl_attrs(pdl), detail::make_args(p, b));
  };
  if constexpr (kLanes == 32) {
    if constexpr (detail::kVectorChunk<T, N>) {
      if (vector_rows(p, b, N))
        return lg ? go(detail::warp_regs_kernel<T, S, N, 32, true, true>)
                  : go(detail::warp_regs_kernel<T, S, N, 32, true, false>);
    }
    return lg ? go(detail::warp_regs_kernel<T, S, N, 32, false, true>)
              : go(detail::warp_regs_kernel<T, S, N, 32, false, false>);
  } else {
    if (vector_rows(p, b, N)) return go(detail::warp_regs_kernel<T, S, N, kLanes, true, false>);
    return go(detail::warp_regs_kernel<T, S, N, kLanes, false, false>);
  }
}

LaunchStatus launch_warp_regs(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (empty(p)) return cudaSuccess;
  const RegsShape rs = regs_shape(p);
  return dispatch(p, [&]<class T, Scoring S>() -> cudaError_t {
    constexpr int V = 16 / sizeof(T);
    switch (rs.lanes) {
      case 2: return launch_regs_typed<T, S, V, 2>(p, b, s, pdl);
      case 4: return launch_regs_typed<T, S, V, 4>(p, b, s, pdl);
      case 8: return launch_regs_typed<T, S, V, 8>(p, b, s, pdl);
      case 16: return launch_regs_typed<T, S, V, 16>(p, b, s, pdl);
      default: return by_width(p.experts, 32, [&]<int N>() { return launch_regs_typed<T, S, N, 32>(p, b, s, pdl); });
    }
  });
}

const char* warp_regs_na(const Problem& p, const DeviceCaps&) {
  if (p.experts > 32 * detail::kRegsMaxPerLane) return "E > 512 (16 values per lane)";
  if (p.topk > detail::kRegsMaxTopk) return "K > 32 (lane j keeps pick j)";
  return nullptr;
}
std::string warp_regs_limits(const DeviceCaps&) {
  return "E <= " + std::to_string(32 * detail::kRegsMaxPerLane) + ", K <= " + std::to_string(detail::kRegsMaxTopk);
}

// ---- block --------------------------------------------------------------------
LaunchStatus launch_block(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Scoring S>() {
    return by_width(p.experts, detail::kBlockThreads, [&]<int N>() {
      const unsigned grid = clamp_grid(p.tokens);
      const std::size_t smem = detail::block_smem_bytes(p);
      auto go = [&](auto kernel) {
        return prim::launch_with_smem(kernel, dim3(grid), dim3(detail::kBlockThreads), smem, s, prim::pdl_attrs(pdl),
                                      detail::make_args(p, b));
      };
      if constexpr (detail::kVectorChunk<T, N>) {
        if (vector_rows(p, b, N)) return go(detail::block_kernel<T, S, N, true>);
      }
      return go(detail::block_kernel<T, S, N, false>);
    });
  });
}

const char* block_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present() && detail::block_smem_bytes(p) > caps.smem_optin)
    return "the group and pick arrays exceed the device's shared memory per block";
  return nullptr;
}
std::string block_limits(const DeviceCaps&) {
  return "E <= " + std::to_string(detail::kBlockThreads * detail::kBlockMaxPerThread) + ", any K, any groups";
}

// ---- block-rank ------------------------------------------------------------------
template <bool kAlign>
LaunchStatus launch_rank(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (empty(p)) return cudaSuccess;
  Problem q = p;
  if (!kAlign) q.align_block = 0;  // smem for the route part only
  return dispatch(p, [&]<class T, Scoring S>() {
    return prim::launch_with_smem(detail::block_rank_kernel<T, S, kAlign>, dim3(clamp_grid(p.tokens)),
                                  dim3(detail::rank_threads(p)), detail::rank_smem_bytes(q), s, prim::pdl_attrs(pdl),
                                  detail::make_args(p, b));
  });
}
LaunchStatus launch_block_rank(const Problem& p, const Buffers& b, Stream s, bool pdl) { return launch_rank<false>(p, b, s, pdl); }

// block-rank-align: T = 0 still owes align's outputs (nothing routed).
LaunchStatus launch_block_rank_align(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (p.tokens == 0) {
    cudaError_t e = cudaMemsetAsync(b.num_tokens_post_pad, 0, 4, s);
    if (e == cudaSuccess && p.align_rows > 0) e = cudaMemsetAsync(b.sorted_token_ids, 0, 4 * p.align_rows, s);
    if (e == cudaSuccess && p.align_blocks > 0) e = cudaMemsetAsync(b.expert_ids, 0xff, 4 * p.align_blocks, s);
    return e;
  }
  return launch_rank<true>(p, b, s, pdl);
}

const char* block_rank_na(const Problem& p, const DeviceCaps&);

const char* block_rank_align_na(const Problem& p, const DeviceCaps& caps) {
  if (p.align_block <= 0) return "fuses align: needs --then-align";
  if (p.tokens * p.topk > detail::kFusedMaxSlots) return "T*K > 8192 (a rank per slot in shared memory)";
  return block_rank_na(p, caps);
}
std::string block_rank_align_limits(const DeviceCaps&) {
  return "--then-align, E <= " + std::to_string(detail::kRankMaxExperts) + ", K <= " +
         std::to_string(detail::kRankMaxTopk) + ", T*K <= " + std::to_string(detail::kFusedMaxSlots);
}
std::size_t counter_workspace(const Problem&, const DeviceCaps&) { return 4; }
bool counter_zeroed(const Problem&, const DeviceCaps&) { return true; }

const char* block_rank_na(const Problem& p, const DeviceCaps&) {
  if (p.experts > detail::kRankMaxExperts) return "E > 1024 (one thread per expert)";
  if (p.topk > detail::kRankMaxTopk) return "K > 32 (a warp's best K fit its lanes)";
  return nullptr;
}
std::string block_rank_limits(const DeviceCaps&) {
  return "E <= " + std::to_string(detail::kRankMaxExperts) + ", K <= " + std::to_string(detail::kRankMaxTopk);
}

const std::array<Variant, 5> kVariants{{
    {{"warp-smem",
      "one warp per token, the row's selection values in shared memory; each pick is a warp arg-max over a "
      "strided scan of the row (the simple baseline)", "warp_smem_kernel"},
     false, warp_smem_limits, warp_smem_na, no_workspace, launch_warp_smem},
    {{"warp-regs",
      "a warp (or, for small E, a few lanes) per token, consecutive experts per lane in registers (8/16-byte "
      "loads); each pick is one arg-max of the lanes' bests (two warp reductions), only the winning lane "
      "rescans; group scores by lane shuffles where groups are whole lanes", "warp_regs_kernel"},
     false, warp_regs_limits, warp_regs_na, no_workspace, launch_warp_regs},
    {{"block",
      "one 256-thread block per token, E/256 consecutive experts per thread; each pick is a block arg-max (one "
      "barrier): large E or large K", "block_kernel"},
     false, block_limits, block_na, no_workspace, launch_block},
    {{"block-rank",
      "one block per token, one expert per thread; picks by parallel ranks instead of K sequential rounds: "
      "group ranks, a 32-lane all-to-all rank per warp, then a rank among the warps' best (decode latency)", "block_rank_kernel"},
     false, block_rank_limits, block_rank_na, no_workspace, launch_block_rank},
    {{"block-rank-align",
      "block-rank, then the last block to finish runs align on all the ids in shared memory: route and align "
      "in one launch (--then-align, decode sizes)", "block_rank_kernel"},
     false, block_rank_align_limits, block_rank_align_na, counter_workspace, launch_block_rank_align,
     counter_zeroed},
}};

bool regs_fit(const Problem& p, const DeviceCaps& caps) { return warp_regs_na(p, caps) == nullptr; }
// block-rank's parallel ranks pay where a token has many experts and several
// picks; for E = 8 or K = 1 the one-warp chain is already short, and at
// E = 1024 one thread per expert makes its rank steps 4x longer than `block`'s
// (bench_route, docs/bench/route.md: Mixtral, Llama-4 and E 1024 rows).
bool rank_pays(const Problem& p, const DeviceCaps& caps) {
  return p.tokens <= rank_max_tokens(caps) && p.experts >= 64 && p.experts <= 512 && p.topk >= 2;
}
bool fused_pays(const Problem& p, const DeviceCaps& caps) {
  return p.align_block > 0 && p.tokens <= policy_for(caps).fused_max_tokens && rank_pays(p, caps);
}
bool latency_bound(const Problem& p, const DeviceCaps& caps) { return p.tokens <= rank_max_tokens(caps); }

const std::array<AutoRow<Problem>, 5> kAutoRows = {{
    {"block-rank-align", "--then-align, T <= policy.fused_max_tokens, 64 <= E <= 512 and K >= 2", fused_pays},
    {"block-rank", "T <= policy.rank_tokens_per_sm x SMs (latency-bound), 64 <= E <= 512 and K >= 2", rank_pays},
    {"warp-regs", "E <= 512 and K <= 32", regs_fit},
    {"block", "T <= policy.rank_tokens_per_sm x SMs", latency_bound},
    {"warp-smem", "", nullptr},
}};

}  // namespace

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

bool fuses_align(const Variant& v) { return v.launch == launch_block_rank_align; }

}  // namespace moekit::route
