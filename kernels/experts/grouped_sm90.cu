// The `grouped` variant's FFN on sm_90a (grouped.hpp): CUTLASS 3.x's
// ptr-array grouped GEMM (TMA loads, WGMMA, warp-specialized cooperative
// mainloop, persistent group tile scheduler, TMA-store epilogue) over problem
// shapes our own group_args_kernel writes on the device. The only translation
// unit that includes CUTLASS: built for sm_90a alone, with -DNDEBUG (without
// it ptxas serializes the wgmma instructions), and only where the build found
// the CUTLASS headers (meson option cutlass_dir).
//
// Every GEMM here is the same "TN" problem: A [M, K] row-major (the rows),
// B [N, K] row-major = CUTLASS's column-major K x N (a weight matrix as
// stored, W1[e] or W2[e]), D [M, N] row-major, D = A . B^T with f32
// accumulation and one rounding to the dtype (LinearCombination, alpha 1,
// no C operand): exactly the h and y of experts.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/device_kernel.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/group_array_problem_shape.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include "common/cuda_check.cuh"
#include "experts/act_rows.cuh"
#include "experts/grouped.hpp"
#include "experts/grouped_args.cuh"
#include "primitives/launch.cuh"

#if !defined(NDEBUG)
#error "grouped_sm90.cu must be built with -DNDEBUG (kernels/experts/meson.build)"
#endif

namespace moekit::experts::grouped {
// A named namespace, not an anonymous one: group_args_kernel's template
// argument (FfnGroups) then has the same name in every build, which the
// resource records and `moekit sass --kernel` show.
namespace sm90 {

// Two kernel configurations per dtype (wide_tiles, grouped.hpp, picks one per launch):
//  - Short: 64 x 256 x 64 tiles, ping-pong schedule (two consumer
//    warpgroups on two tiles, one's epilogue under the other's mainloop), no
//    cluster: a 64-row tile wastes little on experts of a few dozen rows, and
//    its 32 KB B tile a stage keeps more weight bytes in flight than
//    128 x 128 tiles (which it beat in every cell measured, 8-26 %);
//  - Wide: 128 x 256 x 64 tiles in clusters of 2 along M (the two CTAs of a
//    cluster share each B tile by TMA multicast, cooperative schedule), for
//    experts of many rows, where the GEMMs are bound by the tensor cores.
// Both take as many pipeline stages as the shared memory left by the
// epilogue holds.
struct Short {
  using TileShape = cute::Shape<cute::_64, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  static constexpr bool kPingpong = true;
};
struct Wide {
  using TileShape = cute::Shape<cute::_128, cute::_256, cute::_64>;
  using ClusterShape = cute::Shape<cute::_2, cute::_1, cute::_1>;
  static constexpr bool kPingpong = false;
};

template <class Element, class Config>
struct Gemm {
  using TileShape = typename Config::TileShape;
  using ClusterShape = typename Config::ClusterShape;
  static constexpr int kClusterM = cute::size<0>(ClusterShape{});
  static constexpr int kAlign = 16 / sizeof(Element);  // TMA: 16-byte rows and bases
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;  // (M, N, K) per group
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, cutlass::layout::RowMajor*, kAlign,       // no C operand
      Element, cutlass::layout::RowMajor*, kAlign,    // D
      std::conditional_t<Config::kPingpong, cutlass::epilogue::PtrArrayTmaWarpSpecializedPingpong,
                         cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative>,
      cutlass::epilogue::fusion::LinearCombination<Element, float>>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, cutlass::layout::RowMajor*, kAlign,     // A [M, K]
      Element, cutlass::layout::ColumnMajor*, kAlign,  // B [N, K]
      float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      std::conditional_t<Config::kPingpong, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedPingpong,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative>>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
};
// The group arrays (GroupArrays) are written once for either configuration.
static_assert(std::is_same_v<Gemm<cutlass::bfloat16_t, Short>::StrideA, Gemm<cutlass::bfloat16_t, Wide>::StrideA> &&
              std::is_same_v<Gemm<cutlass::bfloat16_t, Short>::StrideB, Gemm<cutlass::bfloat16_t, Wide>::StrideB> &&
              std::is_same_v<Gemm<cutlass::bfloat16_t, Short>::StrideD, Gemm<cutlass::bfloat16_t, Wide>::StrideD>);
// The types the group arrays are written in, for either configuration.
template <class Element>
using ArrayTypes = Gemm<Element, Short>;

// A stride of a row-major-in-memory operand whose rows are `ld` elements
// apart: every stride type here is (ld, 1, 0), only ld dynamic.
template <class S>
__host__ __device__ S rows_stride(std::int64_t ld) {
  static_assert(cute::is_static_v<decltype(cute::get<1>(S{}))> && decltype(cute::get<1>(S{}))::value == 1,
                "the operand must be contiguous along K (A, B) or N (D)");
  S s{};
  cute::get<0>(s) = ld;
  return s;
}

// The device arrays of one grouped GEMM, E entries each.
template <class Element>
struct GroupArrays {
  using G = ArrayTypes<Element>;
  typename G::Shape3* shape;
  const Element** a;
  const Element** b;
  Element** d;
  typename G::StrideA* sa;
  typename G::StrideB* sb;
  typename G::StrideD* sd;
};

// The FFN workspace slice: h [rows, 2I], a [rows, I], the arrays of gemm1
// and gemm2, CUTLASS's workspace of each; every piece 256-byte aligned. The
// shapes, strides and pointer types do not depend on the element type.
struct Layout {
  static constexpr std::size_t kAlign = 256;
  std::size_t h = 0, a = 0, arrays[2][7] = {}, cutlass_ws[2] = {}, total = 0;
};
std::size_t take(std::size_t& at, std::size_t bytes) {
  const std::size_t o = at;
  at += (bytes + Layout::kAlign - 1) / Layout::kAlign * Layout::kAlign;
  return o;
}

template <class Element, class Config>
typename Gemm<Element, Config>::Kernel::Arguments arguments(int experts, const GroupArrays<Element>& g,
                                                            const DeviceCaps& caps) {
  using K = typename Gemm<Element, Config>::Kernel;
  typename K::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {experts, g.shape, nullptr};  // no host shapes: the counts stay on the device
  args.mainloop.ptr_A = g.a;
  args.mainloop.dA = g.sa;
  args.mainloop.ptr_B = g.b;
  args.mainloop.dB = g.sb;
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = nullptr;
  args.epilogue.ptr_D = g.d;
  args.epilogue.dD = g.sd;
  args.hw_info.device_id = caps.ordinal < 0 ? 0 : caps.ordinal;
  // The grid is one CTA per SM and CUTLASS's workspace holds TMA descriptors
  // per SM, so the launch and the workspace size must see the same count (both
  // take device_caps()). Without a device (CPU-only planning) more SMs than
  // any sm_90 part has, so a size planned there is never too small.
  args.hw_info.sm_count = caps.sm_count > 0 ? caps.sm_count : 256;
  return args;
}

// CUTLASS's workspace of one kernel for `experts` groups (it depends on the
// group count and the SM count, not on the arrays' addresses).
template <class Element, class Config>
std::size_t cutlass_workspace(int experts, const DeviceCaps& caps) {
  return Gemm<Element, Config>::Kernel::get_workspace_size(
      arguments<Element, Config>(experts, GroupArrays<Element>{}, caps));
}

Layout layout(const Problem& p, const DeviceCaps& caps) {
  using G = ArrayTypes<cutlass::bfloat16_t>;
  static_assert(sizeof(typename ArrayTypes<cutlass::half_t>::StrideA) == sizeof(G::StrideA) &&
                sizeof(typename ArrayTypes<cutlass::half_t>::StrideD) == sizeof(G::StrideD));
  const std::size_t E = std::size_t(p.experts), rows = std::size_t(p.rows());
  Layout l;
  std::size_t at = 0;
  l.h = take(at, rows * std::size_t(2 * p.inter) * 2);
  l.a = take(at, rows * std::size_t(p.inter) * 2);
  const std::size_t sizes[7] = {sizeof(G::Shape3), sizeof(void*), sizeof(void*), sizeof(void*),
                                sizeof(G::StrideA), sizeof(G::StrideB), sizeof(G::StrideD)};
  for (auto& gemm : l.arrays)
    for (int i = 0; i < 7; ++i) gemm[i] = take(at, E * sizes[i]);
  // CUTLASS's own workspace for E groups (per-SM TMA descriptors today),
  // the largest of the dtypes' and configurations' kernels.
  const std::size_t cws =
      std::max({cutlass_workspace<cutlass::bfloat16_t, Short>(p.experts, caps),
                cutlass_workspace<cutlass::half_t, Short>(p.experts, caps),
                cutlass_workspace<cutlass::bfloat16_t, Wide>(p.experts, caps),
                cutlass_workspace<cutlass::half_t, Wide>(p.experts, caps)});
  for (std::size_t& c : l.cutlass_ws) c = take(at, cws);
  l.total = at;
  return l;
}

template <class Element>
GroupArrays<Element> arrays_at(char* ws, const std::size_t (&o)[7]) {
  using G = ArrayTypes<Element>;
  return {reinterpret_cast<typename G::Shape3*>(ws + o[0]), reinterpret_cast<const Element**>(ws + o[1]),
          reinterpret_cast<const Element**>(ws + o[2]),     reinterpret_cast<Element**>(ws + o[3]),
          reinterpret_cast<typename G::StrideA*>(ws + o[4]), reinterpret_cast<typename G::StrideB*>(ws + o[5]),
          reinterpret_cast<typename G::StrideD*>(ws + o[6])};
}

// group_args_kernel's sink: both GEMMs' entries of expert e.
template <class Element>
struct FfnGroups {
  GroupArrays<Element> g1, g2;
  const Element* permuted;  // [rows, H]
  const Element* w1;        // [E, 2I, H]
  const Element* w2;        // [E, H, I]
  Element* h;               // [rows, 2I]
  Element* a;               // [rows, I]
  Element* y;               // [rows, H]
  int H, I;
  __device__ void operator()(int e, std::int64_t row0, std::int64_t rows) const {
    using G = ArrayTypes<Element>;
    const std::int64_t H64 = H, I64 = I;
    g1.shape[e] = typename G::Shape3(static_cast<int>(rows), 2 * I, H);
    g1.a[e] = permuted + row0 * H64;
    g1.b[e] = w1 + std::int64_t(e) * 2 * I64 * H64;
    g1.d[e] = h + row0 * 2 * I64;
    g1.sa[e] = rows_stride<typename G::StrideA>(H64);
    g1.sb[e] = rows_stride<typename G::StrideB>(H64);
    g1.sd[e] = rows_stride<typename G::StrideD>(2 * I64);
    g2.shape[e] = typename G::Shape3(static_cast<int>(rows), H, I);
    g2.a[e] = a + row0 * I64;
    g2.b[e] = w2 + std::int64_t(e) * H64 * I64;
    g2.d[e] = y + row0 * H64;
    g2.sa[e] = rows_stride<typename G::StrideA>(I64);
    g2.sb[e] = rows_stride<typename G::StrideB>(I64);
    g2.sd[e] = rows_stride<typename G::StrideD>(H64);
  }
};

// One grouped GEMM over the arrays the sink wrote, launched without PDL
// (grouped.hpp). Its Params hold nothing of the launch's buffers: only the
// addresses of the group arrays and of CUTLASS's workspace (the TMA
// descriptors the host encodes carry placeholder shapes and addresses that
// the kernel replaces per group on the device), the group count and the SM
// count. So they are built once per such key, thread and GEMM of the FFN
// (`which`: gemm1 0, gemm2 1; one entry shared by both would trade keys on
// every launch and encode twice a launch); nothing is allocated and no stream
// work is issued (CUTLASS's initialize_workspace is a no-op for these
// collectives and the group scheduler).
template <class Element, class Config>
cudaError_t run_gemm(int which, const GroupArrays<Element>& g, int experts, void* cutlass_ws,
                     const DeviceCaps& caps, cudaStream_t s) {
  using G = Gemm<Element, Config>;
  using K = typename G::Kernel;
  struct Key {
    GroupArrays<Element> g;
    void* ws;
    int experts, device, sm_count;
    bool operator==(const Key& o) const {
      return g.shape == o.g.shape && g.a == o.g.a && g.b == o.g.b && g.d == o.g.d && g.sa == o.g.sa &&
             g.sb == o.g.sb && g.sd == o.g.sd && ws == o.ws && experts == o.experts && device == o.device &&
             sm_count == o.sm_count;
    }
  };
  thread_local std::optional<std::pair<Key, typename K::Params>> entries[2];
  std::optional<std::pair<Key, typename K::Params>>& cached = entries[which];
  const Key key{g, cutlass_ws, experts, caps.ordinal, caps.sm_count};
  if (!cached || !(cached->first == key)) {
    const typename K::Arguments args = arguments<Element, Config>(experts, g, caps);
    if (!K::can_implement(args)) return cudaErrorInvalidValue;
    if (K::initialize_workspace(args, cutlass_ws, s) != cutlass::Status::kSuccess) return cudaErrorUnknown;
    cached.emplace(key, K::to_underlying_arguments(args, cutlass_ws));
  }
  const typename K::Params& params = cached->second;
  prim::LaunchAttrs attrs{};
  attrs.cluster = G::kClusterM > 1 ? G::kClusterM : 0;
  return prim::launch_with_smem(cutlass::device_kernel<K>, K::get_grid_shape(params), K::get_block_shape(),
                                std::size_t(K::SharedStorageSize), s, attrs, params);
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <class Element, class T>
LaunchStatus launch_typed(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  if (p.experts < 1) return cudaSuccess;  // no expert, no row (and CUTLASS's scheduler reads group 0)
  const DeviceCaps& caps = device_caps();
  const Layout l = layout(p, caps);
  char* w = static_cast<char*>(ws);
  // TMA needs 16-byte aligned bases (the rows are: H, I multiples of 8).
  if (!aligned16(b.permuted) || !aligned16(b.w1) || !aligned16(b.w2) || !aligned16(b.y) || !aligned16(ws))
    return cudaErrorMisalignedAddress;
  FfnGroups<Element> f;
  f.g1 = arrays_at<Element>(w, l.arrays[0]);
  f.g2 = arrays_at<Element>(w, l.arrays[1]);
  f.permuted = static_cast<const Element*>(b.permuted);
  f.w1 = static_cast<const Element*>(b.w1);
  f.w2 = static_cast<const Element*>(b.w2);
  f.h = reinterpret_cast<Element*>(w + l.h);
  f.a = reinterpret_cast<Element*>(w + l.a);
  f.y = static_cast<Element*>(b.y);
  f.H = static_cast<int>(p.hidden);
  f.I = static_cast<int>(p.inter);
  const std::int64_t capacity = p.rows();
  const unsigned group_blocks = static_cast<unsigned>(ceil_div<std::int64_t>(p.experts, kGroupThreads));
  if (const cudaError_t e = prim::launch_ex(group_args_kernel<FfnGroups<Element>>, dim3(group_blocks),
                                            dim3(kGroupThreads), 0, s, prim::pdl_attrs(pdl), b.expert_offsets,
                                            p.experts, capacity, f);
      e != cudaSuccess)
    return e;
  const bool wide = wide_tiles(p);
  auto gemm = [&](int which, const GroupArrays<Element>& g) {
    void* cws = w + l.cutlass_ws[which];
    return wide ? run_gemm<Element, Wide>(which, g, p.experts, cws, caps, s)
                : run_gemm<Element, Short>(which, g, p.experts, cws, caps, s);
  };
  if (const cudaError_t e = gemm(0, f.g1); e != cudaSuccess) return e;
  if (const cudaError_t e = static_cast<cudaError_t>(
          launch_act_rows(p, f.h, f.a, static_cast<const std::int64_t*>(b.expert_offsets), s, pdl));
      e != cudaSuccess)
    return e;
  return gemm(1, f.g2);
}

}  // namespace sm90

using sm90::launch_typed;

const char* not_built() { return nullptr; }

const char* limits_text() {
  return "sm_90 only (sm_90a kernels: CUTLASS 4.2 ptr-array grouped GEMM, TMA + WGMMA, 64x256x64 ping-pong tiles or, "
         "from 1024 rows an expert on average, 128x256x64 cooperative tiles in 2-CTA clusters); compact "
         "layout; H and I multiples of 8 (TMA: 16-byte rows); rows per launch (T*K) below 2^31";
}

const char* not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.permute.layout != permute::Layout::compact) return "compact layout only (its rows are contiguous per expert)";
  if (p.hidden % 8 != 0 || p.inter % 8 != 0)
    return "H and I must be multiples of 8 (TMA needs 16-byte aligned rows)";
  if (p.rows() >= (std::int64_t{1} << 31)) return "T*K rows must stay below 2^31 (CUTLASS's int problem shapes)";
  if (caps.present() && caps.arch() != 90) return "does not apply: sm_90a kernels need an sm_90 GPU";
  return nullptr;
}

std::size_t workspace_bytes(const Problem& p, const DeviceCaps& caps) { return sm90::layout(p, caps).total; }

LaunchStatus launch(const Problem& p, const Buffers& b, void* ws, Stream s, bool pdl) {
  return p.dtype == DType::bf16 ? launch_typed<cutlass::bfloat16_t, __nv_bfloat16>(p, b, ws, s, pdl)
                                : launch_typed<cutlass::half_t, __half>(p, b, ws, s, pdl);
}

}  // namespace moekit::experts::grouped
