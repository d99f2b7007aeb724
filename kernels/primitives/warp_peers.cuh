//! @file
//! Groups of lanes holding the same small key, found by ballots.
#pragma once

#include <cuda_runtime.h>

#include "primitives/warp_scan.cuh"

namespace moekit::prim {

//! Bits that tell keys 0..count-1 apart (0 for count <= 1).
__device__ __forceinline__ int key_bits(int count) { return count > 1 ? 32 - __clz(count - 1) : 0; }

//! warp_peers with S keys per lane, and the lanes holding smaller keys: key
//! s of lane l stands for item s * 32 + l (column s). For each of my keys s
//! and each column h, peers[s][h] = the lanes whose key h equals my key s
//! (keys < 0 are one group), below[s][h] = the lanes whose key h is >= 0 and
//! less than my key s (0 when my key is < 0). S * (nbits + 1) votes, taken
//! from the top bit down: a lane is below me once it agrees with me on the
//! higher bits and has a 0 where I have a 1; then S * S mask updates per bit.
template <int S>
__device__ __forceinline__ void warp_peers_below(const int (&key)[S], int nbits, unsigned (&peers)[S][S],
                                                 unsigned (&below)[S][S]) {
  unsigned valid[S];
#pragma unroll
  for (int h = 0; h < S; ++h) valid[h] = __ballot_sync(kFullWarpMask, key[h] >= 0);
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int h = 0; h < S; ++h) {
      peers[s][h] = key[s] >= 0 ? valid[h] : ~valid[h];
      below[s][h] = 0;
    }
#pragma unroll 1
  for (int bit = nbits - 1; bit >= 0; --bit) {
    unsigned m[S];
#pragma unroll
    for (int h = 0; h < S; ++h) m[h] = __ballot_sync(kFullWarpMask, (key[h] >> bit) & 1);
#pragma unroll
    for (int s = 0; s < S; ++s) {
      const bool set = (key[s] >> bit) & 1;
#pragma unroll
      for (int h = 0; h < S; ++h) {
        if (set) below[s][h] |= peers[s][h] & ~m[h];
        peers[s][h] &= set ? m[h] : ~m[h];
      }
    }
  }
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int h = 0; h < S; ++h)
      if (key[s] < 0) below[s][h] = 0;
}

//! One key per lane: warp_peers plus `below`, the lanes whose key is >= 0 and
//! less than this lane's (0 for a key < 0).
__device__ __forceinline__ unsigned warp_peers_below(int key, int nbits, unsigned& below) {
  const int k[1] = {key};
  unsigned p[1][1], b[1][1];
  warp_peers_below<1>(k, nbits, p, b);
  below = b[0][0];
  return p[0][0];
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

}  // namespace moekit::prim
