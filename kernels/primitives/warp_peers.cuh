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

}  // namespace moekit::prim
