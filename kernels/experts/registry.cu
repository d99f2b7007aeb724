// Launchers and registry of the experts family. Every variant is the same
// three stages in one stream (experts.hpp): the layout (permute's auto pick,
// or for a variant that gathers its rows, permute::index_only()), the
// variant's FFN, combine's auto pick. A variant differs only in its FFN and
// layout (the kFfns table, by name) and its FFN workspace.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "common/cuda_check.cuh"
#include "common/fits_smem.hpp"
#include "common/workspace_slices.hpp"
#include "experts/decode.cuh"
#include "experts/fused.cuh"
#include "experts/act_rows.cuh"
#include "experts/cublas.cuh"
#include "experts/experts.hpp"
#include "experts/grouped.hpp"
#include "experts/mma.cuh"
#include "experts/naive.cuh"
#include "experts/weights.hpp"
#include "primitives/launch.cuh"

namespace moekit::experts {
namespace gen_detail {

// One block per matrix row (of all experts), threads over its columns.
// `global`: the id each expert's values are keyed by (nullptr: its index).
template <class T>
__global__ void generate_kernel(T* __restrict__ w, std::uint64_t seed, int matrix, std::int64_t experts,
                                std::int64_t rows, std::int64_t cols, float scale,
                                const std::int32_t* __restrict__ global) {
  for (std::int64_t R = blockIdx.x; R < experts * rows; R += gridDim.x) {
    const std::int64_t e = R / rows, r = R % rows;
    const std::int64_t key = global != nullptr ? global[e] : e;
    for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      w[R * cols + c] = from_f32<T>(weight_value(seed, matrix, key, r, c, rows, cols, scale));
  }
}
}  // namespace gen_detail

namespace {

// ---- the FFN of each variant ----------------------------------------------

using FfnLaunch = LaunchStatus (*)(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl);
using FfnWorkspace = std::size_t (*)(const Problem& p, const DeviceCaps& caps);

// naive: gemm1 + act into `a` [rows, I] (the FFN workspace), then gemm2.
// kGather: gemm1 reads hidden through sorted_token_ids (gather's fallback).
std::size_t naive_ws(const Problem& p, const DeviceCaps&) {
  return std::size_t(p.rows()) * std::size_t(p.inter) * p.element_bytes();
}
template <class T, bool kGather = false>
LaunchStatus naive_typed(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  const RowMap m = row_map(p, b);
  T* a = static_cast<T*>(ws);
  const unsigned rows = static_cast<unsigned>(p.rows());
  const dim3 g1(rows, static_cast<unsigned>(ceil_div<std::int64_t>(p.inter, naive::kWarps)));
  if (const cudaError_t e =
          prim::launch_ex(naive::gemm1_act_kernel<T, kGather>, g1, naive::kWarps * 32, 0, s, prim::pdl_attrs(pdl),
                          static_cast<const T*>(kGather ? b.hidden : b.permuted), static_cast<const T*>(b.w1), a, m,
                          p.experts, p.hidden,
                          p.inter, p.act, p.w1_layout);
      e != cudaSuccess)
    return e;
  const dim3 g2(rows, static_cast<unsigned>(ceil_div<std::int64_t>(p.hidden, naive::kWarps)));
  return prim::launch_ex(naive::gemm2_kernel<T>, g2, naive::kWarps * 32, 0, s, prim::pdl_attrs(pdl),
                         static_cast<const T*>(a), static_cast<const T*>(b.w2), static_cast<T*>(b.y), m, p.experts,
                         p.hidden, p.inter);
}
LaunchStatus naive_ffn(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  return p.dtype == DType::bf16 ? naive_typed<__nv_bfloat16>(p, b, ws, s, pdl) : naive_typed<__half>(p, b, ws, s, pdl);
}

// mma: a device-built tile list, then the two tensor-core GEMMs (mma.cuh),
// gemm1 with act-and-mul fused into its epilogue, writing `a` in the
// workspace. Base pointers that are not 16-byte aligned take naive's kernels
// (the workspace is larger than naive's, `a` at its start). kGather (gather):
// gemm1's rows come from hidden through sorted_token_ids, not from permuted.
std::size_t mma_ws(const Problem& p, const DeviceCaps&) {
  return mma::ws_layout(p).total;
}
bool aligned16(const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; }
template <class T, bool kGather = false>
LaunchStatus mma_typed(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  const void* x = kGather ? b.hidden : b.permuted;
  if (!aligned16(x) || !aligned16(b.w1) || !aligned16(b.w2) || !aligned16(b.y) || !aligned16(ws))
    return naive_typed<T, kGather>(p, b, ws, s, pdl);
  const RowMap m = row_map(p, b);
  const mma::WsLayout l = mma::ws_layout(p);
  char* w = static_cast<char*>(ws);
  int* count = reinterpret_cast<int*>(w);
  int4* tiles = reinterpret_cast<int4*>(w + l.tiles);
  T* a = reinterpret_cast<T*>(w + l.a);
  const int cap = static_cast<int>(mma::tile_capacity(p));
  const int H = static_cast<int>(p.hidden), I = static_cast<int>(p.inter);
  if (const cudaError_t e = prim::launch_ex(mma::mma_tile_list_kernel, dim3(1), mma::kPrepThreads, 0, s,
                                            prim::pdl_attrs(pdl), m, p.experts, static_cast<int>(p.rows()), cap,
                                            count, tiles, reinterpret_cast<int*>(w + l.begin),
                                            reinterpret_cast<int*>(w + l.end), reinterpret_cast<int*>(w + l.first));
      e != cudaSuccess)
    return e;
  const int cols1 = ceil_div(I, mma::kGateCols), cols2 = ceil_div(H, mma::kBN);
  if (const cudaError_t e = prim::launch_with_smem(
          mma::mma_gemm1_act_kernel<T, kGather>, dim3(static_cast<unsigned>(cap) * static_cast<unsigned>(cols1)),
          mma::kThreads, mma::kSmemBytes, s, prim::pdl_attrs(pdl), static_cast<const int*>(count),
          static_cast<const int4*>(tiles), cap, cols1, static_cast<const T*>(x),
          static_cast<const T*>(b.w1), a, m, H, I, p.act, p.w1_layout);
      e != cudaSuccess)
    return e;
  return prim::launch_with_smem(mma::mma_gemm2_kernel<T>,
                                dim3(static_cast<unsigned>(cap) * static_cast<unsigned>(cols2)), mma::kThreads,
                                mma::kSmemBytes, s, prim::pdl_attrs(pdl), static_cast<const int*>(count),
                                static_cast<const int4*>(tiles), cap, cols2, static_cast<const T*>(a),
                                static_cast<const T*>(b.w2), static_cast<T*>(b.y), m, H, I);
}
LaunchStatus mma_ffn(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  return p.dtype == DType::bf16 ? mma_typed<__nv_bfloat16>(p, b, ws, s, pdl) : mma_typed<__half>(p, b, ws, s, pdl);
}
// gather: mma's kernels, gemm1 loading its rows from hidden (mma.cuh).
LaunchStatus gather_ffn(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  return p.dtype == DType::bf16 ? mma_typed<__nv_bfloat16, true>(p, b, ws, s, pdl)
                                : mma_typed<__half, true>(p, b, ws, s, pdl);
}

// decode: the weight stream (decode.cuh), gemm1 + act into `a` [rows, I] (the
// FFN workspace, as naive's), then gemm2; persistent grids of SMs x occupancy.

// Rows per group (8 * NT): enough for a little above the mean rows per
// active expert when routing spreads T * K slots over min(E, T * K) experts,
// and never more than T (a token's K experts are distinct in any routing a
// router makes; where they are not, the row loop takes another group).
int decode_nt(const Problem& p) {
  const double slots = static_cast<double>(p.tokens) * p.topk;
  const double active = std::max(1.0, std::min<double>(p.experts, slots));
  const double mean = slots / active;
  const double rows = std::min(mean + 2.0 * std::sqrt(mean) + 1.0, static_cast<double>(p.tokens));
  return rows <= 8.0 ? 1 : rows <= 16.0 ? 2 : 4;
}
// k-slices per CTA: as many as keep kMinSlice of the reduction each, and at
// most 8 / NT, so a CTA's item is at least NT column groups wide: the
// activation rows an item reads from L2 (rows x K) stay within a quarter of
// its weight bytes (NT * 8 rows against NT * 32 weight rows).
int decode_ks(std::int64_t k, int nt) {
  for (int ks = decode::kWarps / nt; ks > 1; ks /= 2)
    if (k >= std::int64_t(ks) * decode::kMinSlice) return ks;
  return 1;
}
template <class Kernel>
cudaError_t decode_blocks_per_sm(Kernel* kernel, std::size_t smem, int* n) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, std::size_t>, int> memo;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device_caps().ordinal, reinterpret_cast<const void*>(kernel), smem);
  if (const auto it = memo.find(key); it != memo.end()) {
    *n = it->second;
    return cudaSuccess;
  }
  int v = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, decode::kThreads, smem);
      e != cudaSuccess)
    return e;
  *n = std::max(v, 1);
  memo.emplace(key, *n);
  return cudaSuccess;
}
// One persistent launch over (active expert, tile) items, `tiles` an expert:
// at most min(E, T * K) experts are active, and the grid is never larger
// than what is resident at once (fused's waits need every CTA resident).
template <class Kernel, class Args>
cudaError_t persistent_launch(Kernel* kernel, std::size_t smem, const Problem& p, std::int64_t tiles, const Args& a,
                              Stream s, bool pdl) {
  int per_sm = 1;
  if (const cudaError_t e = decode_blocks_per_sm(kernel, smem, &per_sm); e != cudaSuccess) return e;
  const std::int64_t active =
      std::max<std::int64_t>(1, std::min<std::int64_t>(p.experts, p.tokens * std::int64_t(p.topk)));
  const std::int64_t resident = std::int64_t(std::max(device_caps().sm_count, 1)) * per_sm;
  const unsigned grid = static_cast<unsigned>(std::max<std::int64_t>(1, std::min(active * tiles, resident)));
  return prim::launch_ex(kernel, dim3(grid), dim3(decode::kThreads), smem, s, prim::pdl_attrs(pdl), a);
}
template <class Kernel>
cudaError_t decode_launch(Kernel* kernel, std::size_t smem, const Problem& p, const decode::Args& a, Stream s,
                          bool pdl) {
  return persistent_launch(kernel, smem, p, a.tiles, a, s, pdl);
}
// The plan of one weight stream (decode.cuh's Args, pointers and the row map
// left to the caller): gemm1 reads rows of H and W1 into a [rows, I], gemm2
// reads a and W2 into y [rows, H]; k-slices and tiles for NT rows a group.
decode::Args stream_args(const Problem& p, bool gemm1, int nt) {
  decode::Args a;
  a.experts = p.experts;
  a.k_len = gemm1 ? p.hidden : p.inter;
  a.n_out = gemm1 ? p.inter : p.hidden;
  a.ks = decode_ks(a.k_len, nt);
  a.tiles = static_cast<int>(ceil_div<std::int64_t>(a.n_out, decode::tile_cols(a.ks, gemm1)));
  a.act = p.act;
  a.layout = p.w1_layout;
  return a;
}
template <class T, int NT>
LaunchStatus decode_typed(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  decode::Args a1 = stream_args(p, true, NT);
  a1.x = b.permuted;
  a1.w = b.w1;
  a1.out = ws;
  a1.map = row_map(p, b);
  const bool vec1 = aligned16(b.permuted) && aligned16(b.w1) && p.hidden % 8 == 0;
  const std::size_t smem1 = decode::smem_bytes<NT>(a1.ks);
  const cudaError_t e1 = vec1 ? decode_launch(decode::decode_gemm1_act_kernel<T, NT, true>, smem1, p, a1, s, pdl)
                              : decode_launch(decode::decode_gemm1_act_kernel<T, NT, false>, smem1, p, a1, s, pdl);
  if (e1 != cudaSuccess) return e1;
  decode::Args a2 = stream_args(p, false, NT);
  a2.x = ws;
  a2.w = b.w2;
  a2.out = b.y;
  a2.map = a1.map;
  const bool vec2 = aligned16(ws) && aligned16(b.w2) && p.inter % 8 == 0;
  const std::size_t smem2 = decode::smem_bytes<NT>(a2.ks);
  return vec2 ? decode_launch(decode::decode_gemm2_kernel<T, NT, true>, smem2, p, a2, s, pdl)
              : decode_launch(decode::decode_gemm2_kernel<T, NT, false>, smem2, p, a2, s, pdl);
}
template <class T>
LaunchStatus decode_dtype(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  switch (decode_nt(p)) {
    case 1: return decode_typed<T, 1>(p, b, ws, s, pdl);
    case 2: return decode_typed<T, 2>(p, b, ws, s, pdl);
    default: return decode_typed<T, 4>(p, b, ws, s, pdl);
  }
}
LaunchStatus decode_ffn(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  return p.dtype == DType::bf16 ? decode_dtype<__nv_bfloat16>(p, b, ws, s, pdl)
                                : decode_dtype<__half>(p, b, ws, s, pdl);
}
// The largest shared memory a decode launch asks for stays below the 48 KiB
// that needs no opt-in.
static_assert(decode::smem_bytes<4>(2) <= 48 * 1024 && decode::smem_bytes<4>(4) <= 48 * 1024 &&
              decode::smem_bytes<4>(8) <= 48 * 1024);

// fused: the whole computation in one kernel for T * K <= 256 (fused.cuh):
// decode's streams over the slots, no layout, the combine inside. Its
// workspace: the counters (kept zero between launches), then a [T * K, I].
struct FusedPlan {
  int nt = 1;
  decode::Args g1, g2;  // the two streams' plans (stream_args), pointers set at launch
  std::size_t counter_bytes = 0, a_offset = 0, total = 0;
};
FusedPlan fused_plan(const Problem& p) {
  FusedPlan f;
  f.nt = decode_nt(p);
  f.g1 = stream_args(p, true, f.nt);
  f.g2 = stream_args(p, false, f.nt);
  f.counter_bytes = fused::counter_words(f.g2.tiles) * sizeof(unsigned);
  f.a_offset = ceil_div<std::size_t>(f.counter_bytes, 256) * 256;
  f.total = f.a_offset + std::size_t(p.tokens) * std::size_t(p.topk) * std::size_t(p.inter) * p.element_bytes();
  return f;
}
std::size_t fused_ws(const Problem& p, const DeviceCaps&) { return fused_plan(p).total; }
template <class T, int NT, bool kVec>
LaunchStatus fused_launch(const Problem& p, const Buffers& b, void* ws, const FusedPlan& f, Stream s, bool pdl) {
  fused::Args a;
  char* w = static_cast<char*>(ws);
  a.g1 = f.g1;
  a.g1.x = b.hidden;
  a.g1.w = b.w1;
  a.g1.out = w + f.a_offset;
  a.g2 = f.g2;
  a.g2.x = w + f.a_offset;
  a.g2.w = b.w2;
  a.g2.out = b.y;
  a.ids = b.topk_ids;
  a.weights = b.topk_weights;
  a.expert_map = b.expert_map;
  a.map_size = p.permute.align.map_size;
  a.inverse = b.inverse;
  a.out = b.out;
  a.counters = reinterpret_cast<unsigned*>(w);
  a.tokens = static_cast<int>(p.tokens);
  a.topk = p.topk;
  a.scaling = p.combine.scaling;
  a.vec_out = aligned16(b.y) && aligned16(b.out) && p.hidden % 8 == 0;
  // The L2 prefetch budget: half the L2 (the device's own size) in W2 tiles.
  const std::int64_t tile_bytes = decode::tile_cols(f.g2.ks, false) * p.inter * std::int64_t(p.element_bytes());
  a.prefetch_items = device_caps().arch() >= 90 ? std::int64_t(device_caps().l2_bytes / 2) / tile_bytes : 0;
  const std::size_t smem = fused::smem_bytes<NT>(f.g1.ks, f.g2.ks);
  return persistent_launch(fused::fused_kernel<T, NT, kVec>, smem, p, std::int64_t(f.g1.tiles) + f.g2.tiles, a, s,
                           pdl);
}
template <class T>
LaunchStatus fused_typed(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  const FusedPlan f = fused_plan(p);
  const char* a = static_cast<const char*>(ws) + f.a_offset;
  const bool vec = aligned16(b.hidden) && aligned16(b.w1) && aligned16(b.w2) && aligned16(a) && p.hidden % 8 == 0 &&
                   p.inter % 8 == 0;
  if (!vec) return fused_launch<T, 1, false>(p, b, ws, f, s, pdl);  // right, not fast: odd shapes
  switch (f.nt) {
    case 1: return fused_launch<T, 1, true>(p, b, ws, f, s, pdl);
    case 2: return fused_launch<T, 2, true>(p, b, ws, f, s, pdl);
    default: return fused_launch<T, 4, true>(p, b, ws, f, s, pdl);
  }
}
LaunchStatus fused_ffn(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  // The kernel lists a slot a thread: more would be lost (and read its lists
  // out of bounds). not_applicable refuses them; a stage launched past it too.
  if (p.tokens * std::int64_t(p.topk) > fused::kMaxSlots) return cudaErrorInvalidValue;
  return p.dtype == DType::bf16 ? fused_typed<__nv_bfloat16>(p, b, ws, s, pdl) : fused_typed<__half>(p, b, ws, s, pdl);
}
static_assert(fused::smem_bytes<4>(2, 2) <= 40 * 1024 && fused::smem_bytes<1>(8, 8) <= 40 * 1024,
              "fused's dynamic shared memory with its ~6 KiB of static lists stays below 48 KiB");

struct Ffn {
  std::string_view name;
  FfnLaunch launch;
  FfnWorkspace workspace;
  // The layout stage: false = permute's auto pick (the rows copied into
  // permuted); true = permute::index_only() (align and the inverse map, no
  // copy: the FFN reads hidden through sorted_token_ids itself).
  bool gathers = false;
  // No layout and no combine stage: the FFN lists the slots from topk_ids and
  // writes out itself (fused).
  bool whole = false;
};
// grouped: CUTLASS's sm_90a grouped GEMM over device-side problem shapes
// (grouped.hpp; its translation unit is the only one that includes CUTLASS).
// cublas: cuBLAS's grouped GEMM (cublas.cuh; cublas.cu is the only one that
// includes cuBLAS).
constexpr std::array<Ffn, 7> kFfns{{
    {"naive", naive_ffn, naive_ws},
    {"grouped", grouped::launch, grouped::workspace_bytes},
    {"mma", mma_ffn, mma_ws},
    {"decode", decode_ffn, naive_ws},
    {"cublas", cublas::ffn, cublas::workspace_bytes},
    {"gather", gather_ffn, mma_ws, /*gathers=*/true},
    {"fused", fused_ffn, fused_ws, /*gathers=*/false, /*whole=*/true},
}};
const Ffn* ffn_of(std::string_view name) {
  for (const Ffn& f : kFfns)
    if (f.name == name) return &f;
  return nullptr;
}

// ---- the stages around it ---------------------------------------------------

// The layout and combine stages' families' auto rows read no PDL (as
// moe_path's), so the picks asked without it size the workspace and launch alike.
const permute::Variant& permute_pick(const Problem& p, const DeviceCaps& caps) {
  return permute::registry().pick_auto(p.permute, caps, false);
}
const combine::Variant& combine_pick(const Problem& p, const DeviceCaps& caps) {
  return combine::registry().pick_auto(p.combine, caps, false);
}
const permute::Variant& layout_for(const Ffn& f, const Problem& p, const DeviceCaps& caps) {
  return f.gathers ? permute::index_only() : permute_pick(p, caps);
}

// Workspace slices: permute's (first: the part a zeroed workspace keeps zero),
// combine's, the FFN's.
using Slices = WorkspaceSlices<3>;
// A whole FFN (fused) has neither: its own slice starts the workspace.
Slices slices(const Ffn& f, const Problem& p, const DeviceCaps& caps) {
  Slices s;
  s.bytes[0] = f.whole ? 0 : layout_for(f, p, caps).workspace_bytes(p.permute, caps);
  s.bytes[1] = f.whole ? 0 : combine_pick(p, caps).workspace_bytes(p.combine, caps);
  s.bytes[2] = f.workspace(p, caps);
  s.place();
  return s;
}

// One stage with the workspace cut as `sl` (slices(f, p, caps), planned once per launch).
LaunchStatus run_stage(const Ffn& f, const Problem& p, const Buffers& b, const Slices& sl, Stage st, Stream s,
                       bool pdl) {
  const DeviceCaps& caps = device_caps();
  if (f.whole && st != Stage::ffn) return cudaSuccess;  // not among its stages (stages_of)
  switch (st) {
    case Stage::layout:
      return layout_for(f, p, caps).launch(p.permute, permute::buffers_of(b, sl.at(b.workspace, 0)), s, pdl);
    case Stage::ffn:
      if (p.rows() == 0) return cudaSuccess;
      return f.launch(p, b, sl.at(b.workspace, 2), s, pdl);
    case Stage::combine: {
      combine::Buffers cb;
      cb.expert_out = b.y;
      cb.inverse = b.inverse;
      cb.weights = b.topk_weights;
      cb.out = b.out;
      cb.workspace = sl.at(b.workspace, 1);
      return combine_pick(p, caps).launch(p.combine, cb, s, pdl);
    }
  }
  return cudaErrorInvalidValue;
}

constexpr std::array<Stage, 3> kStages = {Stage::layout, Stage::ffn, Stage::combine};
constexpr std::array<Stage, 1> kWholeStages = {Stage::ffn};
constexpr std::span<const Stage> stages_of(const Ffn& f) {
  return f.whole ? std::span<const Stage>(kWholeStages) : std::span<const Stage>(kStages);
}

template <std::size_t kIndex>
LaunchStatus launch_variant(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  if (p.tokens == 0) return cudaSuccess;
  const Slices sl = slices(kFfns[kIndex], p, device_caps());
  for (Stage st : stages_of(kFfns[kIndex]))
    if (const LaunchStatus e = run_stage(kFfns[kIndex], p, b, sl, st, s, pdl); e != 0) return e;
  return cudaSuccess;
}
template <std::size_t kIndex>
std::size_t workspace_of(const Problem& p, const DeviceCaps& caps) {
  return slices(kFfns[kIndex], p, caps).total;
}

// permute's auto pick may keep its workspace zero (align's counters at large
// T*K): its slice comes first, so the variant promises a zeroed workspace then
// and keeps that prefix zero (zeroed_workspace_bytes); the FFN's own slice
// behind it holds whatever the FFN wrote. combine's pick never keeps one zero;
// one that did is refused rather than shared.
const char* stages_na_with(const permute::Variant& layout, const Problem& p, const DeviceCaps& caps) {
  if (const char* why = layout.not_applicable(p.permute, caps)) return why;
  if (const char* why = combine_pick(p, caps).not_applicable(p.combine, caps)) return why;
  if (needs_zeroed_workspace(combine_pick(p, caps), p.combine, caps))
    return "combine's auto pick keeps a zeroed workspace (not supported)";
  return nullptr;
}
const char* stages_na(const Problem& p, const DeviceCaps& caps) { return stages_na_with(permute_pick(p, caps), p, caps); }
bool stages_zeroed(const Problem& p, const DeviceCaps& caps) {
  return needs_zeroed_workspace(permute_pick(p, caps), p.permute, caps);
}
bool index_zeroed(const Problem& p, const DeviceCaps& caps) {
  return needs_zeroed_workspace(permute::index_only(), p.permute, caps);
}

std::string stages_limits(const DeviceCaps& caps) {
  const combine::Variant* c = combine::registry().find(combine::registry().auto_rows().back().variant);
  return "any T, E, H, I with 2*I*H < 2^31; permute's and align's limits; combine " +
         (c != nullptr ? c->limits(caps) : std::string("?"));
}

const char* grouped_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = grouped::not_applicable(p, caps)) return why;
  return stages_na(p, caps);
}
std::string grouped_limits(const DeviceCaps& caps) {
  if (const char* why = grouped::not_built()) return why;
  return std::string(grouped::limits_text()) + "; " + stages_limits(caps);
}
// decode's mma.sync with bf16 operands needs sm_80.
const char* decode_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present() && caps.arch() < 80) return "needs sm_80 or newer (mma.sync on bf16/f16)";
  return stages_na(p, caps);
}
std::string decode_limits(const DeviceCaps& caps) { return stages_limits(caps) + "; sm_80 or newer"; }

// mma's own limits beyond the stages': sm_80+, 16-byte rows, its grids
// (tile_capacity times the column tiles) under 2^31 blocks, its
// shared memory.
std::int64_t mma_grid_blocks(const Problem& p) {
  const std::int64_t cols =
      std::max(ceil_div<std::int64_t>(p.inter, mma::kGateCols), ceil_div<std::int64_t>(p.hidden, mma::kBN));
  return mma::tile_capacity(p) * cols;
}
const char* mma_own_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present() && caps.arch() < 80) return "needs sm_80 or newer (mma.sync with bf16/f16 inputs, cp.async)";
  if (p.hidden % 8 != 0 || p.inter % 8 != 0)
    return "H and I must be multiples of 8 (cp.async copies rows in 16-byte pieces)";
  if (mma_grid_blocks(p) > 0x7fffffffLL)
    return "too many tiles for one grid (ceil(rows / 128) + min(E, T * K), times the column tiles)";
  if (!fits_smem(caps, mma::kSmemBytes)) return "needs 64 KiB of shared memory per block";
  return nullptr;
}
const char* mma_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = stages_na(p, caps)) return why;
  return mma_own_na(p, caps);
}
std::string mma_own_limits() {
  return "sm_80+; H and I multiples of 8; tiles of " + std::to_string(mma::kBM) + " rows x " +
         std::to_string(mma::kBN) + " columns, " + std::to_string(mma::kSmemBytes / 1024) +
         " KiB of shared memory a block";
}
std::string mma_limits(const DeviceCaps& caps) { return mma_own_limits() + "; " + stages_limits(caps); }

// gather: the padded layout only (its rows are named by sorted_token_ids);
// the index-only layout's limits (align's), combine's, then mma's own.
const char* gather_na(const Problem& p, const DeviceCaps& caps) {
  if (p.permute.layout != permute::Layout::padded) return "needs --layout padded (it gathers through sorted_token_ids)";
  if (const char* why = stages_na_with(permute::index_only(), p, caps)) return why;
  return mma_own_na(p, caps);
}
std::string gather_limits(const DeviceCaps& caps) {
  const combine::Variant* c = combine::registry().find(combine::registry().auto_rows().back().variant);
  return "--layout padded; " + mma_own_limits() + "; any T, E, H, I with 2*I*H < 2^31; align's limits; combine " +
         (c != nullptr ? c->limits(caps) : std::string("?"));
}

// cublas: the compact layout only, sizes within cuBLAS's int; then the stages'.
const char* cublas_na(const Problem& p, const DeviceCaps& caps) {
  if (const char* why = cublas::not_applicable(p, caps)) return why;
  return stages_na(p, caps);
}
std::string cublas_limits(const DeviceCaps& caps) {
  return "--layout compact; rows (T*K), 2*I and H < 2^31 (cuBLAS's int sizes); cuBLAS 12.5 or newer; " +
         stages_limits(caps);
}

// fused: T * K within one slot a thread, sm_80+ (decode's mma.sync); no
// layout or combine stage to ask.
const char* fused_na(const Problem& p, const DeviceCaps& caps) {
  if (caps.present() && caps.arch() < 80) return "needs sm_80 or newer (mma.sync on bf16/f16)";
  if (p.tokens * std::int64_t(p.topk) > fused::kMaxSlots) return "needs T * K <= 256 (a slot a thread when listing)";
  return nullptr;
}
std::string fused_limits(const DeviceCaps&) {
  return "T * K <= " + std::to_string(fused::kMaxSlots) +
         "; any E, H, I with 2*I*H < 2^31; sm_80 or newer; every CTA of its grid resident at once (sized so)";
}
bool fused_zeroed(const Problem&, const DeviceCaps&) { return true; }

constexpr std::array<Variant, 7> kVariants{{
    {{"naive",
      "plain SIMT kernels, one warp per output element: gemm1 (gate and up dot products over H, the "
      "activation) into a [rows, I] workspace, then gemm2; every architecture; between permute's and combine's "
      "auto picks",
      "permute:* gemm1_act_kernel<false> gemm2_kernel combine:*"},
     false, stages_limits, stages_na, workspace_of<0>, launch_variant<0>, stages_zeroed},
    {{"grouped",
      "moekit's sm_90a grouped GEMM (CUTLASS 3.x ptr-array kernel: TMA + WGMMA, persistent group tile scheduler) on "
      "the compact layout, problem shapes built on the device from expert_offsets (no host sync; experts with no "
      "rows get no tiles): gemm1 into h [rows, 2I], act-and-mul into a [rows, I], gemm2 into y; between permute's "
      "and combine's auto picks",
      grouped::kKernelSpec},
     false, grouped_limits, grouped_na, workspace_of<1>, launch_variant<1>, stages_zeroed},
    {{"mma",
      "tensor cores without CUTLASS (sm_80, sm_90): a one-block kernel lists (expert, 128-row) tiles on the "
      "device, then mma.sync grouped GEMMs with 4-stage cp.async pipelines: gemm1 computes gate and up of the "
      "same columns in one CTA and applies the activation in its epilogue, gemm2 writes y; naive's kernels "
      "where a base pointer is not 16-byte aligned",
      "permute:* mma_tile_list_kernel mma_gemm1_act_kernel<false> mma_gemm2_kernel @naive combine:*"},
     false, mma_limits, mma_na, workspace_of<2>, launch_variant<2>, stages_zeroed},
    {{"decode",
      "weight streaming for small T: tensor-core (mma.sync) swap-AB kernels that read each active expert's W1 "
      "and W2 once, 16-byte loads straight into the fragments, the k split over a CTA's warps, persistent grids "
      "over the active experts each CTA lists from the layout (no host sync); gemm1 + act into a [rows, I], "
      "then gemm2; rows in groups of up to 32 (more rows re-stream the tile: right, but slow)",
      "permute:* decode_gemm1_act_kernel decode_gemm2_kernel combine:*"},
     false, decode_limits, decode_na, workspace_of<3>, launch_variant<3>, stages_zeroed},
    {{"cublas",
      "the vendor baseline: cuBLAS grouped GEMMs (cublasGemmGroupedBatchedEx, one group per expert with rows) "
      "for gemm1 and gemm2 around an act-and-mul kernel, compact layout only; cuBLAS takes the row counts on "
      "the host, so every launch copies expert_offsets back and waits for them (timed with events, never "
      "captured into a CUDA graph); every architecture cuBLAS runs on",
      "permute:* act_rows_kernel combine:*"},
     false, cublas_limits, cublas_na, workspace_of<4>, launch_variant<4>, stages_zeroed, false, /*host_sync=*/true},
    {{"gather",
      "the fused_moe shape on the padded layout, no row copy: the layout stage is align (auto) and the inverse map "
      "alone (permute's index-only pass), then mma's tile list and GEMMs with gemm1 loading its A rows straight "
      "from hidden through sorted_token_ids (cp.async; padding rows zero-filled), act-and-mul in its epilogue, "
      "gemm2 writing y in the padded row order; naive's kernels, gathering too, where a base pointer is not "
      "16-byte aligned",
      "align:auto rows_pass_kernel<uint4> mma_tile_list_kernel mma_gemm1_act_kernel<true> mma_gemm2_kernel "
      "gemm1_act_kernel<true> gemm2_kernel combine:*"},
     false, gather_limits, gather_na, workspace_of<5>, launch_variant<5>, index_zeroed},
    {{"fused",
      "the whole expert computation of a small batch in one persistent kernel, no layout or combine launch: "
      "every CTA lists the slots by expert from topk_ids itself, then decode's weight streams (gemm1 + act, gemm2) "
      "over (expert, tile) items with the slot as the row, each gemm2 item waiting only for its own expert's "
      "gemm1 tiles (its first W2 batch already loading), and after its items CTA c waits for column tile c of y and sums it "
      "into out (combine's rule); y in slot order (row t*K+j), T*K <= 256",
      "fused_kernel"},
     false, fused_limits, fused_na, workspace_of<6>, launch_variant<6>, fused_zeroed},
}};
// launch_variant<i> and workspace_of<i> run kFfns[i]: the two tables line up by name.
static_assert([] {
  for (std::size_t i = 0; i < kVariants.size(); ++i)
    if (kVariants[i].info.name != kFfns[i].name) return false;
  return kVariants.size() == kFfns.size();
}(), "kVariants and kFfns must list the same variants in the same order");

// decode while the experts with rows hold fewer than 16 each (T*K < 16 *
// min(E, T*K): its rows come in groups of at most 32 and its tiles are
// register-fed); then the tensor-core GEMMs, CUTLASS's where built (sm_90a),
// mma elsewhere; naive last. The boundary is fitted on H200 cells against
// grouped's 64-row tiles (twentieth session, docs/bench/experts-notes.md,
// "grouped tile shapes"): decode won at 2-8 rows an expert (by 1-7 %),
// grouped at 16 (Mixtral T 64 by 3 %, Qwen3-235B T 256 by 7 %). No sm_80
// measurement yet: there mma follows decode at the same boundary.
bool few_rows(const Problem& p, const DeviceCaps&) {
  const std::int64_t slots = p.tokens * p.topk;
  return slots < 16 * std::min<std::int64_t>(p.experts, std::max<std::int64_t>(slots, 1));
}
// fused before it on sm_90 while T*K <= 32 (and rows are few): fitted on the
// same H200 (twenty-first session, docs/bench/experts-notes.md, "fused"): it
// won at T*K 8-32 (TP8 shard T 1: 2-6 %, T 4: 2-3 %; Qwen3-235B T 1, Mixtral
// T 4: 2 %). Past 32 slots, at one row group (decode_nt 1), the two sm_90
// parts measured part ways: on that H200 fused lost 0.8-1.4 % at 128 slots
// (Qwen3-235B and DeepSeek-V3 T 16; the shard level; bench/results/
// experts.jsonl), on an H100 (twenty-second session, notes "H100") it won
// 0.2-2.4 % at 64-256 slots. The rule's quantity is the DRAM peak an SM
// shares: 25 GB/s on the H100, 37 on the H200; unknown (0), the old rule
// holds. Only sm_90 was measured, so only sm_90 takes the wider rule. No
// sm_80 measurement (and no PDL or L2 prefetch there): decode stays.
constexpr double kFusedWideMaxGbpsPerSm = 30.0;
bool fused_fits(const Problem& p, const DeviceCaps& caps) {
  if (caps.arch() < 90 || !few_rows(p, caps)) return false;
  const std::int64_t slots = p.tokens * p.topk;
  if (slots <= 32) return true;
  const double per_sm = caps.sm_count > 0 ? caps.dram_peak_gbps / caps.sm_count : 0.0;
  return caps.cc_major == 9 && slots <= fused::kMaxSlots && decode_nt(p) == 1 && per_sm > 0.0 &&
         per_sm < kFusedWideMaxGbpsPerSm;
}
const std::array<AutoRow<Problem>, 5> kAutoRows = {{
    {"fused",
     "sm_90+, T*K < 16 * min(E, T*K), and T*K <= 32, or on sm_90 T*K <= 256 at one row group where the DRAM "
     "peak is under 30 GB/s an SM",
     fused_fits},
    {"decode", "T*K < 16 * min(E, T*K)", few_rows},
    {"grouped", "", nullptr},
    {"mma", "", nullptr},
    {"naive", "", nullptr},
}};


// ---- generated weights --------------------------------------------------------

template <class T>
LaunchStatus generate_typed(const Problem& p, std::uint64_t seed, void* w1, void* w2, Stream s,
                            const std::int32_t* global) {
  const std::int64_t rows1 = p.experts * 2 * p.inter, rows2 = p.experts * p.hidden;
  const unsigned g1 = static_cast<unsigned>(std::clamp<std::int64_t>(rows1, 1, 1 << 20));
  const unsigned g2 = static_cast<unsigned>(std::clamp<std::int64_t>(rows2, 1, 1 << 20));
  gen_detail::generate_kernel<T><<<g1, 256, 0, s>>>(static_cast<T*>(w1), seed, 0, p.experts, 2 * p.inter, p.hidden,
                                        weight_scale(p.hidden), global);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  gen_detail::generate_kernel<T><<<g2, 256, 0, s>>>(static_cast<T*>(w2), seed, 1, p.experts, p.hidden, p.inter,
                                        weight_scale(p.inter), global);
  return cudaGetLastError();
}

}  // namespace

RowMap row_map(const Problem& p, const Buffers& b) {
  RowMap m;
  m.compact = p.permute.layout == permute::Layout::compact;
  m.offsets = b.expert_offsets;
  m.sorted_token_ids = b.sorted_token_ids;
  m.expert_ids = b.expert_ids;
  m.num_tokens_post_pad = b.num_tokens_post_pad;
  m.block_size = p.permute.align.block_size;
  m.numel = p.permute.align.numel;
  m.topk = p.topk;
  return m;
}

std::span<const Stage> stages(const Variant& v) {
  const Ffn* f = ffn_of(v.info.name);
  return f != nullptr ? stages_of(*f) : std::span<const Stage>(kStages);
}

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::layout: return "layout";
    case Stage::ffn: return "ffn";
    case Stage::combine: return "combine";
  }
  return "?";
}

LaunchStatus launch_stage(const Variant& v, const Problem& p, const Buffers& b, Stage st, Stream s, bool pdl) {
  const Ffn* f = ffn_of(v.info.name);
  if (f == nullptr) return cudaErrorInvalidValue;
  return run_stage(*f, p, b, slices(*f, p, device_caps()), st, s, pdl);
}

const permute::Variant* layout_of(const Variant& v, const Problem& p, const DeviceCaps& caps) {
  const Ffn* f = ffn_of(v.info.name);
  if (f != nullptr && f->whole) return nullptr;
  return f != nullptr ? &layout_for(*f, p, caps) : &permute_pick(p, caps);
}

LaunchStatus launch_act_rows(const Problem& p, const void* h, void* a, const std::int64_t* offsets, Stream s,
                             bool pdl) {
  // Pieces of 8 outputs a thread over the row capacity, at most 16 blocks a
  // multiprocessor (the rows in use are known on the device only).
  const std::int64_t pieces = p.rows() * ceil_div<std::int64_t>(p.inter, 8);
  const unsigned blocks = static_cast<unsigned>(std::clamp<std::int64_t>(
      ceil_div<std::int64_t>(pieces, kActThreads), 1, std::int64_t(std::max(device_caps().sm_count, 1)) * 16));
  const bool vec = p.inter % 8 == 0 && aligned16(h) && aligned16(a);
  const auto go = [&](auto* kernel, auto* hh, auto* aa) {
    return prim::launch_ex(kernel, blocks, kActThreads, 0, s, prim::pdl_attrs(pdl), hh, aa, offsets, p.experts,
                           p.rows(), p.inter, p.act, p.w1_layout);
  };
  if (p.dtype == DType::bf16) {
    const auto* hh = static_cast<const __nv_bfloat16*>(h);
    auto* aa = static_cast<__nv_bfloat16*>(a);
    return vec ? go(act_rows_kernel<__nv_bfloat16, true>, hh, aa) : go(act_rows_kernel<__nv_bfloat16, false>, hh, aa);
  }
  const auto* hh = static_cast<const __half*>(h);
  auto* aa = static_cast<__half*>(a);
  return vec ? go(act_rows_kernel<__half, true>, hh, aa) : go(act_rows_kernel<__half, false>, hh, aa);
}

std::size_t zeroed_workspace_bytes(const Variant& v, const Problem& p, const DeviceCaps& caps) {
  const Ffn* f = ffn_of(v.info.name);
  if (f != nullptr && f->whole) return fused_plan(p).counter_bytes;
  if (!needs_zeroed_workspace(v, p, caps)) return 0;
  return (f != nullptr ? layout_for(*f, p, caps) : permute_pick(p, caps)).workspace_bytes(p.permute, caps);
}

LaunchStatus generate_weights(const Problem& p, std::uint64_t seed, void* w1, void* w2, Stream s,
                              const std::int32_t* global) {
  if (p.experts == 0) return cudaSuccess;
  return p.dtype == DType::bf16 ? generate_typed<__nv_bfloat16>(p, seed, w1, w2, s, global)
                                : generate_typed<__half>(p, seed, w1, w2, s, global);
}

const Variant& pick_on_layout(const Problem& p, const DeviceCaps& caps) {
  for (const AutoRow<Problem>& r : kAutoRows) {
    const Ffn* f = ffn_of(r.variant);
    if (f == nullptr || f->whole || f->gathers) continue;  // neither lists its own slots nor reads hidden
    if (r.holds != nullptr && !r.holds(p, caps)) continue;
    const Variant* v = registry().find(r.variant);
    if (v != nullptr && v->not_applicable(p, caps) == nullptr) return *v;
  }
  return *registry().find(kAutoRows.back().variant);
}

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::experts
