// mma: the tensor-core FFN without CUTLASS (sm_80 and sm_90): a tiled grouped
// GEMM over the rows the layout stage grouped by expert, mma.sync m16n8k16
// (bf16/f16 in, f32 accumulation), ldmatrix and a cp.async multi-stage
// shared-memory pipeline. Three launches, no host sync:
//
//  1. mma_tile_list_kernel (one block): each expert's rows [begin, end) from
//     the RowMap (compact: offsets[e]..offsets[e+1]; padded: the run of
//     blocks whose expert_ids is e, cut at num_tokens_post_pad: align writes
//     the blocks in expert order), ceil((end - begin) / kBM) tiles per expert,
//     an exclusive scan, and one descriptor {expert, row begin, row end} per
//     tile into the workspace with the count. A tile never crosses an expert.
//     At most ceil(rows / kBM) + min(E, T * K) tiles (each expert with a row
//     adds at most one partial tile): the GEMM grids are sized for that on
//     the host; CTAs past the count exit at once.
//  2. mma_gemm1_act_kernel: a CTA computes kBM rows x kGateCols intermediate
//     columns for the gate AND the up rows of W1 (its kBN = 128 B rows are,
//     per 32-row warp slice, 16 gate rows then the 16 up rows of the same i),
//     so each thread's accumulators hold g and u of the same (row, i); the
//     epilogue rounds both to the dtype, applies act_and_mul, rounds and
//     writes a [rows, I] (the FFN workspace).
//  3. mma_gemm2_kernel: kBM rows x kBN columns of y [rows, H] over K = I.
//
// Variant `gather` (kGather = true, the one difference): gemm1's A operand is
// hidden [T, H] itself, not the layout's permuted copy: row r of the padded
// layout loads hidden row sorted_token_ids[r] / K through the same cp.async
// pipeline, and padding rows (sorted_token_ids[r] >= numel) load zeros
// (src-size 0) where the copy would have read permute's zeroed rows. The tile
// list and gemm2 are unchanged.
//
// CTA: 256 threads, 8 warps as 2 (M) x 4 (N), warp tile 64 x 32 (4 x 4 mma
// tiles, 64 f32 accumulators a thread); kBK = 32, kStages = 4 (64 KiB of
// dynamic shared memory, 2 CTAs per SM fit on sm_80 and sm_90). Shared tiles
// are rows of 64 bytes, the four 16-byte chunks XOR-swizzled by (row / 2) % 4
// so that ldmatrix's eight row reads hit eight distinct bank groups. Grid: one
// CTA per (tile, column tile) in groups of kGroupRows row tiles that walk the
// column tiles together (the weight column slice of an expert is read while
// its row tiles run side by side; the A rows of a group stay in L2).
//
// Boundaries: rows past a tile's end, columns past I or H and k past K load
// zeros (cp.async with src-size 0); stores are masked per row (padding rows of
// the padded layout are not written, as naive) and per column pair. Rows must
// be 16-byte pieces: H and I multiples of 8 (not_applicable otherwise); base
// pointers not 16-byte aligned take naive's kernels (the launcher).
// PDL: the GEMM grids can exceed a wave, so they trigger at the end of each
// CTA; the one-block tile list triggers right after its wait.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "experts/act.cuh"
#include "primitives/cp_async.cuh"
#include "primitives/pdl.cuh"
#include "primitives/warp_scan.cuh"

namespace moekit::experts::mma {

constexpr int kBM = 128;       // rows of a tile (and of a tile descriptor)
constexpr int kBN = 128;       // B rows (weight rows) of a CTA
constexpr int kBK = 32;        // k of a pipeline stage
constexpr int kStages = 4;     // cp.async stages in flight
constexpr int kThreads = 256;  // 8 warps
constexpr int kGateCols = kBN / 2;  // gemm1: intermediate columns of a CTA (gate + up rows each)
constexpr int kGroupRows = 8;  // row tiles that walk the column tiles together
constexpr int kPrepThreads = 1024;
constexpr int kTileBytes = kBM * kBK * 2;  // A or B tile of one stage (kBM == kBN)
constexpr std::size_t kSmemBytes = std::size_t(kStages) * 2 * kTileBytes;

// At most this many tiles: each expert that has a row adds at most one
// partial tile to ceil(rows / kBM), and at most min(E, T * K) experts have
// one (a real slot each). The GEMM grids are cap x column tiles.
inline std::int64_t tile_capacity(const Problem& p) {
  const std::int64_t busy = std::min<std::int64_t>(p.experts, p.permute.align.numel);
  return (p.rows() + kBM - 1) / kBM + busy;
}
// Workspace: [count | tiles (int4 x cap) | begin (E) | end (E) | first (E+1) | a (rows x I)],
// each slice 256-byte aligned. Host and device agree through this one function.
struct WsLayout {
  std::size_t tiles = 0, begin = 0, end = 0, first = 0, a = 0, total = 0;
};
inline WsLayout ws_layout(const Problem& p) {
  auto up = [](std::size_t n) { return (n + 255) / 256 * 256; };
  WsLayout l;
  l.tiles = 256;
  l.begin = l.tiles + up(std::size_t(tile_capacity(p)) * 16);
  l.end = l.begin + up(std::size_t(p.experts) * 4);
  l.first = l.end + up(std::size_t(p.experts) * 4);
  l.a = l.first + up(std::size_t(p.experts + 1) * 4);
  l.total = l.a + up(std::size_t(p.rows()) * std::size_t(p.inter) * p.element_bytes());
  return l;
}

// ---- tile list ----------------------------------------------------------------

// One block of kPrepThreads. `first`, `seg_begin`, `seg_end` are written and
// read back by this block (plain pointers: visible after __syncthreads).
__global__ void __launch_bounds__(kPrepThreads)
    mma_tile_list_kernel(RowMap m, int experts, int rows, int cap, int* count_out, int4* tiles, int* seg_begin,
                         int* seg_end, int* first) {
  prim::pdl_wait();
  prim::pdl_launch_dependents();
  const int tid = threadIdx.x, nt = blockDim.x;
  const int lane = tid & 31, warp = tid / 32, nwarps = nt / 32;
  if (!m.compact) {
    for (int e = tid; e < experts; e += nt) seg_begin[e] = seg_end[e] = 0;
    __syncthreads();
    const int ntpp = max(0, min(*m.num_tokens_post_pad, rows));
    const int B = m.block_size;
    const int nb = static_cast<int>((std::int64_t(ntpp) + B - 1) / B);
    for (int b = tid; b < nb; b += nt) {
      const int e = m.expert_ids[b];
      if (e < 0 || e >= experts) continue;
      if (b == 0 || m.expert_ids[b - 1] != e) seg_begin[e] = b * B;
      if (b == nb - 1 || m.expert_ids[b + 1] != e)
        seg_end[e] = static_cast<int>(min(std::int64_t(b + 1) * B, std::int64_t(ntpp)));
    }
    __syncthreads();
  }
  auto seg = [&](int e, int& lo, int& hi) {
    if (m.compact) {
      lo = static_cast<int>(min(max(m.offsets[e], std::int64_t(0)), std::int64_t(rows)));
      hi = static_cast<int>(min(max(m.offsets[e + 1], std::int64_t(lo)), std::int64_t(rows)));
    } else {
      lo = seg_begin[e];
      hi = max(seg_end[e], lo);
    }
  };

  // Exclusive scan of the tile counts over the experts, a chunk of nt at a time.
  __shared__ int warp_sums[32];
  __shared__ int carry_s;
  if (tid == 0) carry_s = 0;
  for (int base = 0; base < experts; base += nt) {
    const int e = base + tid;
    int n = 0;
    if (e < experts) {
      int lo, hi;
      seg(e, lo, hi);
      n = (hi - lo + kBM - 1) / kBM;
    }
    const int incl = prim::warp_inclusive_scan(n);
    if (lane == 31) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const int v = lane < nwarps ? warp_sums[lane] : 0;
      const int inc = prim::warp_inclusive_scan(v);
      if (lane < nwarps) warp_sums[lane] = inc - v;
    }
    __syncthreads();
    const int before = carry_s + warp_sums[warp] + incl;  // inclusive, over all chunks so far
    if (e < experts) first[e] = before - n;
    __syncthreads();  // every thread has read carry_s and warp_sums
    if (tid == nt - 1) carry_s = before;
  }
  __syncthreads();
  const int total = carry_s;
  const int count = min(total, cap);  // never more (align's expert order holds); memory-safe if not
  for (int t = tid; t < count; t += nt) {
    int lo = 0, hi = experts - 1;  // the last e with first[e] <= t: it owns tile t (it is not empty)
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (first[mid] <= t) lo = mid;
      else hi = mid - 1;
    }
    int b, e_end;
    seg(lo, b, e_end);
    const int rb = b + (t - first[lo]) * kBM;
    tiles[t] = make_int4(lo, rb, min(rb + kBM, e_end), 0);
  }
  if (tid == 0) {
    first[experts] = total;
    *count_out = count;
  }
}

// ---- warp-level building blocks ---------------------------------------------------

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define MOEKIT_MMA_SUPPORTED 1
#else
#define MOEKIT_MMA_SUPPORTED 0
#endif

using prim::cp_async16;
using prim::cp_async_commit;
using prim::cp_async_wait;
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
#if MOEKIT_MMA_SUPPORTED
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}
// d += a * b, m16n8k16, row-major A, column-major B, f32 accumulators.
template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
#if MOEKIT_MMA_SUPPORTED
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#else
  __trap();
#endif
}

// ---- where each element lives (host-callable: one source for the kernels
// and a host emulation of the fragment plumbing) ----------------------------

// Byte offset of 16-byte chunk c (0..3) of row r in a tile of 64-byte rows.
__host__ __device__ __forceinline__ std::uint32_t swz(int r, int c) {
  return static_cast<std::uint32_t>(r * (kBK * 2) + ((c ^ ((r >> 1) & 3)) << 4));
}
// ldmatrix.x4 addresses: the tile row and 16-byte chunk lane `lane` points at.
// A, m tile mt of warp row wm: matrices (rows 0-7, k 0-7), (8-15, 0-7),
// (0-7, 8-15), (8-15, 8-15) = the mma A registers a0..a3.
__host__ __device__ __forceinline__ int a_ldm_row(int lane, int wm, int mt) { return wm * 64 + mt * 16 + lane % 16; }
__host__ __device__ __forceinline__ int a_ldm_chunk(int lane, int kk) { return kk * 2 + lane / 16; }
// B (weight rows n, k contiguous), n tiles 2 np and 2 np + 1 of warp column
// wn: matrices (n 0-7, k 0-7), (0-7, 8-15), (8-15, 0-7), (8-15, 8-15) = b0, b1
// of n tile 2 np, then of 2 np + 1.
__host__ __device__ __forceinline__ int b_ldm_row(int lane, int wn, int np) {
  return wn * 32 + np * 16 + lane % 8 + (lane / 16) * 8;
}
__host__ __device__ __forceinline__ int b_ldm_chunk(int lane, int kk) { return kk * 2 + (lane / 8) % 2; }
// Accumulator (mt, nt, c) of lane `lane` in warp (wm, wn): tile row and column.
__host__ __device__ __forceinline__ int acc_row(int lane, int wm, int mt, int c) {
  return wm * 64 + mt * 16 + lane / 4 + (c / 2) * 8;
}
__host__ __device__ __forceinline__ int acc_col(int lane, int wn, int nt, int c) {
  return wn * 32 + nt * 8 + 2 * (lane % 4) + c % 2;
}
// gemm1's B rows: tile row n holds, per 32-row warp slice, gate rows (n % 32
// < 16) then the up rows of the same intermediate columns; the column of the
// CTA's kGateCols that row n belongs to. A warp's n tiles 0, 1 are gate and
// 2, 3 up of the same columns: acc_col(.., nt + 2, c) - 16 == acc_col(.., nt, c).
__host__ __device__ __forceinline__ int gate_up_col(int n) { return (n / 32) * 16 + n % 16; }
__host__ __device__ __forceinline__ bool gate_up_is_up(int n) { return n % 32 >= 16; }

// The tile and column tile of this CTA (row tiles grouped by kGroupRows), or
// false when its tile is past the device-built count.
struct TileCoord {
  int e, row_begin, row_end, col_tile;
};
// CTA L of cap * col_tiles: row tile rt, column tile ct (a bijection).
__host__ __device__ __forceinline__ void grouped_coord(long long L, int cap, int col_tiles, int& rt, int& ct) {
  const long long per_group = static_cast<long long>(kGroupRows) * col_tiles;
  const int first = static_cast<int>(L / per_group) * kGroupRows;
  const int gs = cap - first < kGroupRows ? cap - first : kGroupRows;
  const int within = static_cast<int>(L % per_group);
  rt = first + within % gs;
  ct = within / gs;
}
__device__ __forceinline__ bool tile_of(const int* count, const int4* tiles, int cap, int col_tiles, TileCoord& tc) {
  int rt;
  grouped_coord(blockIdx.x, cap, col_tiles, rt, tc.col_tile);
  if (rt >= *count) return false;
  const int4 t = tiles[rt];
  tc.e = t.x;
  tc.row_begin = t.y;
  tc.row_end = t.z;
  return true;
}

// The mainloop: acc += A[kBM rows, K] . B[kBN rows, K]^T. This thread loads A
// and B rows tid / 4 and tid / 4 + 64 (chunk tid % 4 of each stage); a row
// that is out of range (its ok flag false) and k past K load zeros.
template <class T>
__device__ __forceinline__ void mainloop(float (&acc)[4][4][4], const T* const (&a_row)[2], const bool (&a_ok)[2],
                                         const T* const (&b_row)[2], const bool (&b_ok)[2], int K,
                                         unsigned char* smem) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
  const int wm = warp % 2, wn = warp / 2;
  const int chunk = tid % 4;
  const std::uint32_t s0 = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  auto load_stage = [&](int stage, int kt) {
    const std::uint32_t sa = s0 + stage * 2 * kTileBytes, sb = sa + kTileBytes;
    const int k = kt * kBK + chunk * 8;
    const bool k_ok = k < K;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = tid / 4 + j * 64;
      const bool oa = a_ok[j] && k_ok, ob = b_ok[j] && k_ok;
      cp_async16(sa + swz(r, chunk), oa ? static_cast<const void*>(a_row[j] + k) : a_row[j], oa ? 16 : 0);
      cp_async16(sb + swz(r, chunk), ob ? static_cast<const void*>(b_row[j] + k) : b_row[j], ob ? 16 : 0);
    }
  };
  const int ktiles = (K + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load_stage(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < ktiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt - 1 is free
    const int nk = kt + kStages - 1;
    if (nk < ktiles) load_stage(nk % kStages, nk);
    cp_async_commit();
    const std::uint32_t sa = s0 + (kt % kStages) * 2 * kTileBytes, sb = sa + kTileBytes;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      std::uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
        ldmatrix_x4(af[mt], sa + swz(a_ldm_row(lane, wm, mt), a_ldm_chunk(lane, kk)));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        std::uint32_t r[4];
        ldmatrix_x4(r, sb + swz(b_ldm_row(lane, wn, np), b_ldm_chunk(lane, kk)));
        bf[2 * np][0] = r[0];
        bf[2 * np][1] = r[1];
        bf[2 * np + 1][0] = r[2];
        bf[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) mma16816<T>(acc[mt][nt], af[mt], bf[nt]);
    }
  }
  cp_async_wait<0>();  // only empty groups remain; nothing in flight at exit
}

// Whether row r of a tile is written: inside the tile and, padded, a real slot.
__device__ __forceinline__ bool row_written(const RowMap& m, int r, int row_end) {
  return r < row_end && (m.compact || m.sorted_token_ids[r] < m.numel);
}

template <class T>
__device__ __forceinline__ void store_pair(T* p, float v0, float v1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
  } else {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
  }
}

// ---- the two GEMMs ------------------------------------------------------------

// a[r, i] = act(g, u) for the tile's rows and intermediate columns
// col_tile * kGateCols + [0, kGateCols). Grid: cap * ceil(I / kGateCols).
// x: the layout's rows [rows, H], or (kGather, padded layout only) hidden
// [T, H], row r reading token sorted_token_ids[r] / K.
template <class T, bool kGather = false>
__global__ void __launch_bounds__(kThreads)
    mma_gemm1_act_kernel(const int* count, const int4* tiles, int cap, int col_tiles, const T* __restrict__ x,
                         const T* __restrict__ w1, T* __restrict__ a, RowMap m, int H, int I, Act act,
                         W1Layout layout) {
  extern __shared__ __align__(128) unsigned char smem[];
  prim::pdl_wait();
  TileCoord tc;
  if (!tile_of(count, tiles, cap, col_tiles, tc)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
  const int i0 = tc.col_tile * kGateCols;
  const T* a_row[2];
  const T* b_row[2];
  bool a_ok[2], b_ok[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int n = tid / 4 + j * 64;
    const int r = tc.row_begin + n;
    if constexpr (kGather) {
      // r < row_end <= num_tokens_post_pad: sorted_token_ids[r] is align's.
      const std::int64_t slot = r < tc.row_end ? m.sorted_token_ids[r] : m.numel;
      a_ok[j] = slot >= 0 && slot < m.numel;
      a_row[j] = a_ok[j] ? x + (slot / m.topk) * H : x;
    } else {
      a_ok[j] = r < tc.row_end;
      a_row[j] = a_ok[j] ? x + std::int64_t(r) * H : x;
    }
    const int i = i0 + gate_up_col(n);
    b_ok[j] = i < I;
    const std::int64_t wr = gate_up_is_up(n) ? up_row(layout, i, I) : gate_row(layout, i, I);
    b_row[j] = b_ok[j] ? w1 + (std::int64_t(tc.e) * 2 * I + wr) * H : w1;
  }
  float acc[4][4][4] = {};
  mainloop<T>(acc, a_row, a_ok, b_row, b_ok, H, smem);

  const int wm = warp % 2, wn = warp / 2;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = tc.row_begin + acc_row(lane, wm, mt, half * 2);
      if (!row_written(m, r, tc.row_end)) continue;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int i = i0 + gate_up_col(acc_col(lane, wn, nt, 0));  // even; I is a multiple of 8
        if (i >= I) continue;
        float v[2];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float hg = to_f32(from_f32<T>(acc[mt][nt][half * 2 + c]));  // h rounded to the dtype
          const float hu = to_f32(from_f32<T>(acc[mt][nt + 2][half * 2 + c]));
          v[c] = act_and_mul(act, hg, hu);
        }
        store_pair(a + std::int64_t(r) * I + i, v[0], v[1]);
      }
    }
  prim::pdl_launch_dependents();
}

// y[r, h] = a[r, :] . W2[e][h, :] for the tile's rows and columns
// col_tile * kBN + [0, kBN). Grid: cap * ceil(H / kBN).
template <class T>
__global__ void __launch_bounds__(kThreads)
    mma_gemm2_kernel(const int* count, const int4* tiles, int cap, int col_tiles, const T* __restrict__ a,
                     const T* __restrict__ w2, T* __restrict__ y, RowMap m, int H, int I) {
  extern __shared__ __align__(128) unsigned char smem[];
  prim::pdl_wait();
  TileCoord tc;
  if (!tile_of(count, tiles, cap, col_tiles, tc)) return;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
  const int h0 = tc.col_tile * kBN;
  const T* a_row[2];
  const T* b_row[2];
  bool a_ok[2], b_ok[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int n = tid / 4 + j * 64;
    const int r = tc.row_begin + n;
    a_ok[j] = r < tc.row_end;
    a_row[j] = a_ok[j] ? a + std::int64_t(r) * I : a;
    const int h = h0 + n;
    b_ok[j] = h < H;
    b_row[j] = b_ok[j] ? w2 + (std::int64_t(tc.e) * H + h) * I : w2;
  }
  float acc[4][4][4] = {};
  mainloop<T>(acc, a_row, a_ok, b_row, b_ok, I, smem);

  const int wm = warp % 2, wn = warp / 2;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = tc.row_begin + acc_row(lane, wm, mt, half * 2);
      if (!row_written(m, r, tc.row_end)) continue;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int h = h0 + acc_col(lane, wn, nt, 0);  // even; H is a multiple of 8
        if (h >= H) continue;
        store_pair(y + std::int64_t(r) * H + h, acc[mt][nt][half * 2], acc[mt][nt][half * 2 + 1]);
      }
    }
  prim::pdl_launch_dependents();
}

}  // namespace moekit::experts::mma
