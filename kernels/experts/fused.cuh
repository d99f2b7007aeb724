// fused: the whole expert computation of a small batch in one persistent
// kernel, no layout and no combine launch around it.
//
// Why. At decode the weight stream is the work, and what is left around it is
// launches: the layout (align and the rows), gemm1, gemm2 and the combine
// each wait for the one before and ramp up and down on their own (at the TP8
// shard's T 1 the launches took over 1.7x the time the read bandwidth needs
// for its weights: docs/bench/experts-notes.md).
// Here one grid does it all:
//  - Every CTA lists the slots itself from topk_ids (and the expert map): a
//    slot a thread, ranked by (expert, slot) in shared memory, the runs of one
//    expert are the entries (decode.cuh's Entry over this list). T * K <= 256.
//    The slot is the row: gemm1 reads hidden[t] of slot t * K + j and writes
//    a[slot]; gemm2 reads a[slot] and writes y[slot]; inverse is the identity
//    on kept slots (written by CTA 0, for --keep-intermediate).
//  - Items: first every (entry, gemm1 tile), then every (entry, gemm2 tile),
//    dealt round-robin over a grid that is all resident at once (SMs x
//    occupancy: the launcher's persistent size), so a CTA reaches a gemm2 item
//    only after its own gemm1 items, and a gemm2 item that waits for its
//    expert's gemm1 tiles (a release counter per entry) waits for CTAs that
//    never wait: no deadlock. While it waits it has already loaded its first
//    W2 batch: the W2 stream starts during gemm1's.
//  - The combine: each gemm2 item counts itself on its column tile (a release,
//    nothing waits for it); after its items, CTA c waits for column tile c to
//    have every entry's count and sums that tile's columns of every token, j
//    ascending, f32 with one rounding: combine's rule. (A last-arriver test
//    per item, __threadfence and a returning atomic, stalled every gemm2 item
//    for two round trips: DeepSeek-V3 T 16 6 % slower than decode.)
//  - The counters live at the start of the workspace, zero between launches:
//    the last CTA to leave resets them (the variant keeps a zeroed workspace).
//  - Where there are fewer gemm1 items than CTAs, the CTAs that start on a
//    gemm2 item ask for its W2 tile in L2 while they wait (bulk prefetch,
//    within a budget of half the L2): the W2 stream then shares the DRAM with
//    gemm1's instead of following it (the TP8 shard at T 1: 4 % faster).
//    Elsewhere it cost (Mixtral T 1: 7 % without the budget, 2 % within it;
//    prefetching every CTA's W2 tiles at the start: 7-12 % at T 2-4).
//  - A wait that does not end in seconds (a grid that could not all be
//    resident) traps: a CUDA error, never a hang.
// Shapes the layouts would not take are not a concern: a slot's row is its
// index, so y holds T * K rows (the family's row capacity is at least that).
#pragma once

#include <cstddef>
#include <cstdint>

#include "experts/decode.cuh"
#include "primitives/bulk_copy.cuh"
#include "primitives/flag.cuh"
#include "primitives/lane_mask.cuh"
#include "primitives/pdl.cuh"

namespace moekit::experts::fused {

constexpr int kMaxSlots = decode::kThreads;  // T * K of a launch: a slot a thread when listing
constexpr std::int64_t kPrefetchChunk = 32 * 1024;  // bytes per L2 prefetch instruction

struct Args {
  decode::Args g1;  // x = hidden, w = W1, out = a (workspace), k_len = H, n_out = I (map unused)
  decode::Args g2;  // x = a, w = W2, out = y, k_len = I, n_out = H
  const std::int32_t* ids = nullptr;         // [T, K]
  const float* weights = nullptr;            // [T, K]
  const std::int32_t* expert_map = nullptr;  // [map_size] global -> local, or nullptr
  int map_size = 0;
  std::int32_t* inverse = nullptr;           // [T, K]
  void* out = nullptr;                       // [T, H]
  unsigned* counters = nullptr;              // [counter_words(tiles2)], zero between launches
  int tokens = 0, topk = 0;
  float scaling = 1.0f;
  bool vec_out = false;  // y and out 16-byte aligned, H % 8 == 0: the combine's 16-byte path
  // gemm2 items below this index that find their expert's gemm1 unfinished
  // prefetch their W2 tile into L2 (the launcher's budget: half the L2).
  std::int64_t prefetch_items = 0;
};

// Counter words: one per entry (gemm1 tiles done), one per gemm2 tile
// (entries done), one for the CTAs that left.
__host__ __device__ constexpr std::size_t counter_words(int tiles2) {
  return std::size_t(kMaxSlots) + std::size_t(tiles2) + 1;
}

// Dynamic shared memory: the larger of the two streams' k-slice partials.
template <int NT>
constexpr std::size_t smem_bytes(int ks1, int ks2) {
  const int ks = ks1 > ks2 ? ks1 : ks2;
  return std::size_t(ks - 1) * std::size_t(decode::kWarps / ks) * decode::kMT * NT * 4 * 32 * sizeof(float);
}

// Sums the columns [c0, c1) of every token: out[t, c] = S * sum_j w[t, j] *
// y[t * K + j, c] over kept slots, j ascending (combine's rule). y was written
// by other CTAs of this grid: read through L2.
template <class T>
__device__ __forceinline__ void combine_cols(const Args& a, const int* key, int E, std::int64_t c0, std::int64_t c1) {
  const T* y = static_cast<const T*>(a.g2.out);
  T* out = static_cast<T*>(a.out);
  const std::int64_t H = a.g2.n_out;
  const int K = a.topk;
  const int chunks = static_cast<int>((c1 - c0 + 7) / 8);
  for (int idx = threadIdx.x; idx < a.tokens * chunks; idx += decode::kThreads) {
    const int tk = idx / chunks;
    const std::int64_t c = c0 + std::int64_t(idx % chunks) * 8;
    const bool vec = a.vec_out && c + 8 <= c1;
    float acc[8];
#pragma unroll
    for (int v = 0; v < 8; ++v) acc[v] = 0.0f;
    for (int j = 0; j < K; ++j) {
      const int s = tk * K + j;
      if (key[s] >= E) continue;
      const float wt = a.weights[s];
      const T* src = y + std::int64_t(s) * H + c;
      if (vec) {
        const uint4 raw = __ldcg(reinterpret_cast<const uint4*>(src));
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int v = 0; v < 8; ++v) acc[v] = __fmaf_rn(wt, to_f32(e[v]), acc[v]);
      } else {
#pragma unroll
        for (int v = 0; v < 8; ++v)
          if (c + v < c1) {
            const unsigned short bits = __ldcg(reinterpret_cast<const unsigned short*>(src + v));
            acc[v] = __fmaf_rn(wt, to_f32(*reinterpret_cast<const T*>(&bits)), acc[v]);
          }
      }
    }
    T* dst = out + std::int64_t(tk) * H + c;
    if (vec) {
      uint4 raw;
      T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
      for (int v = 0; v < 8; ++v) e[v] = from_f32<T>(__fmul_rn(acc[v], a.scaling));
      *reinterpret_cast<uint4*>(dst) = raw;
    } else {
#pragma unroll
      for (int v = 0; v < 8; ++v)
        if (c + v < c1) dst[v] = from_f32<T>(__fmul_rn(acc[v], a.scaling));
    }
  }
}

// Spins until *p >= want; traps after seconds (a grid that is not all
// resident would otherwise hang here).
__device__ __forceinline__ void wait_at_least(const unsigned* p, unsigned want) {
  unsigned spins = 0;
  while (prim::ld_acquire_gpu(p) < want) {
    __nanosleep(128);
    if (++spins == (1u << 25)) __trap();  // ~4 s of 128 ns naps
  }
}

template <class T, int NT, bool kVec>
__global__ void __launch_bounds__(decode::kThreads, 2) fused_kernel(const __grid_constant__ Args a) {
  using S1 = decode::Stream<T, NT, kVec, true>;
  using S2 = decode::Stream<T, NT, kVec, false>;
  extern __shared__ float4 smem_raw[];
  __shared__ int s_key[kMaxSlots];   // slot -> local expert, E = dropped
  __shared__ int s_list[kMaxSlots];  // kept slots in (expert, slot) order
  __shared__ int s_skey[kMaxSlots];  // their experts
  __shared__ decode::Entry s_tbl[kMaxSlots];
  __shared__ int s_warp[decode::kWarps];

  const int tid = threadIdx.x, lane = tid % 32, wid = tid / 32;
  const int n = a.tokens * a.topk;  // <= kMaxSlots (the launcher's limit)
  const int E = a.g1.experts;

  prim::pdl_wait();  // topk_ids and weights may be the previous launch's output

  // The slot list: keys, then each kept slot's rank in (expert, slot) order.
  int key = E;
  if (tid < n) {
    int id = a.ids[tid];
    if (a.expert_map != nullptr) id = id >= 0 && id < a.map_size ? a.expert_map[id] : -1;
    key = id >= 0 && id < E ? id : E;
    s_key[tid] = key;
    if (blockIdx.x == 0) a.inverse[tid] = key < E ? tid : -1;
  }
  const int kept = __syncthreads_count(key < E);
  if (key < E) {
    int rank = 0;
    for (int q = 0; q < n; ++q) {
      const int kq = s_key[q];
      rank += (kq < key) | ((kq == key) & (q < tid));
    }
    s_list[rank] = tid;
    s_skey[rank] = key;
  }
  __syncthreads();
  // Entries: the runs of one expert in the list, in list order (the same in
  // every CTA).
  const bool head = tid < kept && (tid == 0 || s_skey[tid - 1] != s_skey[tid]);
  const unsigned ballot = __ballot_sync(0xffffffffu, head);
  if (lane == 0) s_warp[wid] = __popc(ballot);
  __syncthreads();
  int before = 0, entries = 0;
  for (int w = 0; w < decode::kWarps; ++w) {
    before += w < wid ? s_warp[w] : 0;
    entries += s_warp[w];
  }
  const int idx = before + __popc(ballot & prim::lanemask_lt(static_cast<unsigned>(lane)));
  if (head) s_tbl[idx] = decode::Entry{s_skey[tid], tid, kept};
  __syncthreads();
  if (tid + 1 < entries) s_tbl[tid].end = s_tbl[tid + 1].begin;
  __syncthreads();

  const std::int64_t G = gridDim.x;

  if (entries == 0) {  // every slot dropped: out is zero
    T* out = static_cast<T*>(a.out);
    const std::int64_t total = std::int64_t(a.tokens) * a.g2.n_out;
    for (std::int64_t i = blockIdx.x * std::int64_t(decode::kThreads) + tid; i < total; i += G * decode::kThreads)
      out[i] = from_f32<T>(0.0f);
  }

  float* red = reinterpret_cast<float*>(smem_raw);
  const std::int64_t items1 = std::int64_t(entries) * a.g1.tiles, items2 = std::int64_t(entries) * a.g2.tiles;

  const std::int64_t width2 = decode::tile_cols(a.g2.ks, false);  // columns of a gemm2 tile
  const std::int64_t first2 = items1 + ((blockIdx.x - items1) % G + G) % G;  // this CTA's first gemm2 item
  // gemm2 item j's W2 rows into L2 (contiguous: W2 [E, H, I], rows h0 .. h1 - 1 of its expert).
  const auto prefetch_tile = [&](std::int64_t j) {
    const int e = static_cast<int>(j / a.g2.tiles), tile = static_cast<int>(j % a.g2.tiles);
    const std::int64_t h0 = std::int64_t(tile) * width2, h1 = h0 + width2 < a.g2.n_out ? h0 + width2 : a.g2.n_out;
    const char* base =
        static_cast<const char*>(a.g2.w) + (std::int64_t(s_tbl[e].expert) * a.g2.n_out + h0) * a.g2.k_len * 2;
    const std::int64_t bytes = (h1 - h0) * a.g2.k_len * 2;  // a multiple of 16 (kVec: I % 8 == 0)
    for (std::int64_t off = 0; off < bytes; off += kPrefetchChunk)
      prim::bulk_prefetch_l2(base + off, static_cast<unsigned>(bytes - off < kPrefetchChunk ? bytes - off : kPrefetchChunk));
  };

  // gemm1 items, then gemm2 items: item `it` of the whole sequence is CTA
  // it % G's, so no CTA reaches a gemm2 item before its own gemm1 items.
  for (std::int64_t it = blockIdx.x; it < items1; it += G) {
    const int e = static_cast<int>(it / a.g1.tiles);
    const S1 st(a.g1, red);
    typename S1::Batch unused;
    bool no_preload = false;
    st.template item<decode::Ld::kReadOnly, false>(s_tbl[e], static_cast<int>(it % a.g1.tiles),
                                                   decode::Slots{s_list, a.topk}, unused, no_preload);
    __syncthreads();  // the CTA's a stores, ordered before thread 0's release
    if (tid == 0) prim::red_release_gpu(a.counters + e, 1u);
  }
  for (std::int64_t it = first2; it < items1 + items2; it += G) {
    const std::int64_t j = it - items1;
    const int e = static_cast<int>(j / a.g2.tiles), tile = static_cast<int>(j % a.g2.tiles);
    {
      const S2 st(a.g2, red);
      typename S2::Batch wv;  // the item's batches, the first one loaded before the wait
      bool preloaded = st.preload(tile, s_tbl[e].expert, wv);
      if (tid == 0) {
        const unsigned* done = a.counters + e;
        const unsigned want = static_cast<unsigned>(a.g1.tiles);
        // A real wait (CTAs that start on a gemm2 item: fewer gemm1 items
        // than CTAs): the item's W2 rows go to L2 meanwhile, so the W2 stream
        // shares the DRAM with gemm1's instead of following it.
        if (kVec && items1 < G && j < a.prefetch_items && prim::ld_acquire_gpu(done) < want) prefetch_tile(j);
        wait_at_least(done, want);
      }
      __syncthreads();  // thread 0's acquire orders the gemm1 stores before every a load below
      st.template item<decode::Ld::kCoherent, true>(s_tbl[e], tile, decode::Slots{s_list, 1}, wv, preloaded);
    }
    __syncthreads();  // the CTA's y stores, ordered before thread 0's release
    if (tid == 0) prim::red_release_gpu(a.counters + kMaxSlots + tile, 1u);
  }

  // The combine: CTA c sums column tile c (and c + G, ...) once every entry's
  // item of it is done. The counts were releases that no item waited for; a
  // CTA waits here only after its own items, near the end of the stream.
  for (int tile = blockIdx.x; entries > 0 && tile < a.g2.tiles; tile += static_cast<int>(G)) {
    if (tid == 0) wait_at_least(a.counters + kMaxSlots + tile, static_cast<unsigned>(entries));
    __syncthreads();  // thread 0's acquire orders every y store of the tile before the loads
    const std::int64_t c0 = tile * width2, c1 = c0 + width2 < a.g2.n_out ? c0 + width2 : a.g2.n_out;
    combine_cols<T>(a, s_key, E, c0, c1);
  }

  // After the items, not at the start (pdl.cuh's exception): the TP8 shard at
  // T 1 measured 2-4 % faster so (docs/bench/experts-notes.md).
  prim::pdl_launch_dependents();
  // The last CTA to leave puts the counters back to zero for the next launch.
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    unsigned* done1 = a.counters;              // per entry: gemm1 tiles done
    unsigned* done2 = a.counters + kMaxSlots;  // per gemm2 tile: entries done
    unsigned* left = done2 + a.g2.tiles;       // CTAs that left
    if (atomicAdd(left, 1u) == static_cast<unsigned>(G - 1)) {
      __threadfence();
      for (int e = 0; e < entries; ++e) done1[e] = 0;
      for (int c = 0; c < a.g2.tiles; ++c) done2[c] = 0;
      *left = 0;
    }
  }
}

// Every branch that guards a __syncthreads above is uniform across the CTA
// (entries, items and tiles are the same in every thread of it).

}  // namespace moekit::experts::fused
