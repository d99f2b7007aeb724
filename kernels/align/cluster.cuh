// Variant `cluster` (ours, mid and large inputs, sm_90+): ONE launch of ONE
// thread-block cluster (16 blocks where the GPU allows it, else 8). Every block
// counts 1/G of the slots, and the blocks agree on offsets through distributed
// shared memory and two hardware cluster barriers: no workspace, no global
// atomics, no second launch, no cooperative launch. Stable rows (identical to
// the CPU reference), like `twopass`, whose per-warp rows it shares.
//
//   A. each warp histograms its contiguous sub-tile into its own shared row;
//      the rows become warp prefixes and the block total goes to hist[e].
//                                                           -- cluster barrier
//   B. block b owns the experts [b*per, (b+1)*per): for each, it reads hist[e]
//      of all G blocks (remote), scans the padded totals of its slice, and
//      writes back into every block k: base[e] = slice start of e + slots of e
//      in blocks before k; and the slice's sum into sums[b].
//                                                           -- cluster barrier
//   C. every block prefix-sums the G slice sums (local), writes the padding
//      rows and expert_ids of its own slice and 1/G of the tail, then places
//      its slots in slot order (same ballots as `twopass`).
//
// Why a cluster: `persistent` needs the same two agreements but pays ~10 µs for
// the cooperative launch and grid barriers; `twopass` pays a second launch and
// every block re-reads the whole G x E table from L2. A cluster barrier is a
// hardware barrier among at most 16 co-scheduled SMs, and each expert's column
// is read once, by its owner. The cost: only G SMs work, so it suits inputs up
// to a few hundred thousand slots (measured in docs/bench/align.md).
#pragma once

#include <cooperative_groups.h>

#include <algorithm>

#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/warp_rows.cuh"

namespace moekit::align::detail {

constexpr int kClusterMaxG = 16;  // H100's non-portable limit; 8 is portable
constexpr int kClusterThreads = 1024;
constexpr std::size_t kClusterRowBudget = 96 * 1024;  // bytes of per-warp rows

// Dynamic shared memory (ints): rows x E | hist E | base E | slice counts per |
// slice scan per + 1 | sums G + 1.
inline std::size_t cluster_smem(int rows, int num_experts, int per, int G) {
  return sizeof(int) * (static_cast<std::size_t>(rows + 2) * num_experts +
                        2 * static_cast<std::size_t>(per) + 1 + G + 1);
}

template <class IdT>
__global__ void __launch_bounds__(kClusterThreads)
    cluster_kernel(Args a, int rows, int per, std::int64_t tile, std::int64_t subtile) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cl = cg::this_cluster();
  extern __shared__ int sm[];
  __shared__ int warp_sums[kWarp + 1];
  const int E = a.num_experts;
  const int t = threadIdx.x, nt = blockDim.x;
  const int lane = t & (kWarp - 1), w = t / kWarp, nw = nt / kWarp;
  const int b = static_cast<int>(cl.block_rank()), G = static_cast<int>(cl.num_blocks());
  int* rowmem = sm;                // rows x E
  int* hist = rowmem + rows * E;   // E: this block's slots per expert
  int* base = hist + E;            // E: written by the slice owners
  int* scnt = base + E;            // per: slots per expert of my slice (all blocks)
  int* sscan = scnt + per;         // per + 1: slice-local starts, then the slice sum
  int* sums = sscan + per + 1;     // G + 1: slice sums, then their exclusive scan

  const std::int64_t n = a.numel;
  const std::int64_t blo = std::min<std::int64_t>(b * tile, n);
  const std::int64_t bhi = std::min<std::int64_t>(blo + tile, n);
  const std::int64_t wlo = std::min<std::int64_t>(blo + w * subtile, bhi);
  const std::int64_t whi = std::min<std::int64_t>(wlo + subtile, bhi);
  const bool aligned = ids_aligned16(a);
  int* row = rowmem + w * E;  // only for w < rows

  // ---- A. per-warp rows, block totals ------------------------------------------
  for (int i = t; i < rows * E; i += nt) rowmem[i] = 0;
  __syncthreads();
  if (w < rows) count_slots<IdT>(a, wlo, whi, aligned, row);
  __syncthreads();
  for (int e = t; e < E; e += nt) hist[e] = rows_exclusive_prefix(rowmem, rows, E, e);
  cl.sync();

  // ---- B. my slice: totals over the cluster, slice scan, bases for every block --
  const int e0 = min(b * per, E), e1 = min(e0 + per, E), len = e1 - e0;
  // The G remote reads of a column are issued together (unrolled to the
  // largest cluster): one distributed-shared-memory latency per pass, not G.
  for (int i = t; i < len; i += nt) {
    int s = 0;
#pragma unroll
    for (int k = 0; k < kClusterMaxG; ++k)
      if (k < G) s += cl.map_shared_rank(hist, k)[e0 + i];
    scnt[i] = s;
    sscan[i] = padded(s, a.block_size);
  }
  __syncthreads();
  const int slice_sum = block_exclusive_scan(sscan, len, warp_sums);  // 1 barrier at its end
  for (int i = t; i < len; i += nt) {
    int v[kClusterMaxG];
#pragma unroll
    for (int k = 0; k < kClusterMaxG; ++k) v[k] = k < G ? cl.map_shared_rank(hist, k)[e0 + i] : 0;
    int run = sscan[i];
#pragma unroll
    for (int k = 0; k < kClusterMaxG; ++k) {
      if (k < G) cl.map_shared_rank(base, k)[e0 + i] = run;
      run += v[k];
    }
  }
  if (t < G) cl.map_shared_rank(sums, t)[b] = slice_sum;
  cl.sync();  // the last remote access: after this every block only touches its own memory

  // ---- C. offsets, my share of padding / tail / expert_ids, my slots ---------------
  if (w == 0) {
    const int v = lane < G ? sums[lane] : 0;
    const int inc = warp_inclusive_scan(v);
    __syncwarp();
    if (lane < G) sums[lane] = inc - v;
    if (lane == G - 1) sums[G] = inc;
  }
  __syncthreads();
  const int total = sums[G];
  if (b == 0 && t == 0) *a.total = total;
  for (int e = t; e < E; e += nt) base[e] += sums[e / per];  // + the slice's start
  __syncthreads();  // every base; what follows writes disjoint rows, no more barriers
  // Padding rows and expert_ids of my slice's experts, one warp per expert.
  const int soff = sums[b];
  for (int i = w; i < len; i += nw) {
    const int s = soff + sscan[i], c = scnt[i], pe = soff + sscan[i + 1];
    fill_range(a.sorted, std::min(s + c, a.max_padded), std::min(pe, a.max_padded), a.numel,
               lane, kWarp);
    for (int j = s / a.block_size + lane; j < pe / a.block_size; j += kWarp) a.eids[j] = e0 + i;
  }
  {  // 1/G of the rows past num_tokens_post_pad, and of the -1 expert_ids
    // (unsigned 32-bit math: everything is < 2^31, and 64-bit division is a
    // long subroutine)
    const unsigned tail = static_cast<unsigned>(a.max_padded - total);
    const unsigned chunk = (tail + G - 1) / G;
    const unsigned lo = min(static_cast<unsigned>(total) + chunk * b, static_cast<unsigned>(a.max_padded));
    fill_range(a.sorted, lo, min(lo + chunk, static_cast<unsigned>(a.max_padded)), a.numel, t, nt);
    const unsigned jt = static_cast<unsigned>(total) / a.block_size;
    const unsigned jchunk = (static_cast<unsigned>(a.max_blocks) - jt + G - 1) / G;
    const unsigned jlo = min(jt + jchunk * b, static_cast<unsigned>(a.max_blocks));
    const unsigned jhi = min(jlo + jchunk, static_cast<unsigned>(a.max_blocks));
    for (unsigned j = jlo + t; j < jhi; j += nt) a.eids[j] = -1;
  }
  if (w < rows) place_slots<IdT>(a, wlo, whi, row, base, expert_bits(E));
#else
  (void)a, (void)rows, (void)per, (void)tile, (void)subtile;
#endif
}

struct ClusterPlan {
  int G = 0;  // cluster size = grid (0: not applicable)
  int rows = 0, threads = kClusterThreads, per = 0;
  std::int64_t tile = 0, subtile = 0;
  std::size_t smem = 0;
};

inline int cluster_rows(int num_experts) {
  const std::size_t r = kClusterRowBudget / (sizeof(int) * static_cast<std::size_t>(num_experts));
  return static_cast<int>(std::min<std::size_t>(r, kClusterThreads / kWarp));
}

// Clusters of this size and shared memory that fit the GPU (memoised).
template <class IdT>
inline bool cluster_fits(int G, std::size_t smem) {
  static std::mutex mu;
  static std::map<std::pair<int, std::size_t>, bool> memo;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(G, smem);
  const auto it = memo.find(key);
  if (it != memo.end()) return it->second;
  auto* k = cluster_kernel<IdT>;
  allow_smem(k, smem);  // only ever raises the opt-in: launches of other shapes stay valid
  bool ok = true;
  if (ok && G > 8)
    ok = cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
         cudaSuccess;
  int clusters = 0;
  if (ok) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(G);
    cfg.blockDim = dim3(kClusterThreads);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = G;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    ok = cudaOccupancyMaxActiveClusters(&clusters, k, &cfg) == cudaSuccess && clusters >= 1;
  }
  cudaGetLastError();
  memo.emplace(key, ok);
  return ok;
}

// want_g: cluster size to try first (0: the largest that fits, 16 then 8).
template <class IdT>
inline ClusterPlan cluster_plan(const Problem& p, int want_g = 0) {
  ClusterPlan pl;
  if (device_caps().cc_major < 9) return pl;
  pl.rows = cluster_rows(p.num_experts);
  if (pl.rows < 1) return pl;
  for (int G : {want_g > 0 ? want_g : kClusterMaxG, 8}) {
    const int per = static_cast<int>(ceil_div<std::int64_t>(p.num_experts, G));
    const std::size_t smem = cluster_smem(pl.rows, p.num_experts, per, G);
    if (smem > device_caps().smem_optin || !cluster_fits<IdT>(G, smem)) continue;
    pl.G = G;
    pl.per = per;
    pl.smem = smem;
    break;
  }
  if (pl.G == 0) return pl;
  const std::int64_t chunk = kWarp * kVec<IdT>;
  pl.tile = ceil_div<std::int64_t>(ceil_div<std::int64_t>(p.numel, pl.G), chunk) * chunk;
  pl.subtile = ceil_div<std::int64_t>(ceil_div<std::int64_t>(pl.tile, pl.rows), chunk) * chunk;
  if (pl.tile == 0) pl.tile = pl.subtile = chunk;
  return pl;
}

template <class IdT>
inline const char* cluster_na(const Problem& p) {
  if (device_caps().cc_major < 9) return "needs sm_90 or newer (thread block clusters)";
  if (cluster_plan<IdT>(p).G == 0)
    return "needs a cluster of 8 blocks with (rows+2)*E*4 bytes of shared memory each "
           "(E <= 16384)";
  return nullptr;
}

template <class IdT>
inline void launch_cluster(const Problem& p, const Buffers& bufs, cudaStream_t s,
                           const ClusterPlan& pl) {
  const Args a = make_args(p, bufs);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(pl.G);
  cfg.blockDim = dim3(pl.threads);
  cfg.dynamicSmemBytes = pl.smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = pl.G;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, cluster_kernel<IdT>, a, pl.rows, pl.per, pl.tile, pl.subtile);
}

template <class IdT>
inline void launch_cluster(const Problem& p, const Buffers& bufs, cudaStream_t s) {
  launch_cluster<IdT>(p, bufs, s, cluster_plan<IdT>(p));
}

}  // namespace moekit::align::detail
