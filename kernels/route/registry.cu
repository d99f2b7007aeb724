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
prim::LaunchAttrs attrs(const Problem& p) { return prim::LaunchAttrs{p.pdl, false}; }

// ---- warp-smem ----------------------------------------------------------------
constexpr int kSmemWarpsPerBlock = 4;

std::size_t warp_smem_per_warp(const Problem& p) { return 4 * static_cast<std::size_t>(detail::warp_smem_floats(p)); }

LaunchStatus launch_warp_smem(const Problem& p, const Buffers& b, Stream s) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Scoring S>() {
    const int words = detail::warp_smem_floats(p);
    const int warps = kSmemWarpsPerBlock;
    const unsigned grid = clamp_grid(ceil_div<std::int64_t>(p.tokens, warps));
    return prim::launch_with_smem(detail::warp_smem_kernel<T, S>, dim3(grid), dim3(32 * warps),
                                  warp_smem_per_warp(p) * warps, s, attrs(p), detail::make_args(p, b), warps,
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

LaunchStatus launch_warp_regs(const Problem& p, const Buffers& b, Stream s) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Scoring S>() {
    return by_width(p.experts, 32, [&]<int N>() {
      constexpr int W = detail::kRegsWarpsPerBlock;
      const unsigned grid = clamp_grid(ceil_div<std::int64_t>(p.tokens, W));
      const bool lg = lane_groups(p, N);
      const std::size_t smem = p.groups > 1 && !lg ? 4 * std::size_t(p.experts + 2 * p.groups) * W : 0;
      auto go = [&](auto kernel) {
        return prim::launch_with_smem(kernel, dim3(grid), dim3(32 * W), smem, s, attrs(p), detail::make_args(p, b));
      };
      if constexpr (detail::kVectorChunk<T, N>) {
        if (vector_rows(p, b, N))
          return lg ? go(detail::warp_regs_kernel<T, S, N, true, true>)
                    : go(detail::warp_regs_kernel<T, S, N, true, false>);
      }
      return lg ? go(detail::warp_regs_kernel<T, S, N, false, true>)
                : go(detail::warp_regs_kernel<T, S, N, false, false>);
    });
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
LaunchStatus launch_block(const Problem& p, const Buffers& b, Stream s) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Scoring S>() {
    return by_width(p.experts, detail::kBlockThreads, [&]<int N>() {
      const unsigned grid = clamp_grid(p.tokens);
      const std::size_t smem = detail::block_smem_bytes(p);
      auto go = [&](auto kernel) {
        return prim::launch_with_smem(kernel, dim3(grid), dim3(detail::kBlockThreads), smem, s, attrs(p),
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

const std::array<Variant, 3> kVariants{{
    {{"warp-smem",
      "one warp per token, the row's selection values in shared memory; each pick is a warp arg-max over a "
      "strided scan of the row (the simple baseline)"},
     false, warp_smem_limits, warp_smem_na, no_workspace, launch_warp_smem},
    {{"warp-regs",
      "one warp per token, E/32 consecutive experts per lane in registers (8/16-byte loads); each pick is one "
      "5-step warp arg-max, only the winning lane rescans; group scores by lane shuffles where groups are whole "
      "lanes"},
     false, warp_regs_limits, warp_regs_na, no_workspace, launch_warp_regs},
    {{"block",
      "one 256-thread block per token, E/256 consecutive experts per thread; each pick is a block arg-max (one "
      "barrier): large E or large K"},
     false, block_limits, block_na, no_workspace, launch_block},
}};

bool regs_fit(const Problem& p, const DeviceCaps& caps) { return warp_regs_na(p, caps) == nullptr; }

const std::array<AutoRow<Problem>, 2> kAutoRows = {{
    {"warp-regs", "E <= 512 and K <= 32", regs_fit},
    {"block", "", nullptr},
}};

}  // namespace

std::span<const Variant> variants() { return kVariants; }

const Variant* find(std::string_view name) { return find_variant<Variant>(kVariants, name); }

const Variant& pick_auto(const Problem& p) { return pick_auto(p, moekit::device_caps()); }
const Variant& pick_auto(const Problem& p, const DeviceCaps& caps) {
  return pick_from_rows<Variant, Problem>(kAutoRows, kVariants, p, caps);
}

std::span<const AutoRow<Problem>> auto_rows() { return kAutoRows; }

std::string auto_rule() { return auto_rule_text<Problem>(kAutoRows); }

}  // namespace moekit::route
