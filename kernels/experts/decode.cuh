// decode: the FFN for small T (few rows per active expert), a weight stream.
//
// Why this shape. At decode an expert has a handful of rows, so the FFN is
// bound by reading the active experts' W1 and W2 once; the design is about
// keeping every SM's memory pipe full and nothing else:
//  - Swap-AB on the tensor cores (mma.sync m16n8k16, f32 accumulate): weight
//    rows are the M side (16 rows a tile), the expert's rows the N side (8 a
//    tile). SIMT f32 FMAs run out of issue slots near 16 rows per expert at
//    the read bandwidth (by count: ~1.6e12 weight elements/s on an H100 times
//    16 FMAs is most of its f32 rate); the mma keeps the math small up to 32.
//  - Weights go straight from global memory to the mma fragments: a thread
//    loads 16 bytes (8 consecutive k) of weight rows g and g+8 and the same 8
//    k of activation row g, and uses elements 0-3 for one mma and 4-7 for the
//    next. That permutes k identically on both operands, which a dot product
//    does not see, so no shared-memory staging and no ldmatrix. Weights load
//    with L1::no_allocate and L2::128B: an instruction reads 64 bytes of each
//    of 8 rows and the next one the other half of those lines, and fetching
//    whole lines on the first miss streamed 6-9 % faster on an H200 (plain
//    loads ~76 % of the read bandwidth; neither a per-thread cp.async ring
//    nor L2 bulk prefetch ahead of the loads helped: docs/bench/experts-notes.md).
//    The activation rows are small, re-read by the CTA and left to the L1 and L2.
//  - Work item = (active expert, tile of output rows), CTA = 8 warps =
//    KS k-slices x (8 / KS) column groups: the k split inside the CTA (batches
//    of k dealt round-robin, so the warps read neighbouring pieces of the same
//    rows; reduced through shared memory in a fixed order, so deterministic) gives
//    enough warps at T = 1 (DeepSeek-V3's TP8 shard: 8 experts x 512 W1 rows),
//    and KS shrinks for short reductions (W2 of the shard: I = 256) and for
//    more rows per group (the activations an item reads stay a small share
//    of its weight bytes).
//  - A persistent grid (SMs x occupancy, never more than the items) over a
//    list of the active experts that every CTA builds itself in shared memory
//    from the RowMap (one coalesced load round: offsets, or expert_ids' run
//    starts; gemm2 builds it before its pdl_wait, the layout being two
//    launches back): no host sync, no planning launch, and the CTAs
//    of inactive experts never exist (DeepSeek-V3 at T = 1 has 8 of 256). The
//    list is built in windows of kTable entries, so any E works.
//  - An expert's rows are contiguous in both layouts (compact: offsets;
//    padded: its slots come first in its padded range, the layout's promise, so
//    the list builder scans each run up to its first padding row). Rows go
//    in groups of 8 * NT (NT from T * K / min(E, T * K), registry.cu); an
//    expert with more rows streams its tile once per group (from L2 when it
//    still holds it): prefill is right, just slow.
//  - Vector loads need 16-byte aligned bases and rows (K % 8 == 0); the
//    launcher checks and otherwise instantiates the scalar-load path (same
//    kernel, kVec = false). Tails of k and of the output rows are predicated.
// gemm1 applies the activation (act.cuh) in registers: a warp's m-tile is 8 gate rows and
// their 8 up rows (gate_row / up_row, either W1 layout), so a thread holds
// gate i and up i of the same token row; h is rounded to the dtype, then a.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "experts/act.cuh"
#include "primitives/lane_mask.cuh"
#include "primitives/pdl.cuh"

namespace moekit::experts::decode {

constexpr int kWarps = 8;             // warps per CTA: KS k-slices x (8 / KS) column groups
constexpr int kThreads = kWarps * 32;
constexpr int kMT = 2;                // m-tiles (16 weight rows) per warp and column group
constexpr int kTable = 256;           // active-expert list entries per window: E of the models in issue 32 fit one
constexpr int kMinSlice = 256;        // least k per slice when choosing KS

// One active expert: its rows [begin, end) (padded: the real rows of its run,
// found by build_window).
struct Entry {
  int expert, begin, end;
};

// Everything a launch of either kernel reads. gemm1: x = permuted [rows, H],
// w = W1, out = a [rows, I], k_len = H, n_out = I. gemm2: x = a, w = W2,
// out = y [rows, H], k_len = I, n_out = H.
struct Args {
  const void* x = nullptr;
  const void* w = nullptr;
  void* out = nullptr;
  RowMap map;
  int experts = 0;
  std::int64_t k_len = 0;
  std::int64_t n_out = 0;
  int ks = 1;     // k-slices per CTA (1, 2, 4, 8)
  int tiles = 1;  // output tiles per expert
  Act act = Act::silu;
  W1Layout layout = W1Layout::gate_up;
};

// Dynamic shared memory: the k-slice partial sums, then the expert list.
template <int NT>
constexpr std::size_t smem_bytes(int ks) {
  return std::size_t(ks - 1) * std::size_t(kWarps / ks) * kMT * NT * 4 * 32 * sizeof(float) +
         std::size_t(kTable) * sizeof(Entry);
}

template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                         std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
#else
  __trap();  // the launcher refuses devices below sm_80
#endif
}

// How load8 reads: kStream, a weight stream (read-only, not kept in L1,
// whole 128-byte lines fetched into L2); kReadOnly, data no CTA of the launch
// writes (the non-coherent path, L1 kept); kCoherent, data other CTAs of the
// same launch wrote (fused.cuh's a: L2, never a stale L1 line).
enum class Ld { kStream, kReadOnly, kCoherent };

// 8 consecutive elements p[k .. k+7] as 4 packed pairs (element k in the low
// half of .x), zero where p is null or an element is at or past ke.
// kVec: p + k is 16-byte aligned and k + 8 <= ke or k >= ke (the launcher's
// check: aligned base, row length ke a multiple of 8; k a multiple of 8).
template <bool kVec, Ld kLd>
__device__ __forceinline__ uint4 load8(const unsigned short* p, std::int64_t k, std::int64_t ke) {
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (p == nullptr || k >= ke) return v;
  if constexpr (kVec) {
    if constexpr (kLd == Ld::kStream) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800  // the launcher refuses older devices (.L2::128B needs sm_75)
      asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];"
          : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
          : "l"(p + k));
#else
      v = __ldg(reinterpret_cast<const uint4*>(p + k));
#endif
    } else if constexpr (kLd == Ld::kCoherent) {
      v = __ldcg(reinterpret_cast<const uint4*>(p + k));
    } else {
      v = __ldg(reinterpret_cast<const uint4*>(p + k));
    }
  } else {
    std::uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (k + j >= ke) continue;
      const unsigned short e = kLd == Ld::kCoherent ? __ldcg(p + k + j) : __ldg(p + k + j);
      w[j / 2] |= std::uint32_t(e) << (16 * (j % 2));
    }
    v = make_uint4(w[0], w[1], w[2], w[3]);
  }
  return v;
}

// Columns of one output tile: a CTA's column groups (kWarps / ks) x kMT
// m-tiles, each 8 gate/up pairs (gemm1: columns of a) or 16 weight rows
// (gemm2: columns of y). The launchers' tile counts and fused's tile ranges.
__host__ __device__ constexpr std::int64_t tile_cols(int ks, bool gemm1) {
  return std::int64_t(kWarps / ks) * kMT * (gemm1 ? 8 : 16);
}

// Rows per group and the k-steps of 32 unrolled per load batch.
template <int NT>
constexpr int kUnroll = NT == 1 ? 4 : 2;

// Appends the active experts found at positions [pos, L) of the RowMap to
// tbl, at most kTable; every thread gets the count and the position to resume
// from (L: scanned to the end). Positions: experts (compact) or blocks of B
// rows below num_tokens_post_pad (padded: a run's first block). Ordered
// (a block-wide compaction), so every CTA builds the same list.
__device__ __forceinline__ void build_window(const RowMap& m, int experts, int L, int ntpp, int pos, Entry* tbl,
                                             int* s_warp, int* s_n, int* s_next, int& n_out, int& next_out) {
  const int tid = threadIdx.x, lane = tid % 32, wid = tid / 32;
  if (tid == 0) {
    *s_n = 0;
    *s_next = L;
  }
  __syncthreads();
  for (int base = pos; base < L; base += kThreads) {
    const int j = base + tid;
    bool flag = false;
    Entry en{0, 0, 0};
    if (j < L) {
      if (m.compact) {
        const std::int64_t b = m.offsets[j], e = m.offsets[j + 1];
        flag = e > b;
        en = Entry{j, static_cast<int>(b), static_cast<int>(e)};
      } else {
        const int id = m.expert_ids[j];
        flag = id >= 0 && id < experts && (j == 0 || m.expert_ids[j - 1] != id);
        en = Entry{id, j * m.block_size, ntpp};
      }
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) s_warp[wid] = __popc(ballot);
    __syncthreads();
    const int n0 = *s_n;
    int woff = 0, total = 0;
    for (int w = 0; w < kWarps; ++w) {
      woff += w < wid ? s_warp[w] : 0;
      total += s_warp[w];
    }
    const int idx = n0 + woff + __popc(ballot & prim::lanemask_lt(static_cast<unsigned>(lane)));
    if (flag && idx < kTable) tbl[idx] = en;
    if (flag && idx == kTable) *s_next = j;  // the first entry of the next window
    __syncthreads();                         // every thread has read s_warp and s_n
    const int n1 = n0 + total;
    if (tid == 0) {
      *s_n = n1 < kTable ? n1 : kTable;
      if (n1 == kTable) *s_next = base + kThreads < L ? base + kThreads : L;
    }
    __syncthreads();
    if (n1 >= kTable) break;  // uniform: every thread computed the same n1
  }
  n_out = *s_n;
  next_out = *s_next;
  if (!m.compact) {
    // A padded run's real rows are a prefix of it (the layout: an expert's slots
    // come first, then its padding); one thread per entry finds where they
    // end, kScan rows a round, so the row loop needs no loads.
    constexpr int kScan = 16;
    for (int a = tid; a < n_out; a += kThreads) {
      const int e = tbl[a].expert;
      int r = tbl[a].begin;
      for (;;) {
        unsigned valid = 0;
#pragma unroll
        for (int q = 0; q < kScan; ++q) {
          const int rr = r + q;
          const bool v = rr < ntpp && m.sorted_token_ids[rr] < m.numel && m.expert_ids[rr / m.block_size] == e;
          valid |= unsigned(v) << q;
        }
        const int c = __ffs(~valid) - 1;  // leading valid rows (bit kScan is clear)
        r += c;
        if (c < kScan) break;
      }
      tbl[a].end = r;
    }
  }
  __syncthreads();  // the entries are complete; the shared words may be reset by the next call
}

// Where an item's rows live. The entry's rows [begin, end) are item rows i.
// Contiguous (the layouts): x row and out row are i itself. Slots (fused.cuh,
// no layout): i indexes a list of slots t * K + j; the out row is the slot,
// the x row the slot / x_div (gemm1: K, hidden's row of token t; gemm2: 1,
// a's row of the slot).
struct Contiguous {
  __device__ __forceinline__ int out_row(int i) const { return i; }
  __device__ __forceinline__ int x_row(int i) const { return i; }
};
struct Slots {
  const int* list;  // shared memory
  int x_div;
  __device__ __forceinline__ int out_row(int i) const { return list[i]; }
  __device__ __forceinline__ int x_row(int i) const { return list[i] / x_div; }
};

// One thread's view of a launch: its warp's k-slice and column group, the k
// batches it reads, and the item body both kernels (and fused.cuh) run.
template <class T, int NT, bool kVec, bool kGemm1>
struct Stream {
  static constexpr int kU = kUnroll<NT>;
  static constexpr int kR = 8 * NT;  // rows per group
  // This warp's share of k: batches of 32 * kU, dealt round-robin over the
  // k-slices, so at any time a CTA's warps read neighbouring pieces of the
  // same weight rows (DRAM locality) rather than 8 far-apart streams a row.
  static constexpr std::int64_t kBatch = 32 * kU;
  using Batch = uint4[kU][kMT][2];

  const unsigned short* x;
  const unsigned short* w;
  T* out;
  std::int64_t K, N;
  int lane, g, t, ks_n, cg_n, ks, cg;
  std::int64_t kb, kstride;
  float* red;  // shared memory: the k-slice partial sums
  Act act;
  W1Layout layout;

  __device__ __forceinline__ Stream(const Args& a, float* red_smem) {
    x = static_cast<const unsigned short*>(a.x);
    w = static_cast<const unsigned short*>(a.w);
    out = static_cast<T*>(a.out);
    K = a.k_len;
    N = a.n_out;
    const int tid = threadIdx.x, wid = tid / 32;
    lane = tid % 32;
    g = lane / 4;
    t = lane % 4;
    ks_n = a.ks;
    cg_n = kWarps / a.ks;
    ks = wid % ks_n;
    cg = wid / ks_n;
    kb = ks * kBatch;
    kstride = kBatch * ks_n;
    red = red_smem;
    act = a.act;
    layout = a.layout;
  }

  // Weight rows of this thread for item (tile, expert e): per m-tile, row g
  // and row g + 8 (gemm1: gate i and up i).
  __device__ __forceinline__ void weight_rows(int tile, int e, const unsigned short* (&wp)[kMT][2]) const {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      if constexpr (kGemm1) {
        const std::int64_t i = (std::int64_t(tile) * cg_n + cg) * kMT * 8 + mt * 8 + g;  // gate i, up i
        const std::int64_t base_row = std::int64_t(e) * 2 * N;
        wp[mt][0] = i < N ? w + (base_row + gate_row(layout, i, N)) * K : nullptr;
        wp[mt][1] = i < N ? w + (base_row + up_row(layout, i, N)) * K : nullptr;
      } else {
        const std::int64_t h = (std::int64_t(tile) * cg_n + cg) * kMT * 16 + mt * 16 + g;
        wp[mt][0] = h < N ? w + (std::int64_t(e) * N + h) * K : nullptr;
        wp[mt][1] = h + 8 < N ? w + (std::int64_t(e) * N + h + 8) * K : nullptr;
      }
    }
  }
  __device__ __forceinline__ void load_weights(const unsigned short* const (&wp)[kMT][2], std::int64_t k0,
                                               Batch& wv) const {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const std::int64_t k = k0 + u * 32 + 8 * t;
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        wv[u][mt][0] = load8<kVec, Ld::kStream>(wp[mt][0], k, K);
        wv[u][mt][1] = load8<kVec, Ld::kStream>(wp[mt][1], k, K);
      }
    }
  }
  // The first batch of item (tile, e) (a preload: the item then starts with
  // `preloaded` set). False where this warp has no k.
  __device__ __forceinline__ bool preload(int tile, int e, Batch& wv) const {
    if (kb >= K) return false;
    const unsigned short* wp[kMT][2];
    weight_rows(tile, e, wp);
    load_weights(wp, kb, wv);
    return true;
  }

  // Item (entry en, tile): every group of up to kR of its rows through the
  // weight tile, the k-slices reduced in slice order, the epilogue's stores.
  // kPre: the batches live in wv_pre (which holds the first one when
  // `preloaded`, consumed here). Uniform across the CTA (its barriers).
  template <Ld kXLd, bool kPre, class Rows>
  __device__ __forceinline__ void item(const Entry& en, int tile, const Rows& rows, Batch& wv_pre,
                                       bool& preloaded) const {
    const unsigned short* wp[kMT][2];
    weight_rows(tile, en.expert, wp);

    for (int cursor = en.begin; cursor < en.end; cursor += kR) {
      // The group: item rows cursor .. cursor + n_rows - 1 (the same in every warp).
      const int n_rows = en.end - cursor < kR ? en.end - cursor : kR;
      const unsigned mask = n_rows == 32 ? 0xffffffffu : (1u << n_rows) - 1u;
      const int nt_used = (n_rows + 7) / 8;  // n-tiles holding a row

      const unsigned short* xp[NT];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int n = 8 * j + g;
        xp[j] = (mask >> n) & 1u ? x + std::int64_t(rows.x_row(cursor + n)) * K : nullptr;
      }

      float acc[kMT][NT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int q = 0; q < 4; ++q) acc[mt][j][q] = 0.0f;

      for (std::int64_t k0 = kb; k0 < K; k0 += kstride) {
        // The preloaded batch is exactly this one: the item's first group, k0 = kb.
        Batch wv_own;
        Batch& wv = kPre ? wv_pre : wv_own;  // a constant choice
        if (preloaded) {
          preloaded = false;
        } else {
          load_weights(wp, k0, wv);
        }
        uint4 xv[kU][NT];
#pragma unroll
        for (int u = 0; u < kU; ++u) {
          const std::int64_t k = k0 + u * 32 + 8 * t;
#pragma unroll
          for (int j = 0; j < NT; ++j)
            xv[u][j] = j < nt_used ? load8<kVec, kXLd>(xp[j], k, K) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int u = 0; u < kU; ++u)
#pragma unroll
          for (int j = 0; j < NT; ++j) {
            if (j >= nt_used) continue;  // warp-uniform
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt) {
              const uint4 w0 = wv[u][mt][0], w1 = wv[u][mt][1], xx = xv[u][j];
              mma16816<T>(acc[mt][j], w0.x, w1.x, w0.y, w1.y, xx.x, xx.y);
              mma16816<T>(acc[mt][j], w0.z, w1.z, w0.w, w1.w, xx.z, xx.w);
            }
          }
      }

      // k-slices 1.. hand their sums to slice 0 of their column group,
      // which adds them in slice order.
      if (ks_n > 1) {
        if (ks > 0) {
          float* dst = red + std::size_t((ks - 1) * cg_n + cg) * kMT * NT * 4 * 32;
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int j = 0; j < NT; ++j)
#pragma unroll
              for (int q = 0; q < 4; ++q) dst[((mt * NT + j) * 4 + q) * 32 + lane] = acc[mt][j][q];
        }
        __syncthreads();
        if (ks == 0) {
          for (int s = 1; s < ks_n; ++s) {
            const float* src = red + std::size_t((s - 1) * cg_n + cg) * kMT * NT * 4 * 32;
#pragma unroll
            for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
              for (int j = 0; j < NT; ++j)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[mt][j][q] += src[((mt * NT + j) * 4 + q) * 32 + lane];
          }
        }
      }

      if (ks == 0) {
        // Thread (g, t) holds weight rows g, g+8 of each m-tile for rows
        // 2t, 2t+1 of each n-tile.
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int q = 0; q < 2; ++q) {
              const int n = 8 * j + 2 * t + q;
              if (!((mask >> n) & 1u)) continue;
              const std::int64_t r = rows.out_row(cursor + n);
              if constexpr (kGemm1) {
                const std::int64_t i = (std::int64_t(tile) * cg_n + cg) * kMT * 8 + mt * 8 + g;
                if (i < N) {
                  const float hg = to_f32(from_f32<T>(acc[mt][j][q]));  // h rounded to the dtype
                  const float hu = to_f32(from_f32<T>(acc[mt][j][2 + q]));
                  out[r * N + i] = from_f32<T>(act_and_mul(act, hg, hu));
                }
              } else {
                const std::int64_t h = (std::int64_t(tile) * cg_n + cg) * kMT * 16 + mt * 16 + g;
                if (h < N) out[r * N + h] = from_f32<T>(acc[mt][j][q]);
                if (h + 8 < N) out[r * N + h + 8] = from_f32<T>(acc[mt][j][2 + q]);
              }
            }
      }
      if (ks_n > 1) __syncthreads();  // red is reused by the next group
    }
  }
};

// The CTA body of both kernels.
template <class T, int NT, bool kVec, bool kGemm1>
__device__ __forceinline__ void run(const Args& a) {
  using S = Stream<T, NT, kVec, kGemm1>;
  extern __shared__ float4 smem_raw[];
  __shared__ int s_warp[kWarps], s_n, s_next;

  // gemm2 reads only the RowMap before pdl_wait: the layout wrote it two
  // launches back (gemm1 between), complete by pdl.cuh's promise, so the
  // first window of the list is built while gemm1's tail runs.
  if constexpr (kGemm1) {
    prim::pdl_wait();
    prim::pdl_launch_dependents();  // one wave: the next grid may get resident (pdl.cuh)
  }

  float* red = reinterpret_cast<float*>(smem_raw);
  const S st(a, red);
  Entry* tbl = reinterpret_cast<Entry*>(red + std::size_t(st.ks_n - 1) * st.cg_n * kMT * NT * 4 * 32);

  const RowMap& m = a.map;
  const int ntpp = m.compact ? 0 : *m.num_tokens_post_pad;
  const int L = m.compact ? a.experts : ntpp / m.block_size;
  const std::int64_t G = gridDim.x;

  int pos = 0;
  std::int64_t item_base = 0;  // items of the windows before this one
  int n_win = 0, next = L;

  // gemm2 at one n-tile (decode proper): W2 is no launch's output, so the
  // first batch of this CTA's first item is loaded before waiting for gemm1
  // and streams during gemm1's tail (3 % off the TP8 shard at T 1 and 4 on an
  // H200; with more n-tiles the longer-lived batch cost more than it saved).
  constexpr bool kPreload = !kGemm1 && NT == 1;
  typename S::Batch wv_pre;  // kPreload: the batch, loaded before pdl_wait
  bool preloaded = false;    // wv_pre holds the first batch of this CTA's first item
  if (pos < L) build_window(m, a.experts, L, ntpp, pos, tbl, s_warp, &s_n, &s_next, n_win, next);
  if constexpr (!kGemm1) {
    if (kPreload && pos < L && n_win > 0 && blockIdx.x < std::int64_t(n_win) * a.tiles) {
      const Entry en = tbl[blockIdx.x / a.tiles];
      if (en.begin < en.end) preloaded = st.preload(static_cast<int>(blockIdx.x % a.tiles), en.expert, wv_pre);
    }
    prim::pdl_wait();  // before reading a and writing y
    prim::pdl_launch_dependents();
  }
  while (pos < L) {
    if (pos > 0) build_window(m, a.experts, L, ntpp, pos, tbl, s_warp, &s_n, &s_next, n_win, next);
    if (n_win == 0) break;
    const std::int64_t items = std::int64_t(n_win) * a.tiles;
    const std::int64_t first = ((std::int64_t(blockIdx.x) - item_base) % G + G) % G;
    for (std::int64_t it = first; it < items; it += G)
      st.template item<Ld::kReadOnly, kPreload>(tbl[it / a.tiles], static_cast<int>(it % a.tiles), Contiguous{},
                                                wv_pre, preloaded);
    item_base += items;
    pos = next;
    __syncthreads();  // tbl is rebuilt by the next window
  }
}

// Every branch above that guards a __syncthreads is uniform across the CTA
// (the list, the items and the row masks are the same in every warp), so the
// barriers always match.

// gemm1 + act: a [rows, I] from permuted and W1. grid: persistent, see registry.cu.
template <class T, int NT, bool kVec>
__global__ void __launch_bounds__(kThreads, 2) decode_gemm1_act_kernel(Args a) {
  run<T, NT, kVec, true>(a);
}

// gemm2: y [rows, H] from a and W2.
template <class T, int NT, bool kVec>
__global__ void __launch_bounds__(kThreads, 2) decode_gemm2_kernel(Args a) {
  run<T, NT, kVec, false>(a);
}

}  // namespace moekit::experts::decode
