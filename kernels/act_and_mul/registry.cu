// Launchers and registry of the act-and-mul family: one launcher per variant,
// each a thin shell around a kernel of activation.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "act_and_mul/act_and_mul.hpp"
#include "act_and_mul/activation.cuh"
#include "common/cuda_check.cuh"

namespace moekit::act {
namespace {



constexpr std::int64_t kU32Limit = std::int64_t{1} << 32;

// Calls f.template operator()<T, A>() for the problem's dtype and activation.
template <class F>
void dispatch(const Problem& p, F&& f) {
  auto by_act = [&]<class T>() {
    switch (p.act) {
      case Activation::silu: f.template operator()<T, Activation::silu>(); break;
      case Activation::gelu: f.template operator()<T, Activation::gelu>(); break;
      case Activation::gelu_tanh: f.template operator()<T, Activation::gelu_tanh>(); break;
    }
  };
  switch (p.dtype) {
    case DType::f16: by_act.template operator()<__half>(); break;
    case DType::bf16: by_act.template operator()<__nv_bfloat16>(); break;
    case DType::f32: by_act.template operator()<float>(); break;
  }
}

std::int64_t elems_per_vec(DType t) { return t == DType::f32 ? 4 : 8; }

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; }

// Rows can be read and written as whole 16-byte vectors.
bool rows_aligned(const Problem& p, const Buffers& b) {
  return p.d % elems_per_vec(p.dtype) == 0 && aligned16(b.input) && aligned16(b.out);
}

bool empty(const Problem& p) { return p.tokens <= 0 || p.d <= 0; }

template <class Kernel, class... Args>
void launch_pdl(Kernel kernel, unsigned grid, unsigned block, Stream s, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(block);
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <class Kernel, class... Args>
void launch_plain(bool pdl, Kernel kernel, unsigned grid, unsigned block, Stream s, Args... args) {
  if (pdl) {
    launch_pdl(kernel, grid, block, s, args...);
  } else {
    kernel<<<grid, block, 0, s>>>(args...);
  }
}

// ---- scalar ------------------------------------------------------------------
void launch_scalar(const Problem& p, const Buffers& b, Stream s) {
  if (empty(p)) return;
  dispatch(p, [&]<class T, Activation A>() {
    const std::int64_t n = p.tokens * p.d;
    constexpr unsigned kBlock = 256;
    const unsigned grid = clamp_grid(ceil_div<std::int64_t>(n, kBlock));
    auto in = static_cast<const T*>(b.input);
    auto out = static_cast<T*>(b.out);
    if (n < kU32Limit) {
      detail::scalar_kernel<T, A, false><<<grid, kBlock, 0, s>>>(in, out, n, p.d);
    } else {
      detail::scalar_kernel<T, A, true><<<grid, kBlock, 0, s>>>(in, out, n, p.d);
    }
  });
}

// ---- vectorized (the seed's design) ---------------------------------------------
void launch_vectorized(const Problem& p, const Buffers& b, Stream s) {
  if (empty(p)) return;
  dispatch(p, [&]<class T, Activation A>() {
    constexpr std::int64_t V = 16 / sizeof(T);
    // The seed's block: one thread per vector, at most 1024.
    const unsigned block = static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(p.d / V, 1024)));
    const unsigned grid = clamp_grid(p.tokens);
    detail::seed_kernel<T, A><<<grid, block, 0, s>>>(static_cast<const T*>(b.input), static_cast<T*>(b.out),
                                                     p.tokens, p.d, rows_aligned(p, b));
  });
}

// ---- flat / spread: one grid over all vectors --------------------------------------
// kUnroll vectors per thread, kBlock threads per block. Unaligned rows take the
// element-gather kernel with the same block size.
template <int kUnroll, unsigned kBlock, bool kPdl>
void launch_flat_grid(const Problem& p, const Buffers& b, Stream s) {
  if (empty(p)) return;
  dispatch(p, [&]<class T, Activation A>() {
    constexpr std::int64_t V = 16 / sizeof(T);
    auto in = static_cast<const T*>(b.input);
    auto out = static_cast<T*>(b.out);
    if (rows_aligned(p, b)) {
      const std::int64_t dv = p.d / V;
      const std::int64_t nvec = p.tokens * dv;
      const unsigned grid = clamp_grid(ceil_div<std::int64_t>(nvec, std::int64_t{kBlock} * kUnroll));
      if (nvec < kU32Limit) {
        launch_plain(kPdl, detail::flat_kernel<T, A, kUnroll, false, kPdl>, grid, kBlock, s, in, out, nvec, dv,
                     FastDivU32(static_cast<std::uint32_t>(dv)));
      } else {
        launch_plain(kPdl, detail::flat_kernel<T, A, kUnroll, true, kPdl>, grid, kBlock, s, in, out, nvec, dv,
                     FastDivU32());
      }
    } else {
      const std::int64_t n = p.tokens * p.d;
      const unsigned grid = clamp_grid(ceil_div<std::int64_t>(ceil_div<std::int64_t>(n, V), kBlock));
      const bool out_aligned = aligned16(b.out);
      if (n < kU32Limit) {
        launch_plain(kPdl, detail::flat_unaligned_kernel<T, A, false, kPdl>, grid, kBlock, s, in, out, n, p.d,
                     FastDivU32(static_cast<std::uint32_t>(p.d)), out_aligned);
      } else {
        launch_plain(kPdl, detail::flat_unaligned_kernel<T, A, true, kPdl>, grid, kBlock, s, in, out, n, p.d,
                     FastDivU32(), out_aligned);
      }
    }
  });
}

void launch_flat(const Problem& p, const Buffers& b, Stream s) { launch_flat_grid<4, 256, false>(p, b, s); }
void launch_spread(const Problem& p, const Buffers& b, Stream s) { launch_flat_grid<1, 64, false>(p, b, s); }
void launch_spread_pdl(const Problem& p, const Buffers& b, Stream s) { launch_flat_grid<1, 64, true>(p, b, s); }

const char* any_shape(const Problem&) { return nullptr; }
std::size_t no_workspace(const Problem&) { return 0; }

const std::array<Variant, 5> kVariants{{
    {{"scalar", "one element per thread per grid-stride step (baseline)", "any"},
     any_shape, no_workspace, launch_scalar},
    {{"vectorized",
      "the seed's design: one block per token, 16-byte converting loads/stores strided over d, "
      "scalar tail from d - d % (block*vec)",
      "any (rows with d % vec != 0 go element by element)"},
     any_shape, no_workspace, launch_vectorized},
    {{"flat",
      "one grid over all 16-byte output vectors (no tail recompute, short rows share blocks), "
      "4 vectors = 8 independent 16-byte loads in flight per thread, 256-thread blocks",
      "any (d % vec != 0: element gathers, 16-byte stores)"},
     any_shape, no_workspace, launch_flat},
    {{"spread",
      "latency layout of flat: 1 vector per thread, 64-thread blocks, so even one row covers many SMs",
      "any (d % vec != 0: element gathers, 16-byte stores)"},
     any_shape, no_workspace, launch_spread},
    {{"spread-pdl",
      "spread launched with Hopper programmatic dependent launch (overlaps the previous kernel's tail; "
      "no effect before sm_90)",
      "any"},
     any_shape, no_workspace, launch_spread_pdl},
}};

}  // namespace

std::span<const Variant> variants() { return kVariants; }

const Variant* find(std::string_view name) {
  for (const Variant& v : kVariants)
    if (v.info.name == name) return &v;
  return nullptr;
}

// Output bytes below which the spread layout wins (measured: docs/bench/act-and-mul.md).
constexpr std::int64_t kSpreadMaxOutBytes = std::int64_t{2} << 20;

const Variant& pick_auto(const Problem& p) {
  const std::int64_t elem = p.dtype == DType::f32 ? 4 : 2;
  const std::int64_t out_bytes = p.tokens * p.d * elem;
  return *find(out_bytes <= kSpreadMaxOutBytes ? "spread" : "flat");
}

std::string_view auto_rule() {
  return "spread when the output is at most 2 MiB (few tokens: latency), flat otherwise (bandwidth)";
}

}  // namespace moekit::act
