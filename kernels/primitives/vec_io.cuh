//! @file
//! 16-byte global loads and stores of 32- and 64-bit integers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace moekit::prim {

//! Whether `p` may be accessed with 16-byte vector instructions.
__device__ __forceinline__ bool is_aligned16(const void* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

//! The 16-byte vector of T: int4 for 4-byte integers, longlong2 for 8-byte.
//! @tparam T a 4- or 8-byte integer type.
template <class T>
using Vec16 = std::conditional_t<sizeof(T) == 4, int4, longlong2>;

//! Elements of T per 16-byte vector.
template <class T>
constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));

//! One 16-byte read-only (non-coherent cache) load of p[0, kVec16<T>).
//! `p` must be 16-byte aligned and the data unchanged during the kernel.
//! @tparam T a 4- or 8-byte integer type.
template <class T>
__device__ __forceinline__ Vec16<T> load16_ldg(const T* p) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte elements");
  return __ldg(reinterpret_cast<const Vec16<T>*>(p));
}

//! The i-th 16-byte vector of `base` (16-byte aligned), read-only load: for
//! loops that step in whole vectors.
//! @tparam T a 4- or 8-byte integer type.
template <class T>
__device__ __forceinline__ Vec16<T> load16_ldg(const T* base, int i) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "4- or 8-byte elements");
  return __ldg(reinterpret_cast<const Vec16<T>*>(base) + i);
}

//! One 16-byte store of four int32 at p (16-byte aligned).
__device__ __forceinline__ void store16(std::int32_t* p, int4 v) { *reinterpret_cast<int4*>(p) = v; }

//! One plain (weak, write-back) 16-byte global store of v's bits at p
//! (16-byte aligned), whatever the compiler makes of how v was built: a uint4
//! assembled from packed halves and assigned through a cast was split into
//! four 4-byte stores inside combine's slices kernel (nvcc 13), and __stwb
//! makes a strong store.
__device__ __forceinline__ void store16_bits(void* p, uint4 v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

}  // namespace moekit::prim
