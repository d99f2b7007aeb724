//! @file
//! Groups of lanes holding the same small key, found by ballots.
#pragma once

#include <cuda_runtime.h>

#include "primitives/warp_scan.cuh"

namespace moekit::prim {

//! Bits that tell keys 0..count-1 apart (0 for count <= 1).
__device__ __forceinline__ int key_bits(int count) { return count > 1 ? 32 - __clz(count - 1) : 0; }

//! Lanes of the warp holding the same key as this lane; keys < 0 form one
//! group of their own. One ballot per key bit plus one for validity:
//! __match_any_sync gives the same mask but its cost grows with the number of
//! distinct keys in the warp; this costs nbits + 1 votes whatever the data.
//! Every lane of the warp must call it. `nbits`: key_bits of the key range.
__device__ __forceinline__ unsigned warp_peers(int key, int nbits) {
  const unsigned valid = __ballot_sync(kFullWarpMask, key >= 0);
  unsigned peers = key >= 0 ? valid : ~valid;
  for (int bit = 0; bit < nbits; ++bit) {
    const bool set = (key >> bit) & 1;
    const unsigned m = __ballot_sync(kFullWarpMask, set);
    peers &= set ? m : ~m;
  }
  return peers;
}

//! warp_peers plus the lanes holding a smaller key: `below` gets the lanes
//! whose key is >= 0 and less than this lane's (0 for a key < 0). The same
//! nbits + 1 votes, taken from the top bit down: a lane is below me once it
//! agrees with me on the higher bits and has a 0 where I have a 1.
__device__ __forceinline__ unsigned warp_peers_below(int key, int nbits, unsigned& below) {
  const unsigned valid = __ballot_sync(kFullWarpMask, key >= 0);
  unsigned peers = key >= 0 ? valid : ~valid;
  unsigned lt = 0;
  for (int bit = nbits - 1; bit >= 0; --bit) {
    const bool set = (key >> bit) & 1;
    const unsigned m = __ballot_sync(kFullWarpMask, set);
    if (set) lt |= peers & ~m;
    peers &= set ? m : ~m;
  }
  below = key >= 0 ? lt : 0u;
  return peers;
}

}  // namespace moekit::prim
