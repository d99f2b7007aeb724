//! @file
//! Block-wide exclusive prefix sum of an array in shared memory.
#pragma once

#include <cuda_runtime.h>

#include "primitives/warp_scan.cuh"

namespace moekit::prim {

//! Shared-memory ints block_exclusive_scan needs for its warp sums.
constexpr int kBlockScanScratch = kWarpThreads + 1;

//! In-place exclusive scan of data[0, n) by the whole block; data[n] = total,
//! which is also returned to every thread. Each thread owns a contiguous
//! chunk, so n may exceed blockDim (E up to 16384 experts); the chunk sums go
//! through a two-level warp scan: 3 barriers whatever n is (the last one
//! makes data[] and the total visible to the whole block).
//! `f` maps each element before it is summed (e.g. a count to its padded
//! size), so the caller needs no pass and no barrier of its own for that.
//! Requirements: one-dimensional block, blockDim.x a multiple of 32 and at
//! most 1024; `data` (n + 1 ints) and `warp_sums` (kBlockScanScratch ints) in
//! shared memory; every thread of the block calls it.
struct ScanIdentity {
  __device__ int operator()(int x) const { return x; }
};
template <class F = ScanIdentity>
__device__ __forceinline__ int block_exclusive_scan(int* data, int n, int* warp_sums, F f = {}) {
  const int t = threadIdx.x;
  const int nt = blockDim.x;
  const int lane = t & (kWarpThreads - 1);
  const int w = t / kWarpThreads;
  const int nw = nt / kWarpThreads;
  const int per = (n + nt - 1) / nt;
  const int lo = min(t * per, n);
  const int hi = min(lo + per, n);
  int s = 0;
  for (int i = lo; i < hi; ++i) s += f(data[i]);
  const int incl = warp_inclusive_scan(s);
  if (lane == kWarpThreads - 1) warp_sums[w] = incl;
  __syncthreads();
  if (w == 0) {
    const int v = lane < nw ? warp_sums[lane] : 0;
    const int inc = warp_inclusive_scan(v);
    warp_sums[lane] = inc - v;
    if (lane == kWarpThreads - 1) warp_sums[kWarpThreads] = inc;
  }
  __syncthreads();
  int run = warp_sums[w] + incl - s;
  for (int i = lo; i < hi; ++i) {
    const int x = f(data[i]);
    data[i] = run;
    run += x;
  }
  const int total = warp_sums[kWarpThreads];
  if (t == 0) data[n] = total;
  __syncthreads();
  return total;
}

//! block_exclusive_scan for n <= blockDim.x, one element per thread, with one
//! barrier fewer: each warp scans its 32 elements and adds its total into the
//! base of every later warp (and into the grand total) with shared atomics,
//! so no second-level scan and no barrier before it. 2 barriers (the last
//! makes data[] and the total visible). Extra requirement: warp_sums
//! (kBlockScanScratch ints) zero, and a barrier since it was zeroed (the
//! caller zeroes it with its own initialisation). relay, E = 64-256: 0.12-0.21
//! us less per launch than block_exclusive_scan (H200, align-notes.md).
template <class F = ScanIdentity>
__device__ __forceinline__ int block_exclusive_scan_small(int* data, int n, int* warp_sums, F f = {}) {
  const int t = threadIdx.x;
  const int lane = t & (kWarpThreads - 1);
  const int w = t / kWarpThreads;
  const int nw = blockDim.x / kWarpThreads;
  const int x = t < n ? f(data[t]) : 0;
  const int incl = warp_inclusive_scan(x);
  const int sum = __shfl_sync(kFullWarpMask, incl, kWarpThreads - 1);
  // Lane j of warp w adds warp w's sum into warp j's base for every later warp j.
  if (lane > w && lane < nw) atomicAdd(warp_sums + lane, sum);
  if (lane == kWarpThreads - 1) atomicAdd(warp_sums + kWarpThreads, sum);
  __syncthreads();
  if (t < n) data[t] = warp_sums[w] + incl - x;
  const int total = warp_sums[kWarpThreads];
  if (t == 0) data[n] = total;
  __syncthreads();
  return total;
}

}  // namespace moekit::prim
