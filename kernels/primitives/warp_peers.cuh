//! @file
//! Groups of lanes holding the same small key, found by ballots.
//! Comments here keep µs figures: 2 lines (why alternative designs lost; not thresholds).
#pragma once

#include <cuda_runtime.h>

#include "primitives/warp_scan.cuh"

namespace moekit::prim {

//! Bits that tell keys 0..count-1 apart (0 for count <= 1).
__device__ __forceinline__ int key_bits(int count) { return count > 1 ? 32 - __clz(count - 1) : 0; }

//! One step of the top-down comparison of my key with 32 others (a warp's,
//! or a column of them published as ballots): `m` = the lanes whose key has
//! the current bit set, `set` = that bit of my key. `peers` keeps the lanes
//! that agree with me on every bit so far; `below` gains those that agree on
//! the higher bits and have a 0 where I have a 1. Start from peers = the
//! lanes as valid as me, below = 0; clear below afterwards if my key is < 0.
__device__ __forceinline__ void peers_below_step(bool set, unsigned m, unsigned& peers, unsigned& below) {
  if (set) below |= peers & ~m;
  peers &= set ? m : ~m;
}

//! warp_peers plus `below`, the lanes whose key is >= 0 and less than this
//! lane's (0 for a key < 0): nbits rounded up to a multiple of 4, plus one,
//! votes, taken from the top bit down, four at a time with no loop branch
//! between them so that they issue back to back (bits above the key range
//! are 0 in every key >= 0 and 1 in every key < 0, so they change nothing).
//! (H100, docs/bench/align-notes.md "micro: keys by shuffles": the votes fully
//! unrolled made a copy of micro's one-token layout 0.06-0.11 us faster than
//! one vote per loop iteration; four per iteration gave micro 0.01-0.03 us at
//! 32 slots, where it keeps the votes.)
//! Every lane of the warp must call it.
__device__ __forceinline__ unsigned warp_peers_below(int key, int nbits, unsigned& below) {
  const unsigned valid = __ballot_sync(kFullWarpMask, key >= 0);
  unsigned peers = key >= 0 ? valid : ~valid;
  below = 0;
#pragma unroll 1
  for (int top = (nbits + 3) & ~3; top > 0; top -= 4) {
#pragma unroll
    for (int k = 1; k <= 4; ++k) {
      const bool set = (key >> (top - k)) & 1;
      peers_below_step(set, __ballot_sync(kFullWarpMask, set), peers, below);
    }
  }
  if (key < 0) below = 0;
  return peers;
}

//! Lanes of the warp holding the same key as this lane; keys < 0 form one
//! group of their own. One ballot per key bit plus one for validity:
//! __match_any_sync gives the same mask but its cost grows with the number of
//! distinct keys in the warp; this costs nbits + 1 votes whatever the data
//! (the `below` masks it does not return compile away). Every lane of the
//! warp must call it. `nbits`: key_bits of the key range.
__device__ __forceinline__ unsigned warp_peers(int key, int nbits) {
  unsigned below;
  return warp_peers_below(key, nbits, below);
}

//! warp_peers for keys below 2^kBits, the bit loop unrolled: no loop counter
//! and no branch, for kernels short enough that every instruction a warp
//! issues is on the critical path. Keys < 0 form one group of their own.
template <int kBits>
__device__ __forceinline__ unsigned warp_peers_fixed(int key) {
  const unsigned valid = __ballot_sync(kFullWarpMask, key >= 0);
  unsigned peers = key >= 0 ? valid : ~valid;
#pragma unroll
  for (int bit = kBits - 1; bit >= 0; --bit) {
    const bool set = (key >> bit) & 1;
    const unsigned m = __ballot_sync(kFullWarpMask, set);
    peers &= set ? m : ~m;
  }
  return peers;
}

}  // namespace moekit::prim
