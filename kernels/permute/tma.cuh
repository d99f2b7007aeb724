// Variant `tma` (sm_90): the rows pass of `scatter`, then the copy engine
// moves the rows. One warp per block walks work items (token, segment of at
// most kTmaSegment bytes of its row): lane 0 bulk-loads the segment into
// shared memory, then lane j bulk-stores it to the token's j-th row, so no
// thread touches the data. Two stage buffers: the next item's load is in
// flight while the current one is stored.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "primitives/bulk_copy.cuh"
#include "primitives/pdl.cuh"

namespace moekit::permute::detail {

constexpr unsigned kTmaSegment = 16384;  // bytes per stage buffer (two per block)
constexpr int kTmaMaxTopk = 32;          // one lane per row of a token

inline std::size_t tma_smem(std::int64_t row_bytes) {
  const std::int64_t seg = row_bytes < kTmaSegment ? row_bytes : kTmaSegment;
  return 2 * static_cast<std::size_t>(seg);
}

// row_bytes % 16 == 0, hidden and permuted 16-byte aligned (the launcher checks).
__global__ void __launch_bounds__(32)
    tma_tokens_kernel(const char* __restrict__ hidden, char* __restrict__ permuted,
                      const std::int32_t* __restrict__ inverse, std::int64_t tokens, int topk,
                      std::int64_t row_bytes, std::int64_t segs) {
  extern __shared__ __align__(128) char buf[];
  __shared__ prim::BulkBarrier bar[2];
  const int lane = threadIdx.x;
  const std::int64_t seg_cap = row_bytes < kTmaSegment ? row_bytes : kTmaSegment;
  const std::int64_t items = tokens * segs;
  auto item_bytes = [&](std::int64_t it, std::int64_t& t, std::int64_t& off) {
    t = it / segs;
    off = (it - t * segs) * seg_cap;
    const std::int64_t left = row_bytes - off;
    return static_cast<unsigned>(left < seg_cap ? left : seg_cap);
  };
  if (lane == 0) {
    prim::bulk_barrier_init(&bar[0]);
    prim::bulk_barrier_init(&bar[1]);
  }
  // inverse from the rows pass; hidden (bulk loads) from whatever wrote it.
  prim::pdl_wait();
  __syncwarp();
  std::int64_t it = blockIdx.x;
  if (lane == 0 && it < items) {
    std::int64_t t, off;
    const unsigned n = item_bytes(it, t, off);
    prim::bulk_barrier_expect(&bar[0], n);
    prim::bulk_load(buf, hidden + t * row_bytes + off, n, &bar[0]);
  }
  unsigned parity[2] = {0, 0};
  int stage = 0;
  for (; it < items; it += gridDim.x) {
    const std::int64_t next = it + gridDim.x;
    if (next < items) {
      prim::bulk_wait_read<0>();  // this lane's stores from the other buffer have read it
      __syncwarp();
      if (lane == 0) {
        std::int64_t t, off;
        const unsigned n = item_bytes(next, t, off);
        prim::bulk_barrier_expect(&bar[stage ^ 1], n);
        prim::bulk_load(buf + (stage ^ 1) * seg_cap, hidden + t * row_bytes + off, n, &bar[stage ^ 1]);
      }
    }
    std::int64_t t, off;
    const unsigned n = item_bytes(it, t, off);
    prim::bulk_barrier_wait(&bar[stage], parity[stage]);
    parity[stage] ^= 1;
    if (lane < topk) {
      const std::int32_t r = inverse[t * topk + lane];
      if (r >= 0) prim::bulk_store(permuted + std::int64_t(r) * row_bytes + off, buf + stage * seg_cap, n);
    }
    prim::bulk_commit();
    stage ^= 1;
  }
  prim::bulk_wait_all();
  prim::pdl_launch_dependents();  // at the end: a long row copy (primitives/pdl.cuh)
}

}  // namespace moekit::permute::detail
