// Variant `tiny` (ours, small inputs): ONE launch, no global atomics, no
// workspace, no memset node. Built for latency: a short barrier chain and a
// padding fill spread over many blocks.
//
// Every block of the grid:
//   1. loads ALL ids (few: numel <= kTinyMaxNumel; the first loads are issued
//      before the counters are zeroed so their latency overlaps) and ranks each
//      slot inside its expert with a shared-memory atomicAdd whose return value
//      is the rank, keeping (expert, rank) per slot in shared memory;
//   2. scans the padded counts (warp-contiguous block scan, 2 barriers);
//   3. writes ONLY its own contiguous chunk [r0, r1) of sorted_token_ids:
//      the padding rows of the chunk (16-byte stores where four rows are all
//      padding), the expert_ids of the blocks that start in the chunk, and the
//      slots of every expert whose row range STARTS in the chunk (they may run
//      into the next chunk, whose owner skips them as non-padding rows).
//
// Atomic ranks differ between blocks, which is why one block places all the
// slots of an expert: each expert is placed by exactly one block, with that
// block's ranks, so every slot lands exactly once. The order of slots inside
// an expert is not defined (not a stable variant). 4 barriers in all.
#pragma once

#include "align/common.cuh"
#include "align/host_util.cuh"

#include <algorithm>

namespace moekit::align::detail {

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

// cs[0, E) = exclusive scan of padded(cnt[e], B); cs[E] = total, returned.
// Warp w owns experts [w*per, (w+1)*per) (per a multiple of 32) and walks
// them 32 at a time, so every shared access is consecutive (no bank
// conflicts whatever E is). 2 barriers.
template <int kThreads>
__device__ __forceinline__ int tiny_padded_scan(const int* cnt, int* cs, int E, int B,
                                                int* warp_sums) {
  constexpr int kWarps = kThreads / kWarp;
  const int lane = threadIdx.x & (kWarp - 1), w = threadIdx.x / kWarp;
  const int per = (E + kWarps * kWarp - 1) / (kWarps * kWarp) * kWarp;
  const int lo = min(w * per, E), hi = min(lo + per, E);
  int s = 0;
#pragma unroll 1
  for (int i = lo + lane; i < hi; i += kWarp) s += padded(cnt[i], B);
#pragma unroll
  for (int d = kWarp / 2; d > 0; d >>= 1) s += __shfl_xor_sync(kFullMask, s, d);
  if (lane == 0) warp_sums[w] = s;
  __syncthreads();
  int run = lane < w ? warp_sums[lane] : 0;  // kWarps <= 32
#pragma unroll
  for (int d = kWarp / 2; d > 0; d >>= 1) run += __shfl_xor_sync(kFullMask, run, d);
#pragma unroll 1
  for (int i = lo; i < hi; i += kWarp) {
    const int v = i + lane < hi ? padded(cnt[i + lane], B) : 0;
    const int inc = warp_inclusive_scan(v);
    if (i + lane < hi) cs[i + lane] = run + inc - v;
    run += __shfl_sync(kFullMask, inc, kWarp - 1);
  }
  if (w == kWarps - 1 && lane == 0) cs[E] = run;  // the last warp ends at E
  __syncthreads();
  return cs[E];
}

__device__ __forceinline__ int tiny_pack(int e, int* cnt) {
  return e >= 0 ? e | (atomicAdd(cnt + e, 1) << kTinyExpertBits) : -1;
}

// Is row r (< total) a padding row? e: a guess of its owner, updated.
__device__ __forceinline__ bool tiny_is_pad(int r, const int* cs, const int* cnt, int E,
                                            int& e) {
  if (r >= cs[e + 1] || r < cs[e]) e = owner_of(cs, E, r);
  return r >= cs[e] + cnt[e];
}

// Timing hook. The default does nothing, so the production kernels compile
// to the same code; probe_align passes a type that stamps clock64 / the
// global timer per phase (mark), waits for thread 0's first id (loaded) and
// closes with a barrier (end) to see where a launch spends its time.
struct TinyNoProbe {
  __device__ static void mark(int) {}
  __device__ static void loaded(int) {}
  __device__ static void end() {}
};

// Padding mask (bit k: row r + k is padding) of rows r..r+3, r < total. One
// owner lookup for the four rows (the guess e, else a binary search), another
// only where an expert boundary falls inside them, which never happens when
// B % 4 == 0 (every cs[e] is a multiple of B). Classifying row by row cost
// four lookups per vector: 1.1-1.3 us of a 1-token launch (probe_align phases).
__device__ __forceinline__ int tiny_pad_mask4(int r, const int* cs, const int* cnt, int E,
                                              int total, int& e) {
  if (r >= cs[e + 1] || r < cs[e]) e = owner_of(cs, E, r);
  int lim = cs[e + 1], from = cs[e] + cnt[e], mask = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int rk = r + k;
    if (rk >= total) {
      mask |= 1 << k;
    } else {
      if (rk >= lim) {
        e = owner_of(cs, E, rk);
        lim = cs[e + 1];
        from = cs[e] + cnt[e];
      }
      if (rk >= from) mask |= 1 << k;
    }
  }
  return mask;
}

// Code size matters as much as work here: a launch this short pays for every
// instruction-cache line it runs through, so loops are kept rolled
// (`#pragma unroll 1`) except where registers must hold loads in flight.
// kWide: numel > kTinyNarrow * kThreads (16-byte loads, kTinyUnroll in flight).
template <class IdT, int kThreads, bool kWide, class Probe = TinyNoProbe>
__global__ void __launch_bounds__(kThreads) tiny_kernel(Args a, int chunk) {
  extern __shared__ int4 sm4[];
  __shared__ int warp_sums[kWarp + 1];
  const int E = a.num_experts, n = a.numel;
  int* slot = reinterpret_cast<int*>(sm4);  // (n + 3) / 4 * 4
  int* cnt = slot + (n + 3) / 4 * 4;        // E
  int* cs = cnt + E;                        // E + 1
  const int t = threadIdx.x;
  Probe::mark(0);

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
#pragma unroll
    for (int u = 0; u < U; ++u) load_experts<IdT>(a, (u * kThreads + t) * V, aligned, ev[u]);
    Probe::loaded(ev[0][0]);
#pragma unroll 1
    for (int e = t; e < E; e += kThreads) cnt[e] = 0;
    __syncthreads();
    Probe::mark(2);
#pragma unroll 1
    for (int base = 0; base < n; base += U * kThreads * V) {
      if (base > 0) {
#pragma unroll
        for (int u = 0; u < U; ++u)
          load_experts<IdT>(a, base + (u * kThreads + t) * V, aligned, ev[u]);
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

  // 2. Layout.
  const int total = tiny_padded_scan<kThreads>(cnt, cs, E, a.block_size, warp_sums);
  Probe::mark(4);
  if (blockIdx.x == 0 && t == 0) *a.total = total;

  // 3. This block's rows [r0, r1) (r0 < max_padded by the grid size).
  const int r0 = static_cast<int>(blockIdx.x) * chunk;
  const int r1 = r0 + min(chunk, a.max_padded - r0);

  // Slots of the experts whose rows start in the chunk.
#pragma unroll 1
  for (int i = t; i < n; i += kThreads) {
    const int v = slot[i];
    if (v < 0) continue;
    const int st = cs[v & kTinyExpertMask];
    if (st < r0 || st >= r1) continue;
    const int row = st + (v >> kTinyExpertBits);
    if (row < a.max_padded) a.sorted[row] = i;
  }
  Probe::mark(5);

  // Padding rows: scalar rows up to 16-byte alignment at both ends, four rows
  // per vector store between (mixed vectors: scalar stores, padding rows only).
  const std::int32_t pad = a.numel;
  const int mis = static_cast<int>((reinterpret_cast<std::uintptr_t>(a.sorted + r0) & 15) / 4);
  const int mid = min(r1, mis == 0 ? r0 : r0 + (4 - mis));
  const int nvec = (r1 - mid) / 4;
  const int vend = mid + 4 * nvec;
  int eg = 0;  // owner guess, per thread
#pragma unroll 1
  for (int k = t; k < (mid - r0) + (r1 - vend); k += kThreads) {
    const int r = k < mid - r0 ? r0 + k : vend + (k - (mid - r0));
    if (r >= total || tiny_is_pad(r, cs, cnt, E, eg)) a.sorted[r] = pad;
  }
  int4* q = reinterpret_cast<int4*>(a.sorted + mid);
#pragma unroll 1
  for (int v = t; v < nvec; v += kThreads) {
    const int r = mid + 4 * v;
    if (r < total) {  // may hold slots
      const int mask = tiny_pad_mask4(r, cs, cnt, E, total, eg);
      if (mask != 15) {
#pragma unroll 1
        for (int k = 0; k < 4; ++k)
          if ((mask >> k) & 1) a.sorted[r + k] = pad;
        continue;
      }
    }
    q[v] = make_int4(pad, pad, pad, pad);
  }
  Probe::mark(6);

  // expert_ids of the blocks whose first row lies in the chunk.
  // 32-bit unsigned: r1 + B - 1 < 2^32, and a 64-bit division costs code.
  const unsigned B = static_cast<unsigned>(a.block_size);
  const int j0 = static_cast<int>((static_cast<unsigned>(r0) + B - 1) / B);
  const int j1 = min(static_cast<int>((static_cast<unsigned>(r1) + B - 1) / B), a.max_blocks);
#pragma unroll 1
  for (int j = j0 + t; j < j1; j += kThreads) {
    const int row = j * static_cast<int>(B);
    a.eids[j] = row < total ? owner_of(cs, E, row) : -1;
  }
  Probe::end();
}

// Launch shape. chunk: rows per block, a multiple of 4 (16-byte aligned chunk
// starts when sorted_token_ids is).
struct TinyPlan {
  int grid = 1;
  int chunk = 4;
  int threads = 256;
};

// Rows per block from a wanted grid size (clamped to [1, rows / 4]).
inline TinyPlan tiny_plan_with(const Problem& p, int want_grid, int threads) {
  TinyPlan pl;
  pl.threads = threads;
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const std::int64_t g = std::clamp<std::int64_t>(want_grid, 1, ceil_div<std::int64_t>(rows, 4));
  const std::int64_t chunk = ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, g), 4) * 4;
  pl.chunk = static_cast<int>(chunk);
  pl.grid = static_cast<int>(ceil_div<std::int64_t>(rows, chunk));
  return pl;
}

// Default shape, from the H100 sweep (probe_align sweep, docs/align.md):
// ~1024 rows (4 KiB) of sorted_token_ids per block, at most one block per SM;
// 256 threads while numel <= 1024 (fewer warps = shorter barriers), 512 up to
// 4096, 1024 beyond (every block ranks all slots: more threads, more atomics
// in flight), and never fewer than one thread per 16 rows of a chunk.
inline TinyPlan tiny_plan(const Problem& p) {
  const int sms = device_caps().sm_count;
  const std::int64_t g = std::clamp<std::int64_t>(
      ceil_div<std::int64_t>(p.max_num_tokens_padded, 1024), 1, sms);
  int threads = p.numel <= 1024 ? 256 : p.numel <= 4096 ? 512 : 1024;
  const std::int64_t chunk = ceil_div<std::int64_t>(std::max<std::int64_t>(p.max_num_tokens_padded, 1), g);
  while (threads < 1024 && chunk > 16 * threads) threads *= 2;
  return tiny_plan_with(p, static_cast<int>(g), threads);
}

inline const char* tiny_not_applicable(const Problem& p) {
  if (p.numel > kTinyMaxNumel) return "needs numel <= 32768 (every block reads all ids)";
  if (p.num_experts > kTinyMaxExperts) return "needs E <= 16384";
  if (tiny_smem(p.numel, p.num_experts) + 256 > device_caps().smem_optin)
    return "needs 4*(numel + 2E + 1) bytes of shared memory per block";
  return nullptr;
}

template <class IdT, int kThreads, bool kWide>
inline void launch_tiny_as(const Args& a, const TinyPlan& pl, std::size_t smem, cudaStream_t s) {
  allow_smem(tiny_kernel<IdT, kThreads, kWide>, smem);
  tiny_kernel<IdT, kThreads, kWide><<<pl.grid, kThreads, smem, s>>>(a, pl.chunk);
}

template <class IdT, int kThreads>
inline void launch_tiny_threads(const Args& a, const TinyPlan& pl, std::size_t smem,
                                cudaStream_t s) {
  if (a.numel > kTinyNarrow * kThreads)
    launch_tiny_as<IdT, kThreads, true>(a, pl, smem, s);
  else
    launch_tiny_as<IdT, kThreads, false>(a, pl, smem, s);
}

template <class IdT>
inline void launch_tiny(const Problem& p, const Buffers& bufs, cudaStream_t s,
                        const TinyPlan& pl) {
  const Args a = make_args(p, bufs);
  const std::size_t smem = tiny_smem(p.numel, p.num_experts);
  switch (pl.threads) {
    case 512: launch_tiny_threads<IdT, 512>(a, pl, smem, s); break;
    case 1024: launch_tiny_threads<IdT, 1024>(a, pl, smem, s); break;
    default: launch_tiny_threads<IdT, 256>(a, pl, smem, s); break;
  }
}

template <class IdT>
inline void launch_tiny(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  launch_tiny<IdT>(p, bufs, s, tiny_plan(p));
}

}  // namespace moekit::align::detail
