// Variant `oneshot` (small inputs): one launch, no global atomics, no
// workspace, and no communication between blocks at all. Every block counts
// ALL slots itself (a few KiB from L2 when numel is small) and scans the
// counts, so every block knows the whole layout; the blocks then split the
// writes: block b places the slots of its own slot range and writes its share
// of padding rows, tail and expert_ids. The padding volume (up to E*(B-1)
// rows) is what makes more than one block worthwhile.
//
// Rows are stable: a block counts, per expert, the slots BEFORE its range and
// the rest in one packed 16+16-bit shared counter, keeps the experts of its own
// range in shared memory, and warp 0 ranks them 32 slots at a time in slot
// order (peers found by ballots, see warp_peers). Output is therefore
// identical to the CPU reference (`stable` runs it up to 8192 slots where
// neither stripe nor micro does, and at E >= 4096).
#pragma once

#include "align/common.cuh"
#include "align/host_util.cuh"

#include <algorithm>

namespace moekit::align::detail {

constexpr int kOneshotThreads = 512;
constexpr int kOneshotMaxNumel = 65535;  // both halves of a packed counter fit 16 bits
constexpr int kOneshotUnroll = 4;        // 16-byte loads in flight per thread
constexpr int kOneshotMaxSlots = 544;    // slots per block, upper bound (see oneshot_plan)

inline std::size_t oneshot_smem(int num_experts) {
  return sizeof(int) * (2 * static_cast<std::size_t>(num_experts) + 1 + kOneshotMaxSlots);
}

// Dynamic shared memory: E packed counters + E + 1 scan entries + the experts
// of this block's own slot range (so placing them needs no second global read).
template <class IdT>
__global__ void __launch_bounds__(kOneshotThreads) oneshot_kernel(Args a, int slots_per_block) {
  extern __shared__ int sm[];
  const int E = a.num_experts;
  unsigned* packed = reinterpret_cast<unsigned*>(sm);  // before | rest << 16, then cursors
  int* cs = sm + E;
  int* mine = cs + E + 1;
  __shared__ int warp_sums[kWarp + 1];
  const int t = threadIdx.x, nt = blockDim.x;
  const int lane = t & (kWarp - 1), w = t / kWarp, nw = nt / kWarp;
  const int b = blockIdx.x, G = gridDim.x;
  const int lo = static_cast<int>(min(static_cast<std::int64_t>(b) * slots_per_block,
                                      static_cast<std::int64_t>(a.numel)));
  const int hi = min(lo + slots_per_block, a.numel);

  for (int e = t; e < E; e += nt) packed[e] = 0;
  prim::pdl_wait();  // before the first id load
  prim::pdl_launch_dependents();
  __syncthreads();
  // Counting: plain shared atomics (the hardware resolves same-address lanes;
  // no result is needed). All loads of a step are issued before any is used.
  constexpr int V = kVec<IdT>, U = kOneshotUnroll;
  const bool aligned = ids_aligned16(a);
  for (int base = w * kWarp * V * U; base < a.numel; base += nw * kWarp * V * U) {
    int ev[U][V];
    load_experts<IdT>(a, base + lane * V, kWarp * V, aligned, ev);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int slot = base + (u * kWarp + lane) * V + k;
        const int e = ev[u][k];
        if (slot >= lo && slot < hi) mine[slot - lo] = e;  // -1 too: read back below
        if (e >= 0) atomicAdd(packed + e, slot < lo ? 1u : 0x10000u);
      }
    }
  }
  __syncthreads();
  for (int e = t; e < E; e += nt)
    cs[e] = padded(static_cast<int>((packed[e] & 0xffffu) + (packed[e] >> 16)), a.block_size);
  __syncthreads();
  const int total = block_exclusive_scan(cs, E, warp_sums);
  if (b == 0 && t == 0) *a.total = total;
  write_share(a, cs, b, G, [&](int e) {
    return static_cast<int>((packed[e] & 0xffffu) + (packed[e] >> 16));
  });
  __syncthreads();
  for (int e = t; e < E; e += nt) packed[e] = static_cast<unsigned>(cs[e]) + (packed[e] & 0xffffu);
  __syncthreads();
  if (w != 0) return;
  const int nbits = expert_bits(E);
  for (int base = lo; base < hi; base += kWarp) {
    const int i = base + lane;
    const int e = i < hi ? mine[i - lo] : -1;
    const unsigned peers = warp_peers(e, nbits);
    const int row = e >= 0 ? static_cast<int>(packed[e]) + __popc(peers & lanemask_lt(threadIdx.x & (kWarp - 1))) : 0;
    __syncwarp();
    if (e >= 0 && lane == __ffs(peers) - 1) packed[e] += __popc(peers);
    __syncwarp();
    if (e >= 0 && row < a.max_padded) a.sorted[row] = i;
  }
}

struct OneshotPlan {
  int grid = 1;
  int slots_per_block = kWarp;
};

// Blocks place <= 128 slots each (fewer warp-0 rounds), more once numel grows
// (every block re-reads all slots), and write <= ~16K padding rows each.
inline OneshotPlan oneshot_plan(const Problem& p) {
  OneshotPlan pl;
  std::int64_t spb = std::max<std::int64_t>(128, ceil_div<std::int64_t>(p.numel, 128));
  spb = ceil_div<std::int64_t>(spb, kWarp) * kWarp;  // <= kOneshotMaxSlots for numel <= 65535
  const std::int64_t g1 = ceil_div<std::int64_t>(p.numel, spb);
  const std::int64_t g2 = ceil_div<std::int64_t>(p.max_num_tokens_padded, 16384);
  pl.grid = static_cast<int>(std::clamp<std::int64_t>(std::max(g1, g2), 1, 1024));
  pl.slots_per_block = static_cast<int>(spb);
  return pl;
}

inline const char* oneshot_not_applicable(const Problem& p, const DeviceCaps& caps) {
  if (p.numel > kOneshotMaxNumel) return "needs numel <= 65535 (tiny-input design)";
  if (!fits_smem(caps, oneshot_smem(p.num_experts)))
    return "needs 8*E+4 bytes of shared memory per block";
  return nullptr;
}

template <class IdT>
inline cudaError_t launch_oneshot(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl) {
  const Args a = make_args(p, bufs);
  const OneshotPlan pl = oneshot_plan(p);
  const std::size_t smem = oneshot_smem(p.num_experts);
  return prim::launch_with_smem(oneshot_kernel<IdT>, pl.grid, kOneshotThreads, smem, s, prim::pdl_attrs(pdl), a,
                                pl.slots_per_block);
}

}  // namespace moekit::align::detail
