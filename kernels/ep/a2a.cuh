// The kernels around NCCL's transfers in ep's `nccl-a2a` variant (the sender's
// plan is plan.cuh's: where each token's row and each slot's returned row go), the pack of
// rows into per-destination runs, the receiver's dropped tail, and the
// receiver's return of expert outputs in the sender's slot order.
//
// Layouts (per rank, in its workspace; T tokens a rank, K slots a token):
// - send runs: destination d's rows at [d * T, d * T + rows_to[d]), tokens
//   ascending; aux[q] = {slot base of the row at d, sending rank};
// - returned rows: the slots a rank sent to d come back at [d * T * K, ...)
//   in (token, j) order, so slot_pos[t, j] is known before any count is;
// - counts: [2 d] rows and [2 d + 1] slots to d, then from kCountsFrom on
//   [2 s] rows and [2 s + 1] slots received from s.
#pragma once

#include <cstdint>

#include "ep/ep.hpp"
#include "ep/plan.cuh"
#include "primitives/convert.cuh"
#include "primitives/flag.cuh"
#include "primitives/pdl.cuh"

namespace moekit::ep::detail {

inline constexpr int kCountsFrom = 2 * kMaxRanks;  // counts' received half

// Most slots a token may have in every p2p variant: the pack's block looks a
// token's K owners up one a thread (pack_peer_kernel), the reduce lists a
// row's kept slots in shared memory (reduce_peer_kernel), and the slot
// returns are combined with combine's limit (64) anyway.
inline constexpr int kP2pMaxTopk = 64;

/// Copies `bytes` (a multiple of kVec) from src to dst with the block's
/// threads, kUnroll loads in flight per thread before their stores (a row
/// copy is latency-bound at decode sizes otherwise).
/// @tparam kVec bytes a thread moves at once: 16, 4 or 2
/// @tparam kUnroll vectors a thread loads before it stores them
template <int kVec, int kUnroll = 8>
__device__ __forceinline__ void copy_row(char* dst, const char* src, std::int64_t bytes) {
  using V = std::conditional_t<kVec == 16, uint4, std::conditional_t<kVec == 4, unsigned, unsigned short>>;
  const V* s = reinterpret_cast<const V*>(src);
  V* d = reinterpret_cast<V*>(dst);
  const std::int64_t n = bytes / kVec, step = blockDim.x;
  for (std::int64_t base = threadIdx.x; base < n; base += step * kUnroll) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * step < n) v[u] = s[base + u * step];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * step < n) d[base + u * step] = v[u];
  }
}

/// The send runs: destination d's rows (and their K ids) packed at d * T in
/// the plan's order. Grid-strided over the R * T places; places past a run's
/// count are skipped.
template <int kVec>
__global__ void pack_kernel(const char* hidden, const std::int32_t* ids, std::int64_t T, int K, int R,
                            std::int64_t row_bytes, const std::int32_t* send_tok, const std::int32_t* counts,
                            char* send_rows, std::int32_t* send_ids) {
  prim::pdl_wait();
  for (std::int64_t q = blockIdx.x; q < R * T; q += gridDim.x) {
    const int d = static_cast<int>(q / T);
    if (q - d * T >= counts[2 * d]) continue;
    const std::int64_t t = send_tok[q];
    copy_row<kVec>(send_rows + q * row_bytes, hidden + t * row_bytes, row_bytes);
    for (int j = threadIdx.x; j < K; j += blockDim.x) send_ids[q * K + j] = ids[t * K + j];
  }
  prim::pdl_launch_dependents();
}

// Rows a rank received, from the exchanged counts.
__device__ __forceinline__ std::int64_t received_rows(const std::int32_t* counts, int R) {
  std::int64_t n = 0;
  for (int s = 0; s < R; ++s) n += counts[kCountsFrom + 2 * s];
  return n;
}

/// The receive side's rows past those received carry only -1 ids (dropped
/// slots), so the layout is planned once at the capacity.
__global__ void drop_tail_kernel(const std::int32_t* counts, int R, std::int64_t capacity, int K,
                                 std::int32_t* recv_ids) {
  prim::pdl_wait();
  const std::int64_t from = received_rows(counts, R) * K, to = capacity * K;
  for (std::int64_t i = from + blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < to;
       i += std::int64_t(gridDim.x) * blockDim.x)
    recv_ids[i] = -1;
  prim::pdl_launch_dependents();
}

/// The receiver's expert outputs back in the sender's order: received row
/// i's kept slots (inverse >= 0), j ascending, to the sender's run at
/// src * T * K + slot base. One block a row, grid-strided.
template <int kVec>
__global__ void back_kernel(const char* y, const std::int32_t* inverse, const std::int32_t* recv_aux,
                            const std::int32_t* counts, int R, std::int64_t T, int K, std::int64_t row_bytes,
                            char* back_send) {
  prim::pdl_wait();
  const std::int64_t n = received_rows(counts, R);
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::int64_t run = std::int64_t(recv_aux[2 * i + 1]) * T * K + recv_aux[2 * i];
    int k = 0;
    for (int j = 0; j < K; ++j) {
      const std::int32_t q = inverse[i * K + j];
      if (q < 0) continue;
      copy_row<kVec>(back_send + (run + k) * row_bytes, y + std::int64_t(q) * row_bytes, row_bytes);
      ++k;
    }
  }
  prim::pdl_launch_dependents();
}

}  // namespace moekit::ep::detail

namespace moekit::ep::detail {

// Every rank's receive parts, by rank (the p2p variant's kernels write into
// their peers' memory over NVLink; peer access is enabled between all ranks).
struct PeerRecv {
  char* rows[kMaxRanks];
  std::int32_t* ids[kMaxRanks];
  std::int32_t* aux[kMaxRanks];
  // p2p-reduce: the slots' weights go with the rows, and aux[0] holds the
  // sender's token (its partial's place) instead of the slot base. nullptr:
  // slot returns (p2p, p2p-signal).
  float* w[kMaxRanks];
};
struct PeerBack {
  char* rows[kMaxRanks];
};
// p2p-signal's barrier between the ranks, on device, inside the kernel that
// writes into the peers: its blocks count themselves in `done` (this
// rank's); the last one adds one to every rank's `arrive` counter of the
// phase (release at system scope, after every block's writes), then spins
// on this rank's own counter until all R ranks have arrived (acquire) and
// takes R off it. The kernel completes only once every rank's writes of the
// phase are visible here, so the next kernel on the stream reads them
// without a wait kernel between. A counting semaphore: every launch leaves
// both counters at zero, so a CUDA graph replays it without a reset, and a
// peer's next launch cannot raise a counter before this launch has taken
// its arrivals back (that peer first waits for this rank's next signal,
// which comes after). A signal that never comes traps after `timeout_ns` (a
// CUDA error, not a hang). done == nullptr: no signal (p2p, whose barrier
// is cross-device events).
struct PeerSignal {
  unsigned* done;
  unsigned* arrive[kMaxRanks];
  int rank;  // whose arrive counter the last block waits on
  unsigned long long timeout_ns;
};

// Every block of a writing kernel ends here (no block may return early).
// Only the last block to finish waits, so no block spins while another
// still needs its SM.
__device__ __forceinline__ void signal_peers(const PeerSignal& sig, int R) {
  if (sig.done == nullptr) return;
  __syncthreads();  // the block's stores precede thread 0's release
  if (threadIdx.x == 0 && prim::atom_add_acq_rel_gpu(sig.done, 1u) == gridDim.x - 1) {
    *sig.done = 0;  // the next launch's count (after this grid, in stream order)
    // One release for all R arrivals: a release per add would wait for the
    // previous add's round trip to its peer before the next.
    prim::fence_acq_rel_sys();
    for (int d = 0; d < R; ++d) prim::red_relaxed_sys(pick(sig.arrive, d), 1u);
    unsigned* own = pick(sig.arrive, sig.rank);
    unsigned long long t0, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    while (prim::ld_acquire_sys(own) < static_cast<unsigned>(R)) {
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      if (now - t0 > sig.timeout_ns) __trap();
    }
    atomicSub_system(own, static_cast<unsigned>(R));  // the scope the peers add at
  }
}

// The sender's own maps of a p2p launch, written by its pack (one entry per
// (token, destination) item): where each slot's output row comes back
// (p2p, p2p-signal) or each destination's partial (p2p-reduce*).
struct SenderMaps {
  std::int32_t* slot_pos;         // [T, K]: d * T * K + t * K + j, -1 dropped; nullptr: partials
  std::int32_t* partial_inverse;  // [T, R]: d * T + t, -1 where t sends nothing to d; nullptr: slots
  float* ones;                    // [T, R]: the partials' weights (1)
};

/// p2p's pack: the sender writes its rows (with their ids and slot bases)
/// straight into each destination's receive buffer, into the fixed segment
/// [rank * T, rank * T + T) it owns there, token t at rank * T + t; a token
/// that sends nothing to d gets -1 ids there, so the receiver's layout drops
/// it without knowing any count. Every place follows from the token's own
/// ids, so no plan (scan) runs before it: one work item per (token,
/// destination), whose block looks the token's K owners up itself.
/// Returned rows come back into the same fixed strides (slot (t, j) at
/// d * T * K + t * K + j of the sender's returned rows; d's partial at
/// d * T + t), which the item also writes into the sender's maps.
/// K <= blockDim.x.
template <int kVec>
__global__ void pack_peer_kernel(const char* hidden, const std::int32_t* ids, const float* weights,
                                 const std::int32_t* placement, int experts, std::int64_t T, int K, int R, int rank,
                                 std::int64_t row_bytes, SenderMaps own, PeerRecv to, PeerSignal sig) {
  const bool partials = to.w[0] != nullptr;
  prim::pdl_wait();
  // Consecutive blocks take consecutive destinations, so every link (and the
  // local copy) is busy from the start rather than one destination at a time.
  for (std::int64_t n = blockIdx.x; n < R * T; n += gridDim.x) {
    const int d = static_cast<int>(n % R);
    const std::int64_t t = n / R, at = rank * T + t;  // at: the token's place at d
    const int j = threadIdx.x;
    std::int32_t id = -1, owner = -1;
    if (j < K) {
      id = ids[t * K + j];
      owner = id >= 0 && id < experts ? placement[id] : -1;
    }
    const bool sends = __syncthreads_or(owner == d) != 0;  // block-uniform
    if (own.slot_pos != nullptr && j < K && (owner == d || (owner < 0 && d == 0)))
      own.slot_pos[t * K + j] = owner < 0 ? -1 : static_cast<std::int32_t>(d * T * K + t * K + j);
    if (own.partial_inverse != nullptr && j == 0) {
      own.partial_inverse[t * R + d] = sends ? static_cast<std::int32_t>(d * T + t) : -1;
      own.ones[t * R + d] = 1.0f;
    }
    std::int32_t* dst_ids = pick(to.ids, d) + at * K;
    if (!sends) {
      if (j < K) dst_ids[j] = -1;
      continue;
    }
    copy_row<kVec>(pick(to.rows, d) + at * row_bytes, hidden + t * row_bytes, row_bytes);
    if (j < K) {
      dst_ids[j] = id;
      if (partials) pick(to.w, d)[at * K + j] = weights[t * K + j];
    }
    // aux: the slot base of the token's returned rows at the sender (p2p) or
    // the token itself (p2p-reduce's partial place), and the sending rank.
    if (j < 2)
      pick(to.aux, d)[2 * at + j] = j == 1 ? rank : static_cast<std::int32_t>(partials ? t : t * K);
  }
  signal_peers(sig, R);
  prim::pdl_launch_dependents();
}

/// p2p's return: each kept slot (received row i, slot j) sends its output
/// straight into the sender's returned rows at rank * T * K + slot base + j
/// (the token's fixed stride there: pack_peer_kernel). One block a (row,
/// slot), grid-strided, sources interleaved across blocks as
/// pack_peer_kernel's destinations; places where a sender sent nothing have
/// no kept slot.
template <int kVec>
__global__ void back_peer_kernel(const char* y, const std::int32_t* inverse, const std::int32_t* recv_aux, int R,
                                 int rank, std::int64_t T, int K, std::int64_t row_bytes, PeerBack to,
                                 PeerSignal sig) {
  prim::pdl_wait();
  const std::int64_t items = R * T * K;
  for (std::int64_t n = blockIdx.x; n < items; n += gridDim.x) {
    const int src = static_cast<int>(n % R);
    const std::int64_t rest = n / R, i = src * T + rest / K;
    const int j = static_cast<int>(rest % K);
    const std::int32_t q = inverse[i * K + j];
    if (q < 0) continue;  // uniform across the block
    const std::int64_t at = std::int64_t(rank) * T * K + recv_aux[2 * i] + j;
    copy_row<kVec>(pick(to.rows, src) + at * row_bytes, y + std::int64_t(q) * row_bytes, row_bytes);
  }
  signal_peers(sig, R);
  prim::pdl_launch_dependents();
}

/// p2p-reduce's return: each received row's kept slots summed on the expert
/// rank, combine's arithmetic over this rank's slots of the token (w[j] * y
/// with f32 fused multiply-adds, j ascending, weight as sent), rounded once
/// to the row dtype and written straight into the sender's returned rows at
/// rank * T + token: one row per (token, rank), as DeepEP's combine returns.
/// Work items are (received row, column chunk of blockDim.x * kPer vectors),
/// sources interleaved across blocks as pack_peer_kernel's destinations,
/// grid-strided. An item lists its row's kept slots once in shared memory,
/// then each thread sums its kPer column vectors with kSlots = 8 / kPer
/// slots' loads in flight: the launcher picks kPer so that few rows (many
/// kept slots each: few ranks) split into more chunks and many rows keep one
/// chunk, the grid about one wave either way (items of one column slice each
/// left a block several items deep at decode sizes on 4 GPUs; items of a
/// whole row left 1-rank problems with 8 slots one after another: lab notes).
/// Places where a sender sent nothing have no kept slot and return nothing.
/// K <= kP2pMaxTopk.
/// @tparam T row element type (float, __nv_bfloat16, __half)
/// @tparam kVec elements a thread sums at once (16 bytes where the row allows)
/// @tparam kPer column vectors a thread holds (1, 2, 4 or 8)
template <class T, int kVec, int kPer>
__global__ void reduce_peer_kernel(const T* __restrict__ y, const std::int32_t* __restrict__ inverse,
                                   const float* __restrict__ w, const std::int32_t* __restrict__ recv_aux, int R,
                                   int rank, std::int64_t tokens, int K, std::int64_t hidden, PeerBack to,
                                   PeerSignal sig) {
  static_assert(kPer == 1 || kPer == 2 || kPer == 4 || kPer == 8, "kPer: 1, 2, 4 or 8");
  constexpr int kSlots = 8 / kPer;  // slots whose loads are in flight together
  using Raw = std::conditional_t<kVec * sizeof(T) == 16, uint4, T>;
  __shared__ std::int32_t kept_q[kP2pMaxTopk];
  __shared__ float kept_w[kP2pMaxTopk];
  __shared__ int kept_n;
  prim::pdl_wait();
  const std::int64_t vecs = hidden / kVec, span = std::int64_t(blockDim.x) * kPer;
  const std::int64_t chunks = (vecs + span - 1) / span;
  for (std::int64_t n = blockIdx.x; n < R * tokens * chunks; n += gridDim.x) {
    const int src = static_cast<int>(n % R);
    const std::int64_t rest = n / R, i = src * tokens + rest / chunks;
    const std::int64_t c0 = (rest % chunks) * span + threadIdx.x;
    // The kept slots, j ascending (the sum's order), by a ballot per warp.
    if (threadIdx.x < 32) {
      int count = 0;
      for (int j0 = 0; j0 < K; j0 += 32) {
        const int j = j0 + static_cast<int>(threadIdx.x);
        const std::int32_t q = j < K ? inverse[i * K + j] : -1;
        const unsigned keep = __ballot_sync(0xffffffffu, q >= 0);
        if (q >= 0) {
          const int at = count + __popc(keep & ((1u << threadIdx.x) - 1u));
          kept_q[at] = q;
          kept_w[at] = w[i * K + j];
        }
        count += __popc(keep);
      }
      if (threadIdx.x == 0) kept_n = count;
    }
    __syncthreads();
    const int kept = kept_n;
    if (kept > 0) {
      float acc[kPer][kVec];
#pragma unroll
      for (int u = 0; u < kPer; ++u)
#pragma unroll
        for (int v = 0; v < kVec; ++v) acc[u][v] = 0.f;
      for (int k0 = 0; k0 < kept; k0 += kSlots) {
        Raw raw[kSlots][kPer];
#pragma unroll
        for (int s = 0; s < kSlots; ++s) {
          if (k0 + s >= kept) break;
          const Raw* row = reinterpret_cast<const Raw*>(y + std::int64_t(kept_q[k0 + s]) * hidden);
#pragma unroll
          for (int u = 0; u < kPer; ++u) {
            const std::int64_t c = c0 + std::int64_t(u) * blockDim.x;
            if (c < vecs) raw[s][u] = __ldg(row + c);
          }
        }
#pragma unroll
        for (int s = 0; s < kSlots; ++s) {
          if (k0 + s >= kept) break;
          const float wt = kept_w[k0 + s];
#pragma unroll
          for (int u = 0; u < kPer; ++u) {
            const T* e = reinterpret_cast<const T*>(&raw[s][u]);
#pragma unroll
            for (int v = 0; v < kVec; ++v) acc[u][v] = __fmaf_rn(wt, prim::load_f32(e + v), acc[u][v]);
          }
        }
      }
      Raw* dst = reinterpret_cast<Raw*>(reinterpret_cast<T*>(pick(to.rows, src)) +
                                        (std::int64_t(rank) * tokens + recv_aux[2 * i]) * hidden);
#pragma unroll
      for (int u = 0; u < kPer; ++u) {
        const std::int64_t c = c0 + std::int64_t(u) * blockDim.x;
        if (c >= vecs) continue;
        Raw out;
        T* e = reinterpret_cast<T*>(&out);
#pragma unroll
        for (int v = 0; v < kVec; ++v) prim::store(e + v, acc[u][v]);
        dst[c] = out;
      }
    }
    __syncthreads();  // the slot list is rewritten by the next item
  }
  signal_peers(sig, R);
  prim::pdl_launch_dependents();
}

}  // namespace moekit::ep::detail
