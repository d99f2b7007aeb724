// Launchers and registry of the act-and-mul family: one launcher per variant,
// each a thin shell around a kernel of activation.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "act_and_mul/act_and_mul.hpp"
#include "act_and_mul/activation.cuh"
#include "act_and_mul/policy.hpp"
#include "common/cuda_check.cuh"
#include "primitives/launch.cuh"

namespace moekit::act {
namespace {

constexpr std::int64_t kU32Limit = std::int64_t{1} << 32;

// Calls f.template operator()<T, A>() for the problem's dtype and activation.
template <class F>
cudaError_t dispatch(const Problem& p, F&& f) {
  auto by_act = [&]<class T>() -> cudaError_t {
    switch (p.act) {
      case Activation::silu: return f.template operator()<T, Activation::silu>();
      case Activation::gelu: return f.template operator()<T, Activation::gelu>();
      case Activation::gelu_tanh: return f.template operator()<T, Activation::gelu_tanh>();
    }
    return cudaErrorInvalidValue;
  };
  switch (p.dtype) {
    case DType::f16: return by_act.template operator()<__half>();
    case DType::bf16: return by_act.template operator()<__nv_bfloat16>();
    case DType::f32: return by_act.template operator()<float>();
  }
  return cudaErrorInvalidValue;
}

bool aligned_to(const void* p, std::uintptr_t bytes) { return (reinterpret_cast<std::uintptr_t>(p) % bytes) == 0; }

// Rows split into whole N-element vectors that can be loaded and stored whole.
bool rows_aligned(const Problem& p, const Buffers& b, std::int64_t n_elems, std::size_t elem_bytes) {
  const std::uintptr_t vb = static_cast<std::uintptr_t>(n_elems) * elem_bytes;
  return p.d % n_elems == 0 && aligned_to(b.input, vb) && aligned_to(b.out, vb);
}

bool empty(const Problem& p) { return p.tokens <= 0 || p.d <= 0; }

template <class Kernel, class... Args>
cudaError_t launch_plain(bool pdl, Kernel kernel, unsigned grid, unsigned block, Stream s, Args... args) {
  return prim::launch_ex(kernel, dim3(grid), dim3(block), 0, s, prim::LaunchAttrs{pdl, false}, args...);
}

// ---- scalar ------------------------------------------------------------------
LaunchStatus launch_scalar(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Activation A>() {
    const std::int64_t n = p.tokens * p.d;
    constexpr unsigned kBlock = 256;
    const unsigned grid = clamp_grid(ceil_div<std::int64_t>(n, kBlock));
    auto in = static_cast<const T*>(b.input);
    auto out = static_cast<T*>(b.out);
    if (n < kU32Limit) return launch_plain(pdl, detail::scalar_kernel<T, A, false>, grid, kBlock, s, in, out, n, p.d);
    return launch_plain(pdl, detail::scalar_kernel<T, A, true>, grid, kBlock, s, in, out, n, p.d);
  });
}

// ---- vectorized: one block per token -------------------------------------------
LaunchStatus launch_vectorized(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Activation A>() {
    constexpr std::int64_t V = 16 / sizeof(T);
    // One thread per vector of the row, at most 1024.
    const unsigned block = static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(p.d / V, 1024)));
    const unsigned grid = clamp_grid(p.tokens);
    return launch_plain(pdl, detail::row_block_kernel<T, A>, grid, block, s, static_cast<const T*>(b.input),
                        static_cast<T*>(b.out), p.tokens, p.d, rows_aligned(p, b, V, sizeof(T)));
  });
}

// ---- flat / spread: one grid over all vectors --------------------------------------
// kN elements per vector (0: 16 bytes), one vector per thread, kBlock threads
// per block, one block per kBlock vectors. Rows that do not split into whole
// vectors take the element-gather kernel with the same kN and block.
template <int kN, unsigned kBlock, int kPdl, class T, Activation A>
cudaError_t launch_flat_typed(const Problem& p, const Buffers& b, Stream s) {
  constexpr int N = kN == 0 ? static_cast<int>(16 / sizeof(T)) : kN;
  constexpr bool kUsePdl = kPdl != detail::kPdlNone;
  auto in = static_cast<const T*>(b.input);
  auto out = static_cast<T*>(b.out);
  if (rows_aligned(p, b, N, sizeof(T))) {
    const std::int64_t dv = p.d / N;
    const std::int64_t nvec = p.tokens * dv;
    const unsigned grid = clamp_grid(ceil_div<std::int64_t>(nvec, std::int64_t{kBlock}));
    const bool stream =
        stream_loads(p.tokens * 2 * p.d * static_cast<std::int64_t>(sizeof(T)), moekit::device_caps());
    if (nvec < kU32Limit) {
      const FastDivU32 div(static_cast<std::uint32_t>(dv));
      if (stream)
        return launch_plain(kUsePdl, detail::flat_kernel<T, A, N, 1, false, kPdl, detail::kLoadsStream>, grid, kBlock,
                            s, in, out, nvec, dv, div, true);
      return launch_plain(kUsePdl, detail::flat_kernel<T, A, N, 1, false, kPdl, detail::kLoadsPlain>, grid, kBlock, s,
                          in, out, nvec, dv, div, false);
    } else {
      return launch_plain(kUsePdl, detail::flat_kernel<T, A, N, 1, true, kPdl>, grid, kBlock, s, in, out, nvec, dv,
                          FastDivU32(), stream);
    }
  } else {
    const std::int64_t n = p.tokens * p.d;
    const unsigned grid = clamp_grid(ceil_div<std::int64_t>(ceil_div<std::int64_t>(n, N), kBlock));
    const bool out_aligned = aligned_to(b.out, N * sizeof(T));
    if (n < kU32Limit) {
      return launch_plain(kUsePdl, detail::flat_unaligned_kernel<T, A, N, false, kPdl>, grid, kBlock, s, in, out, n,
                          p.d, FastDivU32(static_cast<std::uint32_t>(p.d)), out_aligned);
    } else {
      return launch_plain(kUsePdl, detail::flat_unaligned_kernel<T, A, N, true, kPdl>, grid, kBlock, s, in, out, n,
                          p.d, FastDivU32(), out_aligned);
    }
  }
}

template <int kN, unsigned kBlock, int kPdl>
cudaError_t launch_flat_grid(const Problem& p, const Buffers& b, Stream s) {
  if (empty(p)) return cudaSuccess;
  return dispatch(p, [&]<class T, Activation A>() { return launch_flat_typed<kN, kBlock, kPdl, T, A>(p, b, s); });
}

// flat: 16-byte vectors, one per thread, 256 threads: the bandwidth layout.
// With pdl it launches as flat-pdl.
LaunchStatus launch_flat(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (pdl) return launch_flat_grid<0, 256, detail::kPdlLate>(p, b, s);
  return launch_flat_grid<0, 256, detail::kPdlNone>(p, b, s);
}
// flat-pdl: flat, launched with PDL whatever `pdl` says (its registry entry's
// always_pdl); dependents may launch only as blocks finish.
LaunchStatus launch_flat_pdl(const Problem& p, const Buffers& b, Stream s, bool) {
  return launch_flat(p, b, s, true);
}
// spread: 2 elements per thread (4-byte loads for 16-bit types), 128 threads:
// math chain is short. With pdl it launches as spread-pdl.
LaunchStatus launch_spread(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (pdl) return launch_flat_grid<kSpreadElemsPerThread, kSpreadThreads, detail::kPdlEarly>(p, b, s);
  return launch_flat_grid<kSpreadElemsPerThread, kSpreadThreads, detail::kPdlNone>(p, b, s);
}
// spread-pdl: spread, launched with PDL whatever `pdl` says (always_pdl).
LaunchStatus launch_spread_pdl(const Problem& p, const Buffers& b, Stream s, bool) {
  return launch_spread(p, b, s, true);
}

const char* any_shape(const Problem&, const DeviceCaps&) { return nullptr; }
std::size_t no_workspace(const Problem&, const DeviceCaps&) { return 0; }
std::string any_limits(const DeviceCaps&) { return "any"; }
std::string unaligned_rows_limits(const DeviceCaps&) { return "any (rows with d % vec != 0 go element by element)"; }
std::string flat_limits(const DeviceCaps&) { return "any (d % vec != 0: element gathers, 16-byte stores)"; }
std::string spread_limits(const DeviceCaps&) { return "any (odd d: element gathers)"; }

const std::array<Variant, 6> kVariants{{
    {{"scalar", "one element per thread per grid-stride step (baseline)", "scalar_kernel"},
     false, any_limits, any_shape, no_workspace, launch_scalar},
    {{"vectorized",
      "one block per token, 16-byte converting loads/stores strided over d, then a scalar tail "
      "from d - d % (block*vec) that recomputes part of long rows", "row_block_kernel"},
     false, unaligned_rows_limits, any_shape, no_workspace, launch_vectorized},
    {{"flat",
      "one grid over all 16-byte output vectors (no tail recompute, short rows share blocks, long rows "
      "span many blocks), one vector per thread, 256-thread blocks", "flat_kernel flat_unaligned_kernel"},
     false, flat_limits, any_shape, no_workspace, launch_flat},
    {{"spread",
      "latency layout of flat: 2 elements per thread (4/8-byte loads), 128-thread blocks: one row covers "
      "many SMs and each thread's math chain is short", "flat_kernel flat_unaligned_kernel"},
     false, spread_limits, any_shape, no_workspace, launch_spread},
    {{"spread-pdl",
      "spread launched with Hopper programmatic dependent launch whatever --pdl says (overlaps the previous "
      "kernel's tail; no effect before sm_90); plain spread launches so with --pdl on", "flat_kernel flat_unaligned_kernel"},
     false, any_limits, any_shape, no_workspace, launch_spread_pdl, nullptr, /*always_pdl=*/true},
    {{"flat-pdl",
      "flat launched with Hopper programmatic dependent launch whatever --pdl says; the next grid may launch "
      "only as this one's blocks finish, so its launch overlaps this grid's tail without taking SM slots it "
      "needs (no effect before sm_90); plain flat launches so with --pdl on", "flat_kernel flat_unaligned_kernel"},
     false, any_limits, any_shape, no_workspace, launch_flat_pdl, nullptr, /*always_pdl=*/true},
}};

// Latency-bound up to one wave of spread blocks (act_and_mul/policy.hpp).
bool small(const Problem& p, const DeviceCaps& caps) { return p.tokens * p.d <= small_max_outputs(caps, false); }
// The wave with PDL: its rows are pdl_only (picks for launches with PDL, the
// CLI's --pdl on where the device has it).
bool small_pdl(const Problem& p, const DeviceCaps& caps) { return p.tokens * p.d <= small_max_outputs(caps, true); }

// flat-pdl measured no slower than flat in any bandwidth-bound cell on the
// H100 and up to 9% faster at 128-1024 tokens (its launch overlaps the
// previous grid's tail); without PDL (--pdl off, or no PDL hardware) it is flat.
const std::array<AutoRow<Problem>, 4> kAutoRows = {{
    {"spread-pdl",
     "PDL (--pdl on, sm_90+) and tokens*d <= one PDL wave of spread outputs (2 x 128 x "
     "policy.spread_pdl_blocks_per_sm x SMs)",
     small_pdl, /*pdl_only=*/true},
    {"flat-pdl", "PDL (--pdl on, sm_90+; past the PDL wave)", nullptr, /*pdl_only=*/true},
    {"spread",
     "tokens*d <= one wave of spread outputs (2 x 128 x policy.spread_blocks_per_sm x SMs: "
     "latency-bound)",
     small},
    {"flat", "", nullptr},
}};

}  // namespace

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::act
