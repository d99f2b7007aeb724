// Launchers and registry of the combine family.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "combine/combine.hpp"
#include "combine/gather.cuh"
#include "combine/policy.hpp"
#include "combine/scatter.cuh"
#include "combine/slices.cuh"
#include "combine/tma.cuh"
#include "common/cuda_check.cuh"
#include "primitives/launch.cuh"
#include "primitives/smem.cuh"

namespace moekit::combine {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }


template <class T>
cudaError_t launch_typed(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  constexpr int V = static_cast<int>(16 / sizeof(T));
  auto x = static_cast<const T*>(b.expert_out);
  auto out = static_cast<T*>(b.out);
  const bool vec = p.hidden % V == 0 && aligned16(x) && aligned16(out);
  const std::int64_t per_thread = vec ? V : 1;
  const unsigned threads =
      static_cast<unsigned>(std::clamp<std::int64_t>((p.hidden / per_thread + 31) / 32 * 32, 32, 512));
  const unsigned grid = clamp_grid(p.tokens);
  if (vec)
    return prim::launch_ex(detail::gather_combine_kernel<T, V>, grid, threads, 0, s, prim::pdl_attrs(pdl), x, b.inverse,
                           b.weights, out, p.tokens, p.topk, p.hidden, p.scaling);
  return prim::launch_ex(detail::gather_combine_kernel<T, 1>, grid, threads, 0, s, prim::pdl_attrs(pdl), x, b.inverse, b.weights,
                         out, p.tokens, p.topk, p.hidden, p.scaling);
}

// The element type behind p.dtype, for one launcher template.
template <template <class> class L>
LaunchStatus by_dtype(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (p.tokens <= 0 || p.hidden <= 0) return cudaSuccess;
  switch (p.dtype) {
    case DType::f32: return L<float>::run(p, b, s, pdl);
    case DType::bf16: return L<__nv_bfloat16>::run(p, b, s, pdl);
    case DType::f16: return L<__half>::run(p, b, s, pdl);
  }
  return cudaErrorInvalidValue;
}

std::size_t esize(DType d) { return d == DType::f32 ? 4 : 2; }
std::size_t no_workspace(const Problem&, const DeviceCaps&) { return 0; }
const char* topk_na(const Problem& p, const DeviceCaps&) {
  return p.topk > detail::kMaxTopk ? "K > 64 (a token's rows and weights are staged in shared memory)" : nullptr;
}
std::string topk_limits(const DeviceCaps&) { return "K <= " + std::to_string(detail::kMaxTopk); }
// slices stages nothing (it reads K in chunks of its rows); it keeps the
// family's K <= 64, the range its GPU test covers.
const char* slices_na(const Problem& p, const DeviceCaps&) {
  return p.topk > detail::kMaxTopk ? "K > 64 (the range this variant is tested over)" : nullptr;
}

template <class T>
struct Gather {
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) { return launch_typed<T>(p, b, s, pdl); }
};

// slices: blocks of (column slice, kTok tokens), kRows fitted to K. Two
// tokens per block at K <= 2 where the policy's one-token grid band says
// (more loads in flight per thread, half the blocks; fitted in one probe).
template <class T>
struct Slices {
  // Column slices of a row: the grid's x, and its blocks per token.
  template <int kVec>
  static std::int64_t slice_count(const Problem& p) {
    return ceil_div<std::int64_t>(p.hidden, std::int64_t{detail::kSliceThreads} * kVec);
  }
  template <int kVec, int kRows, int kTok>
  static cudaError_t as(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    const std::int64_t slices = slice_count<kVec>(p);
    const std::int64_t groups = ceil_div<std::int64_t>(p.tokens, kTok);
    const dim3 grid(clamp_grid(slices), clamp_grid(groups, 65535));  // gridDim.y-strided beyond
    return prim::launch_ex(detail::slices_combine_kernel<T, kVec, kRows, kTok>, grid, detail::kSliceThreads, 0, s,
                           prim::pdl_attrs(pdl), static_cast<const T*>(b.expert_out), b.inverse, b.weights,
                           static_cast<T*>(b.out), p.tokens, p.topk, p.hidden, p.scaling);
  }
  template <int kVec>
  static cudaError_t fitted(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    if (p.topk <= 2) {
      const DeviceCaps& caps = device_caps();
      const Policy& pol = policy_for(caps);
      const std::int64_t blocks = slice_count<kVec>(p) * p.tokens;  // the one-token grid
      const std::int64_t sms = std::max(caps.sm_count, 1);
      const bool pair = blocks >= std::int64_t{pol.slices_pair_from_blocks_per_sm} * sms &&
                        blocks <= std::int64_t{pol.slices_pair_to_blocks_per_sm} * sms;
      return pair ? as<kVec, 2, 2>(p, b, s, pdl) : as<kVec, 2, 1>(p, b, s, pdl);
    }
    if (p.topk <= 4) return as<kVec, 4, 1>(p, b, s, pdl);
    return as<kVec, 8, 1>(p, b, s, pdl);
  }
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    constexpr int V = static_cast<int>(16 / sizeof(T));
    const bool vec = p.hidden % V == 0 && aligned16(b.expert_out) && aligned16(b.out);
    return vec ? fitted<V>(p, b, s, pdl) : fitted<1>(p, b, s, pdl);
  }
};

// tma: segment bytes so that K segments fit kTmaStageBytes, and small
// batches still make about one item per SM.
std::int64_t tma_segment_elems(const Problem& p, const DeviceCaps& caps) {
  const std::int64_t es = static_cast<std::int64_t>(esize(p.dtype));
  const std::int64_t row = p.hidden * es;
  std::int64_t seg = std::max<std::int64_t>(16, detail::kTmaStageBytes / std::max(p.topk, 1) / 16 * 16);
  const std::int64_t want_segs = ceil_div<std::int64_t>(std::max(caps.sm_count, 1), std::max<std::int64_t>(p.tokens, 1));
  seg = std::min(seg, std::max<std::int64_t>(512, ceil_div<std::int64_t>(ceil_div(row, want_segs), 16) * 16));
  return std::min(seg, row) / es;
}

template <class T>
struct Tma {
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    // Bulk copies need 16-byte aligned rows: a misaligned tensor takes slices' path.
    if (!aligned16(b.expert_out)) return Slices<T>::run(p, b, s, pdl);
    const DeviceCaps& caps = device_caps();
    const std::int64_t seg = tma_segment_elems(p, caps);
    const std::int64_t segs = ceil_div<std::int64_t>(p.hidden, seg);
    const std::size_t smem = static_cast<std::size_t>(p.topk) * static_cast<std::size_t>(seg) * sizeof(T);
    const Policy& pol = policy_for(caps);
    const unsigned grid =
        clamp_grid(std::min<std::int64_t>(p.tokens * segs, std::int64_t{pol.tma_blocks_per_sm} * caps.sm_count));
    return prim::launch_with_smem(detail::tma_combine_kernel<T>, grid, detail::kTmaThreads, smem, s, prim::pdl_attrs(pdl),
                                  static_cast<const T*>(b.expert_out), b.inverse, b.weights, static_cast<T*>(b.out),
                                  p.tokens, p.topk, p.hidden, seg, segs, p.scaling);
  }
};

const char* tma_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present() && caps.cc_major < 9) return "needs sm_90 (bulk copies)";
  if (const char* w = topk_na(p, caps)) return w;
  if (p.hidden * static_cast<std::int64_t>(esize(p.dtype)) % 16 != 0) return "needs H * element size a multiple of 16 bytes";
  return nullptr;
}
std::string tma_limits(const DeviceCaps&) {
  return "sm_90+, K <= " + std::to_string(detail::kMaxTopk) + ", H * element size a multiple of 16 bytes";
}

// scatter: workspace = row -> slot map (P int32) + f32 accumulators (T x H).
std::size_t scatter_map_bytes(const Problem& p) {
  return static_cast<std::size_t>(ceil_div<std::int64_t>(std::max<std::int64_t>(p.rows, 0) * 4, 256) * 256);
}
std::size_t scatter_workspace(const Problem& p, const DeviceCaps&) {
  return scatter_map_bytes(p) + static_cast<std::size_t>(std::max<std::int64_t>(p.tokens * p.hidden, 0)) * 4;
}

template <class T>
struct Scatter {
  static cudaError_t run(const Problem& p, const Buffers& b, Stream s, bool pdl) {
    auto* row_slot = static_cast<std::int32_t*>(b.workspace);
    auto* acc = reinterpret_cast<float*>(static_cast<char*>(b.workspace) + scatter_map_bytes(p));
    const std::int64_t n = p.tokens * p.hidden;
    if (p.rows > 0) {
      if (cudaError_t e = cudaMemsetAsync(row_slot, 0xff, std::size_t(p.rows) * 4, s); e != cudaSuccess) return e;
    }
    if (cudaError_t e = cudaMemsetAsync(acc, 0, std::size_t(n) * 4, s); e != cudaSuccess) return e;
    const int sms = std::max(device_caps().sm_count, 1);
    const std::int64_t slots = p.tokens * p.topk;
    // Right after the memsets: without the attribute (a memset node cannot be
    // a programmatic predecessor, primitives/pdl.cuh); the kernels after it
    // launch with PDL when asked.
    if (cudaError_t e = prim::launch_ex(detail::row_slots_kernel,
                                        clamp_grid(std::min<std::int64_t>(ceil_div<std::int64_t>(slots, 256), 4 * sms)),
                                        256, 0, s, prim::LaunchAttrs{}, b.inverse, slots, row_slot);
        e != cudaSuccess)
      return e;
    if (p.rows > 0) {
      auto x = static_cast<const T*>(b.expert_out);
      const unsigned threads = static_cast<unsigned>(std::clamp<std::int64_t>((p.hidden / 4 + 31) / 32 * 32, 32, 256));
      const unsigned grid = clamp_grid(std::min<std::int64_t>(p.rows, 8 * std::int64_t{sms}));
      const std::int32_t* map = row_slot;
      const cudaError_t e =
          p.hidden % 4 == 0
              ? prim::launch_ex(detail::scatter_rows_kernel<T, 4>, grid, threads, 0, s, prim::pdl_attrs(pdl), x, map, b.weights,
                                acc, p.rows, p.topk, p.hidden)
              : prim::launch_ex(detail::scatter_rows_kernel<T, 1>, grid, threads, 0, s, prim::pdl_attrs(pdl), x, map, b.weights,
                                acc, p.rows, p.topk, p.hidden);
      if (e != cudaSuccess) return e;
    }
    return prim::launch_ex(detail::finish_kernel<T>,
                           clamp_grid(std::min<std::int64_t>(ceil_div<std::int64_t>(n, 256), 8 * sms)), 256, 0, s,
                           prim::pdl_attrs(pdl), static_cast<const float*>(acc), static_cast<T*>(b.out), n, p.scaling);
  }
};
std::string any_limits(const DeviceCaps&) { return "any (inverse one-to-one, as permute writes it)"; }
const char* never_na(const Problem&, const DeviceCaps&) { return nullptr; }

const std::array<Variant, 4> kVariants{{
    {{"gather",
      "one block per token; each thread sums w * row over the token's K rows (j ascending, f32 fused "
      "multiply-adds, 16-byte row loads) and rounds once: bit for bit with the reference", "gather_combine_kernel"},
     true, topk_limits, topk_na, no_workspace, by_dtype<Gather>},
    {{"slices",
      "blocks of (column slice, token) spread small batches over the GPU; each thread reads the token's indices "
      "itself, loads 16-byte vectors of up to 8 rows (as many as K needs) before using any, then gather's "
      "arithmetic and one 16-byte store: bit for bit", "slices_combine_kernel"},
     true, topk_limits, slices_na, no_workspace, by_dtype<Slices>},
    {{"tma",
      "sm_90: one thread hands each row segment of a token to the copy engine (bulk loads into shared memory, "
      "one byte-counting barrier), the block sums them with gather's arithmetic: bit for bit (rows not 16-byte "
      "aligned: slices)", "tma_combine_kernel slices_combine_kernel"},
     true, tma_limits, tma_na, no_workspace, by_dtype<Tma>},
    {{"scatter",
      "from the experts' side: each expert row is read once and added, weighted, into its token's f32 "
      "accumulator with atomics, then scaled and rounded; order of additions varies (checked to a tolerance)", "row_slots_kernel scatter_rows_kernel finish_kernel"},
     false, any_limits, never_na, scatter_workspace, by_dtype<Scatter>},
}};

// slices was the fastest variant in every cell of the first H100 sweep
// (T 1-8192, K 2 and 8, H 4096 and 7168; docs/bench/combine-notes.md).
const std::array<AutoRow<Problem>, 1> kAutoRows = {{
    {"slices", "", nullptr},
}};

}  // namespace

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::combine
