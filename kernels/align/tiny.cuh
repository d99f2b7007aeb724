// Variant `tiny` (ours, small inputs): ONE launch, no global atomics, no
// workspace, no memset node. Built for latency: a short barrier chain and a
// padding fill spread over many blocks.
//
// Every block of the grid:
//   1. loads ALL ids (few: numel <= kTinyMaxNumel; the first loads are issued
//      before the counters are zeroed so their latency overlaps) and ranks each
//      slot inside its expert with a shared-memory atomicAdd whose return value
//      is the rank (or, for few experts, one atomic per group of equal lanes
//      found by ballots, see warp_peers), keeping (expert, rank) per slot in
//      shared memory;
//   2. scans the padded counts (one block scan over E);
//   3. writes ONLY its own contiguous chunk [r0, r1) of sorted_token_ids:
//      the padding rows of the chunk (16-byte stores where four rows are all
//      padding), the expert_ids of the blocks that start in the chunk, and the
//      slots of every expert whose row range STARTS in the chunk (they may run
//      into the next chunk, whose owner skips them as non-padding rows).
//
// Atomic ranks differ between blocks, which is why one block places all the
// slots of an expert: each expert is placed by exactly one block, with that
// block's ranks, so every slot lands exactly once. The order of slots inside
// an expert is not defined (not a stable variant).
#pragma once

#include "align/common.cuh"
#include "align/host_util.cuh"

#include <algorithm>

namespace moekit::align::detail {

constexpr int kTinyMaxNumel = 32768;  // every block re-reads all ids: a small-input design
constexpr int kTinyExpertBits = 14;   // E <= 16384: expert in the low bits of a packed slot
constexpr int kTinyExpertMask = (1 << kTinyExpertBits) - 1;
constexpr int kTinyMaxExperts = 1 << kTinyExpertBits;
constexpr int kTinyUnroll = 4;  // 16-byte id loads in flight per thread

// How a block ranks the slots of one 32-lane group.
enum class TinyRank {
  kAtomic,  // one shared atomicAdd per slot (same-expert lanes serialise)
  kPeers,   // lanes of one expert found by log2(E)+1 ballots, one atomic per group
};

// Shared memory: packed slots (numel rounded up to 4, first so vector stores
// are 16-byte aligned), E counters, E + 1 scan entries.
inline std::size_t tiny_smem(std::int64_t numel, int num_experts) {
  return sizeof(int) * (static_cast<std::size_t>((numel + 3) / 4 * 4) +
                        2 * static_cast<std::size_t>(num_experts) + 1);
}

// cs[0, n) = exclusive scan of padded(cnt[i], B); cs[n] = total, also
// returned. Each thread owns a contiguous chunk of experts (so n may exceed
// the block); 2 barriers, plus one so every thread sees cs on return.
template <int kThreads>
__device__ __forceinline__ int tiny_padded_scan(const int* cnt, int* cs, int n, int B,
                                                int* warp_sums) {
  constexpr int kWarps = kThreads / kWarp;
  const int t = threadIdx.x, lane = t & (kWarp - 1), w = t / kWarp;
  const int per = (n + kThreads - 1) / kThreads;
  const int lo = min(t * per, n), hi = min(lo + per, n);
  int s = 0;
  for (int i = lo; i < hi; ++i) s += padded(cnt[i], B);
  const int incl = warp_inclusive_scan(s);
  if (lane == kWarp - 1) warp_sums[w] = incl;
  __syncthreads();
  if (w == 0) {
    const int v = lane < kWarps ? warp_sums[lane] : 0;
    const int inc = warp_inclusive_scan(v);
    warp_sums[lane] = inc - v;
    if (lane == kWarp - 1) warp_sums[kWarp] = inc;
  }
  __syncthreads();
  int run = warp_sums[w] + incl - s;
  for (int i = lo; i < hi; ++i) {
    cs[i] = run;
    run += padded(cnt[i], B);
  }
  const int total = warp_sums[kWarp];
  if (t == 0) cs[n] = total;
  __syncthreads();
  return total;
}

// Packed (expert, rank) of each of the V slots of one thread, -1 if dropped.
template <TinyRank kRank, int V>
__device__ __forceinline__ void tiny_rank(const int (&e)[V], int* cnt, int nbits, int (&out)[V]) {
#pragma unroll
  for (int k = 0; k < V; ++k) {
    if constexpr (kRank == TinyRank::kAtomic) {
      out[k] = e[k] >= 0 ? e[k] | (atomicAdd(cnt + e[k], 1) << kTinyExpertBits) : -1;
    } else {
      const unsigned peers = warp_peers(e[k], nbits);
      const int leader = __ffs(peers) - 1;
      const int lane = threadIdx.x & (kWarp - 1);
      int base = 0;
      if (e[k] >= 0 && lane == leader) base = atomicAdd(cnt + e[k], __popc(peers));
      base = __shfl_sync(kFullMask, base, leader);
      out[k] = e[k] >= 0 ? e[k] | ((base + __popc(peers & lanemask_lt())) << kTinyExpertBits)
                         : -1;
    }
  }
}

// Is row r (< total) a padding row? e: a guess of its owner, updated.
__device__ __forceinline__ bool tiny_is_pad(int r, const int* cs, const int* cnt, int E,
                                            int& e) {
  if (r >= cs[e + 1] || r < cs[e]) e = owner_of(cs, E, r);
  return r >= cs[e] + cnt[e];
}

template <class IdT, int kThreads, TinyRank kRank>
__global__ void __launch_bounds__(kThreads) tiny_kernel(Args a, int chunk) {
  extern __shared__ int4 sm4[];
  __shared__ int warp_sums[kWarp + 1];
  constexpr int V = kVec<IdT>, U = kTinyUnroll;
  const int E = a.num_experts, n = a.numel;
  int* slot = reinterpret_cast<int*>(sm4);  // (n + 3) / 4 * 4
  int* cnt = slot + (n + 3) / 4 * 4;        // E
  int* cs = cnt + E;                        // E + 1
  const int t = threadIdx.x;
  const bool aligned = ids_aligned16(a);
  const int nbits = expert_bits(E);

  // 1. Rank. The first loads go out before the counters are zeroed.
  int ev[U][V];
#pragma unroll
  for (int u = 0; u < U; ++u) load_experts<IdT>(a, (u * kThreads + t) * V, aligned, ev[u]);
  for (int e = t; e < E; e += kThreads) cnt[e] = 0;
  __syncthreads();
  for (int base = 0; base < n; base += U * kThreads * V) {  // uniform trip count (ballots)
    if (base > 0) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        load_experts<IdT>(a, base + (u * kThreads + t) * V, aligned, ev[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int first = base + (u * kThreads + t) * V;
      if (kRank == TinyRank::kAtomic && first >= n) break;
      int pk[V];
      tiny_rank<kRank, V>(ev[u], cnt, nbits, pk);
      if (first < n) {
        if constexpr (V == 4)
          *reinterpret_cast<int4*>(slot + first) = make_int4(pk[0], pk[1], pk[2], pk[3]);
        else
          *reinterpret_cast<int2*>(slot + first) = make_int2(pk[0], pk[1]);
      }
    }
  }
  __syncthreads();

  // 2. Layout.
  const int total = tiny_padded_scan<kThreads>(cnt, cs, E, a.block_size, warp_sums);
  if (blockIdx.x == 0 && t == 0) *a.total = total;

  // 3. This block's chunk of rows.
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.x) * chunk;
  const std::int64_t r1 = min(r0 + chunk, static_cast<std::int64_t>(a.max_padded));
  if (r0 >= r1) return;

  // Slots of the experts whose rows start in the chunk.
  for (int i = t; i < n; i += kThreads) {
    const int v = slot[i];
    if (v < 0) continue;
    const int e = v & kTinyExpertMask;
    const int st = cs[e];
    if (st < r0 || st >= r1) continue;
    const int row = st + (v >> kTinyExpertBits);
    if (row < a.max_padded) a.sorted[row] = i;
  }

  // Padding rows of the chunk: scalar head and tail up to 16-byte alignment,
  // four rows per vector store in between (mixed vectors: scalars, pad rows only).
  const std::int32_t pad = a.numel;
  const auto mis = static_cast<std::int64_t>((reinterpret_cast<std::uintptr_t>(a.sorted + r0) & 15) / 4);
  const std::int64_t mid = min(r1, mis == 0 ? r0 : r0 + (4 - mis));
  const std::int64_t nvec = (r1 - mid) / 4;
  const std::int64_t vend = mid + 4 * nvec;
  int eg = 0;  // owner guess, per thread
  for (std::int64_t r = r0 + t; r < mid; r += kThreads)
    if (r >= total || tiny_is_pad(static_cast<int>(r), cs, cnt, E, eg)) a.sorted[r] = pad;
  for (std::int64_t r = vend + t; r < r1; r += kThreads)
    if (r >= total || tiny_is_pad(static_cast<int>(r), cs, cnt, E, eg)) a.sorted[r] = pad;
  int4* q = reinterpret_cast<int4*>(a.sorted + mid);
  for (std::int64_t v = t; v < nvec; v += kThreads) {
    const int r = static_cast<int>(mid + 4 * v);
    if (r + 3 < total) {
      bool p[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) p[k] = tiny_is_pad(r + k, cs, cnt, E, eg);
      if (!(p[0] && p[1] && p[2] && p[3])) {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (p[k]) a.sorted[r + k] = pad;
        continue;
      }
    } else if (r < total) {
      bool p[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) p[k] = r + k >= total || tiny_is_pad(r + k, cs, cnt, E, eg);
      if (!(p[0] && p[1] && p[2] && p[3])) {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (p[k]) a.sorted[r + k] = pad;
        continue;
      }
    }
    q[v] = make_int4(pad, pad, pad, pad);
  }

  // expert_ids of the blocks whose first row lies in the chunk.
  const std::int64_t B = a.block_size;
  const std::int64_t j0 = (r0 + B - 1) / B;
  const std::int64_t j1 = min((r1 + B - 1) / B, static_cast<std::int64_t>(a.max_blocks));
  for (std::int64_t j = j0 + t; j < j1; j += kThreads) {
    const std::int64_t row = j * B;
    a.eids[j] = row < total ? owner_of(cs, E, static_cast<int>(row)) : -1;
  }
}

// Launch shape. chunk: rows per block, a multiple of 4 (16-byte aligned chunk
// starts when sorted_token_ids is).
struct TinyPlan {
  int grid = 1;
  int chunk = 4;
  int threads = 512;
  TinyRank rank = TinyRank::kAtomic;
};

// Rows per block from a wanted grid size (clamped to [1, rows / 4]).
inline TinyPlan tiny_plan_with(const Problem& p, int want_grid, int threads, TinyRank rank) {
  TinyPlan pl;
  pl.threads = threads;
  pl.rank = rank;
  const std::int64_t rows = std::max<std::int64_t>(p.max_num_tokens_padded, 1);
  const std::int64_t g = std::clamp<std::int64_t>(want_grid, 1, ceil_div<std::int64_t>(rows, 4));
  const std::int64_t chunk = ceil_div<std::int64_t>(ceil_div<std::int64_t>(rows, g), 4) * 4;
  pl.chunk = static_cast<int>(chunk);
  pl.grid = static_cast<int>(ceil_div<std::int64_t>(rows, chunk));
  return pl;
}

// Default shape (docs/align.md, "tiny"): ~8 KiB of sorted_token_ids per block,
// at most one block per SM, and fewer blocks as numel grows (each re-reads all
// ids); ballots for few experts, where atomics on the same counter collide.
inline TinyPlan tiny_plan(const Problem& p) {
  const int sms = device_caps().sm_count;
  const std::int64_t by_rows = ceil_div<std::int64_t>(p.max_num_tokens_padded, 2048);
  const std::int64_t by_ids = std::max<std::int64_t>(8, (std::int64_t(1) << 20) / std::max<std::int64_t>(p.numel, 1));
  const int g = static_cast<int>(std::min<std::int64_t>({by_rows, by_ids, sms}));
  return tiny_plan_with(p, g, 512, p.num_experts <= 16 ? TinyRank::kPeers : TinyRank::kAtomic);
}

inline const char* tiny_not_applicable(const Problem& p) {
  if (p.numel > kTinyMaxNumel) return "needs numel <= 32768 (every block reads all ids)";
  if (p.num_experts > kTinyMaxExperts) return "needs E <= 16384";
  if (tiny_smem(p.numel, p.num_experts) + 256 > device_caps().smem_optin)
    return "needs 4*(numel + 2E + 1) bytes of shared memory per block";
  return nullptr;
}

template <class IdT, int kThreads, TinyRank kRank>
inline void launch_tiny_as(const Args& a, const TinyPlan& pl, std::size_t smem, cudaStream_t s) {
  allow_smem(tiny_kernel<IdT, kThreads, kRank>, smem);
  tiny_kernel<IdT, kThreads, kRank><<<pl.grid, kThreads, smem, s>>>(a, pl.chunk);
}

template <class IdT, TinyRank kRank>
inline void launch_tiny_rank(const Args& a, const TinyPlan& pl, std::size_t smem,
                             cudaStream_t s) {
  switch (pl.threads) {
    case 256: launch_tiny_as<IdT, 256, kRank>(a, pl, smem, s); break;
    case 1024: launch_tiny_as<IdT, 1024, kRank>(a, pl, smem, s); break;
    default: launch_tiny_as<IdT, 512, kRank>(a, pl, smem, s); break;
  }
}

template <class IdT>
inline void launch_tiny(const Problem& p, const Buffers& bufs, cudaStream_t s,
                        const TinyPlan& pl) {
  const Args a = make_args(p, bufs);
  const std::size_t smem = tiny_smem(p.numel, p.num_experts);
  if (pl.rank == TinyRank::kPeers)
    launch_tiny_rank<IdT, TinyRank::kPeers>(a, pl, smem, s);
  else
    launch_tiny_rank<IdT, TinyRank::kAtomic>(a, pl, smem, s);
}

template <class IdT>
inline void launch_tiny(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  launch_tiny<IdT>(p, bufs, s, tiny_plan(p));
}

}  // namespace moekit::align::detail
