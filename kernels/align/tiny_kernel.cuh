// align's small-input ranking kernel as a public building block: tiny_kernel
// (the `tiny` variant, tiny.cuh, launches it as it is; a later family's fused
// kernel instantiates it with a placement hook that moves rows as the slots
// are placed), its launch shape (TinyPlan, tiny_plan_with), shared memory
// (tiny_smem) and limits (kTiny*). With align's argument pack (args.cuh),
// Problem and Buffers (align.hpp), the whole contract a caller needs.
//
// Every block of the grid:
//   1. loads ALL ids (few: numel <= kTinyMaxNumel; the first loads are issued
//      before the counters are zeroed so their latency overlaps) and ranks each
//      slot inside its expert with a shared-memory atomicAdd whose return value
//      is the rank, keeping (expert, rank) per slot in shared memory;
//   2. scans the padded counts (warp-contiguous block scan, 1 barrier), then,
//      expert by expert, adds each warp's offset and writes the padding rows
//      and expert_ids that the expert's row range has in this block's chunk
//      [r0, r1) of sorted_token_ids (no owner lookups);
//   3. fills the chunk's rows past num_tokens_post_pad (16-byte stores) and
//      the -1 tail of expert_ids, and after a barrier writes the slots of every
//      expert whose row range STARTS in the chunk (they may run into the next
//      chunk, whose block skips them as non-padding rows).
//
// Atomic ranks differ between blocks, which is why one block places all the
// slots of an expert: each expert is placed by exactly one block, with that
// block's ranks, so every slot lands exactly once. The order of slots inside
// an expert is not defined (not a stable variant). 4 barriers in all.
//
// The kernel is also the index half of a fused row copy: a Place type
// (below) sees the padding ranges of the chunk and, at the end, the ranked
// slots, and moves the data rows there. align instantiates the no-op
// TinyPlaceNone, which compiles to nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "align/align.hpp"
#include "align/args.cuh"
#include "align/common.cuh"
#include "common/cuda_check.cuh"

namespace moekit::align {

// Limits and the packed slot: expert in the low kTinyExpertBits, rank above.
constexpr int kTinyMaxNumel = 32768;  // every block re-reads all ids: a small-input design
constexpr int kTinyExpertBits = 14;   // E <= 16384: expert in the low bits of a packed slot
constexpr int kTinyExpertMask = (1 << kTinyExpertBits) - 1;
constexpr int kTinyMaxExperts = 1 << kTinyExpertBits;
constexpr int kTinyNarrow = 4;  // narrow path: up to 4 slots per thread, scalar loads
constexpr int kTinyUnroll = 2;  // wide path: 16-byte id loads in flight per thread

// Shared memory: packed slots (numel rounded up to 4, first so vector stores
// are 16-byte aligned), E counters, E + 1 scan entries.
inline std::size_t tiny_smem(std::int64_t numel, int num_experts) {
  return sizeof(int) * (static_cast<std::size_t>((numel + 3) / 4 * 4) +
                        2 * static_cast<std::size_t>(num_experts) + 1);
}

// Whether numel slots take the wide (16-byte load) instantiation at kThreads.
inline bool tiny_wide(std::int64_t numel, int threads) { return numel > std::int64_t{kTinyNarrow} * threads; }

// A slot's packed (expert, rank); -1 for a dropped slot (e < 0).
__device__ __forceinline__ int tiny_pack(int e, int* cnt) {
  return e >= 0 ? e | (atomicAdd(cnt + e, 1) << kTinyExpertBits) : -1;
}

// Phase hooks. The product instantiates only this no-op type, which
// compiles to nothing; bench/tune/align_probe.cu (`probe_align phases`)
// instantiates its own copy with a type that stamps clock64 / the global
// timer per phase (mark), waits for thread 0's first id (loaded) and closes
// with a barrier (end) to see where a launch spends its time; `probe_align
// trigger` moves the PDL trigger to a later mark (kEarlyTrigger false).
struct TinyNoProbe {
  static constexpr bool kEarlyTrigger = true;  // pdl_launch_dependents right after pdl_wait
  __device__ static void mark(int) {}
  __device__ static void loaded(int) {}
  __device__ static void end() {}
};

// Placement hooks, the kernel's Place parameter: a kernel that copies rows as
// it ranks supplies its own type with these members (CUB-style: a concept,
// checked by instantiation):
//   Params          passed by value to the kernel;
//   extra_smem      bytes of shared memory after tiny's own (16-byte aligned);
//   begin           every thread at entry, before the first barrier;
//   padding         one lane: rows [lo, hi) of the chunk are padding rows;
//   finish          every thread at the end: slot[] (packed expert | rank
//                   << kTinyExpertBits, -1 dropped) and cs[] (final expert
//                   starts) are final and unchanged since the last barrier.
struct TinyPlaceNone {
  struct Params {};
  static constexpr std::size_t extra_smem(std::int64_t, int) { return 0; }
  __device__ static void begin(const Params&, char*) {}
  __device__ static void padding(const Params&, char*, int, int, int) {}
  template <int kThreads>
  __device__ static void finish(const Args&, const Params&, char*, const int*, const int*, int, int, int) {}
};

// The kernel. Every block ranks all a.numel slots, scans the padded counts,
// writes the padding rows and expert_ids of its chunk of `chunk` rows of
// sorted_token_ids and places the slots of the experts whose rows start in
// that chunk; one launch of TinyPlan::grid blocks of kThreads threads with
// TinyPlan::chunk, and tiny_smem(numel, E) bytes of dynamic shared memory
// (with a Place of its own: rounded up to 16, plus Place::extra_smem(numel,
// E)). Follows the PDL rule of primitives/pdl.cuh.
// Code size matters as much as work here: a launch this short pays for every
// instruction-cache line it runs through, so loops are kept rolled
// (`#pragma unroll 1`) except where registers must hold loads in flight.
//
// @tparam IdT      the id type, std::int32_t or std::int64_t (Problem::ids_int64).
// @tparam kThreads threads per block: 256, 512 or 1024 (TinyPlan::threads).
// @tparam kWide    numel > kTinyNarrow * kThreads (tiny_wide): 16-byte id loads,
//                  kTinyUnroll in flight; else up to kTinyNarrow scalar loads
//                  per thread.
// @tparam Probe    phase hooks (TinyNoProbe in the product, which compiles to
//                  nothing).
// @tparam Place    the placement hook (TinyPlaceNone for align itself; a fused
//                  row copy brings its own); its Params come by value as the
//                  third kernel argument.
template <class IdT, int kThreads, bool kWide, class Probe = TinyNoProbe, class Place = TinyPlaceNone>
__global__ void __launch_bounds__(kThreads) tiny_kernel(Args a, int chunk, typename Place::Params pp) {
  using namespace detail;  // align's device helpers (common.cuh): expert_of, DivB, scans
  extern __shared__ int4 sm4[];
  __shared__ int warp_sums[kWarp + 1];
  const int E = a.num_experts, n = a.numel;
  int* slot = reinterpret_cast<int*>(sm4);  // (n + 3) / 4 * 4
  int* cnt = slot + (n + 3) / 4 * 4;        // E
  int* cs = cnt + E;                        // E + 1
  char* extra = reinterpret_cast<char*>(sm4) + ((sizeof(int) * ((n + 3) / 4 * 4 + 2 * E + 1) + 15) & ~std::size_t{15});
  const int t = threadIdx.x;
  Probe::mark(0);
  Place::begin(pp, extra);  // shared memory only
  prim::pdl_wait();         // the ids (and, for Place, hidden) may come from the previous kernel
  if constexpr (Probe::kEarlyTrigger) prim::pdl_launch_dependents();

  // 1. Rank every slot inside its expert. The first loads go out before the
  // counters are zeroed, so their latency overlaps the zeroing barrier.
  if constexpr (!kWide) {
    const IdT* ids = static_cast<const IdT*>(a.ids);
    IdT raw[kTinyNarrow];
#pragma unroll
    for (int k = 0; k < kTinyNarrow; ++k) {
      const int i = t + k * kThreads;
      raw[k] = i < n ? __ldg(ids + i) : IdT(-1);
    }
    Probe::loaded(static_cast<int>(raw[0]));
#pragma unroll 1
    for (int e = t; e < E; e += kThreads) cnt[e] = 0;
    __syncthreads();
    Probe::mark(2);
#pragma unroll
    for (int k = 0; k < kTinyNarrow; ++k) {
      const int i = t + k * kThreads;
      if (i < n) slot[i] = tiny_pack(expert_of<IdT>(raw[k], a), cnt);
    }
  } else {
    constexpr int V = kVec<IdT>, U = kTinyUnroll;
    const bool aligned = ids_aligned16(a);
    int ev[U][V];
    load_experts<IdT>(a, t * V, kThreads * V, aligned, ev);
    Probe::loaded(ev[0][0]);
#pragma unroll 1
    for (int e = t; e < E; e += kThreads) cnt[e] = 0;
    __syncthreads();
    Probe::mark(2);
#pragma unroll 1
    for (int base = 0; base < n; base += U * kThreads * V) {
      if (base > 0) {
        load_experts<IdT>(a, base + t * V, kThreads * V, aligned, ev);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int first = base + (u * kThreads + t) * V;
        if (first < n) {
          if constexpr (V == 4)
            *reinterpret_cast<int4*>(slot + first) =
                make_int4(tiny_pack(ev[u][0], cnt), tiny_pack(ev[u][1], cnt),
                          tiny_pack(ev[u][2], cnt), tiny_pack(ev[u][3], cnt));
          else
            *reinterpret_cast<int2*>(slot + first) =
                make_int2(tiny_pack(ev[u][0], cnt), tiny_pack(ev[u][1], cnt));
        }
      }
    }
  }
  __syncthreads();
  Probe::mark(3);

  // 2. Layout: cs[e] = exclusive scan of the padded counts. Warp w owns the
  // experts [lo, hi) (a 32-aligned contiguous range, so every shared access
  // is consecutive, no bank conflicts whatever E is) and walks them 32 at a
  // time. Pass 1 stores warp-relative starts and the warp's sum; pass 2 adds
  // the warp's offset, from one short shuffle scan of the warp sums. (The
  // first version summed in pass 1 and scanned in pass 2: one division by B
  // and one shuffle chain more per expert group.)
  constexpr int kWarps = kThreads / kWarp;
  const int lane = t & (kWarp - 1), w = t / kWarp;
  const DivB<> db = make_divb(a.block_size);
  const int per = (E + kThreads - 1) / kThreads * kWarp;
  const int lo = min(w * per, E), hi = min(lo + per, E);
  {
    int run = 0;
#pragma unroll 1
    for (int i = lo; i < hi; i += kWarp) {
      const int e = i + lane;
      const int v = e < hi ? db.pad(cnt[e]) : 0;
      const int inc = warp_inclusive_scan(v);
      if (e < hi) cs[e] = run + inc - v;
      run += __shfl_sync(kFullMask, inc, kWarp - 1);
    }
    if (lane == 0) warp_sums[w] = run;
  }
  __syncthreads();
  int excl, total;  // lane k < kWarps: the start of warp k's experts
  {
    const int x = lane < kWarps ? warp_sums[lane] : 0;
    const int xi = warp_inclusive_scan<kWarps>(x);
    excl = xi - x;
    total = __shfl_sync(kFullMask, xi, kWarps - 1);
  }
  Probe::mark(4);
  if (blockIdx.x == 0 && t == 0) *a.total = total;

  // 3. This block's rows [r0, r1) (r0 < max_padded by the grid size) and the
  // expert_ids [j0, j1) of the blocks whose first row lies in them.
  const int r0 = static_cast<int>(blockIdx.x) * chunk;
  const int r1 = r0 + min(chunk, a.max_padded - r0);
  const std::int32_t pad = a.numel;
  const int j0 = db.div_up(r0);
  const int j1 = min(db.div_up(r1), a.max_blocks);

  // Pass 2, expert by expert: the final start s and, for every expert whose
  // rows [s, s + padded) meet the chunk, the whole warp writes the padding
  // rows [s + count, s + padded) and the expert_ids entries of that meet.
  // No owner lookup anywhere (before: a binary search over the scan per row
  // vector and per expert_ids entry). Every row below num_tokens_post_pad
  // belongs to one expert, so each padding row is written once, by the block
  // of its chunk. The experts that meet a chunk are consecutive, so pass 2
  // deals consecutive experts to different warps (lane l of warp w takes
  // l * kWarps + (w ^ g(l)) of each group of kThreads, g making the 32 lanes
  // hit 32 banks); with pass 1's contiguous ranges one warp did the whole
  // chunk alone (first device run: +0.1-0.35 us at 16-1024 tokens, 2x at
  // E = 16384).
  constexpr int kLanesPerWarpRow = kWarp / kWarps;  // lanes sharing l * kWarps / 32
  const int mine = lane * kWarps + (w ^ ((lane / kLanesPerWarpRow) & (kWarps - 1)));
  const int q = per / kWarp;  // pass 1: warp w owns [w * 32q, (w + 1) * 32q)
#pragma unroll 1
  for (int base = 0; base < E; base += kThreads) {
    const int e = base + mine;
    const int owner = q == 1 ? e / kWarp : (e / kWarp) / q;
    const int off = __shfl_sync(kFullMask, excl, owner & (kWarp - 1));
    int s = 0, c = 0, v = 0;
    if (e < E) {
      s = cs[e] + off;
      cs[e] = s;
      c = cnt[e];
      v = db.pad(c);
    }
    unsigned meet = __ballot_sync(kFullMask, v > 0 && s < r1 && s + v > r0);
    while (meet != 0) {
      const int src = __ffs(meet) - 1;
      meet &= meet - 1;
      const int es = __shfl_sync(kFullMask, s, src);
      const int ec = __shfl_sync(kFullMask, c, src);
      const int ee = __shfl_sync(kFullMask, s + v, src);
      const int ex = __shfl_sync(kFullMask, e, src);
      const int pe = min(ee, r1);
      if (lane == 0 && max(es + ec, r0) < pe) Place::padding(pp, extra, n, max(es + ec, r0), pe);
#pragma unroll 1
      for (int r = max(es + ec, r0) + lane; r < pe; r += kWarp) a.sorted[r] = pad;
      const int je = min(db.div(ee), j1);
#pragma unroll 1
      for (int j = max(db.div(es), j0) + lane; j < je; j += kWarp) a.eids[j] = ex;
    }
  }
  Probe::mark(5);

  // Rows past num_tokens_post_pad, all padding: scalar stores up to 16-byte
  // alignment at both ends, four rows per vector store between. expert_ids
  // past the used blocks: -1. Before the barrier: only `total` is needed.
  {
    const int a0 = max(r0, min(total, r1));
    const int mis = static_cast<int>((reinterpret_cast<std::uintptr_t>(a.sorted + a0) & 15) / 4);
    const int head = min(r1 - a0, mis == 0 ? 0 : 4 - mis);
    const int mid = a0 + head;
    const int nvec = (r1 - mid) / 4;
    const int vend = mid + 4 * nvec;
#pragma unroll 1
    for (int k = t; k < head + (r1 - vend); k += kThreads)
      a.sorted[k < head ? a0 + k : vend + (k - head)] = pad;
    int4* q = reinterpret_cast<int4*>(a.sorted + mid);
#pragma unroll 1
    for (int k = t; k < nvec; k += kThreads) q[k] = make_int4(pad, pad, pad, pad);
#pragma unroll 1
    for (int j = max(j0, db.div(total)) + t; j < j1; j += kThreads) a.eids[j] = -1;
  }
  __syncthreads();  // every final cs[e]
  Probe::mark(6);

  // Slots of the experts whose rows start in the chunk (they may run into the
  // next chunk, whose block skips them: they are not padding rows).
#pragma unroll 1
  for (int i = t; i < n; i += kThreads) {
    const int v = slot[i];
    if (v < 0) continue;
    const int st = cs[v & kTinyExpertMask];
    if (st < r0 || st >= r1) continue;
    const int row = st + (v >> kTinyExpertBits);
    if (row < a.max_padded) a.sorted[row] = i;
  }
  Place::template finish<kThreads>(a, pp, extra, slot, cs, r0, r1, total);
  Probe::end();
}

// Launch shape. chunk: rows per block, a multiple of 4 (16-byte aligned chunk
// starts when sorted_token_ids is).
struct TinyPlan {
  int grid = 1;
  int chunk = 4;
  int threads = 256;
};

// The plan of about `grid` blocks of `threads` (grid clamped to [1, rows / 4]).
inline TinyPlan tiny_plan_with(const Problem& p, int grid, int threads) {
  TinyPlan pl;
  pl.threads = threads;
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const std::int64_t g = std::clamp<std::int64_t>(grid, 1, ceil_div<std::int64_t>(rows, 4));
  const std::int64_t chunk = ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, g), 4) * 4;
  pl.chunk = static_cast<int>(chunk);
  pl.grid = static_cast<int>(ceil_div<std::int64_t>(rows, chunk));
  return pl;
}

}  // namespace moekit::align
