// SiLU/GELU-and-mul kernels: out[t, j] = act(in[t, j]) * in[t, d + j].
// Input rows are 2d wide, output rows d wide; all math in f32 (act_math.cuh),
// rounded once on store. Launchers and the variant registry: registry.cu.
// Comments here keep µs figures: 1 line (why alternative designs lost; not thresholds).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "act_and_mul/act_math.cuh"
#include "primitives/fast_div.hpp"
#include "act_and_mul/vec_dtypes.cuh"
#include "primitives/pdl.cuh"

namespace moekit::act {
using prim::FastDivU32;  // shared with the launchers
}  // namespace moekit::act

namespace moekit::act::detail {

template <class T>
__device__ __forceinline__ float load_float(const T* p) {
  return Dtype<T>::to_float(__ldcs(p));
}

// 16-bit outputs take the low-precision fast path (act_math.cuh).
template <class T>
constexpr bool kLowp = sizeof(T) == 2;

template <class T, Activation A, int N>
__device__ __forceinline__ void apply(float (&x)[N], const float (&y)[N]) {
  act_mul_n<A, kLowp<T>>(x, y);
}

template <class T, Activation A, int N>
__device__ __forceinline__ VecN<T, N> apply_vec(const VecN<T, N>& xv, const VecN<T, N>& yv) {
  float x[N], y[N];
  xv.to_float(x);
  yv.to_float(y);
  apply<T, A>(x, y);
  VecN<T, N> o;
  o.from_float(x);
  return o;
}

// Hopper programmatic dependent launch (PDL), for kernels launched with the
// programmatic-serialization attribute. Every mode waits for the previous grid
// in the stream (its writes become visible) before reading. They differ in when
// the next grid may start launching:
//   kPdlEarly: at once. Best for one-wave, latency-bound grids.
//   kPdlLate:  as each block finishes its work, so the next grid launches only
//              when every block of this one is done or finishing: dependents
//              never occupy SM slots a multi-wave grid still needs, but their
//              launch overlaps this grid's tail.
// All are no-ops before sm_90 and without the launch attribute.
enum PdlMode : int { kPdlNone = 0, kPdlEarly = 1, kPdlLate = 2 };

template <int kPdl>
__device__ __forceinline__ void pdl_begin() {
  if constexpr (kPdl != kPdlNone) prim::pdl_wait();
  if constexpr (kPdl == kPdlEarly) prim::pdl_launch_dependents();
}

template <int kPdl>
__device__ __forceinline__ void pdl_end() {
  if constexpr (kPdl == kPdlLate) prim::pdl_launch_dependents();
}

// ---- scalar: one element per thread per grid-stride step --------------------
// kWide: n >= 2^32, so the row index needs a 64-bit division.
template <class T, Activation A, bool kWide>
__global__ void scalar_kernel(const T* __restrict__ in, T* __restrict__ out, std::int64_t n,
                              std::int64_t d) {
  prim::pdl_wait();  // no-op unless launched with PDL (Problem::pdl)
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t t =
        kWide ? i / d
              : static_cast<std::int64_t>(static_cast<std::uint32_t>(i) / static_cast<std::uint32_t>(d));
    const std::int64_t j = i - t * d;
    const T* row = in + t * 2 * d;
    out[i] = Dtype<T>::from_float(act_mul<A, kLowp<T>>(load_float(row + j), load_float(row + d + j)));
  }
  prim::pdl_launch_dependents();  // one block per 256 elements: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

// ---- vectorized: one block per token ---------------------------------------------
// One block per token (grid-stride over tokens), 16-byte vectors strided by
// blockDim over the row, then a scalar tail starting at d - d % (blockDim * V),
// which recomputes everything past the last full block-wide sweep (kept on
// purpose: this is the reference design the others are measured against). Rows that are not 16-byte
// aligned (d % V != 0) go element by element.
// Two 1024-thread blocks per SM: without the bound the compiler spent 37
// registers and only one block fit, costing this baseline ~20% at large d.
template <class T, Activation A>
__global__ void __launch_bounds__(1024, 2) row_block_kernel(const T* __restrict__ in, T* __restrict__ out,
                                                                 std::int64_t tokens, std::int64_t d, bool aligned) {
  constexpr int V = Vec16<T>::kSize;
  const std::int64_t stride = blockDim.x;
  prim::pdl_wait();  // no-op unless launched with PDL (Problem::pdl)
  for (std::int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const T* x = in + t * 2 * d;
    const T* y = x + d;
    T* o = out + t * d;
    if (aligned) {
#pragma unroll 1
      for (std::int64_t v = threadIdx.x; v < d / V; v += stride) {
        Vec16<T> xv, yv;
        xv.load(x + v * V);
        yv.load(y + v * V);
        apply_vec<T, A>(xv, yv).store(o + v * V);
      }
      const std::int64_t rem = d % (stride * V);
      const std::int64_t start = d - rem;
#pragma unroll 1
      for (std::int64_t j = start + threadIdx.x; j < d; j += stride) {
        o[j] = Dtype<T>::from_float(act_mul<A, kLowp<T>>(load_float(x + j), load_float(y + j)));
      }
    } else {
#pragma unroll 1
      for (std::int64_t j = threadIdx.x; j < d; j += stride) {
        o[j] = Dtype<T>::from_float(act_mul<A, kLowp<T>>(load_float(x + j), load_float(y + j)));
      }
    }
  }
  prim::pdl_launch_dependents();  // one block per token: (a grid of many waves: as each block finishes, primitives/pdl.cuh)
}

// ---- flat: one grid over all N-element output vectors --------------------------
// Rows split into whole vectors (d % N == 0, bases aligned to N * sizeof(T)).
// Output vector v lives in row t = v / dv (dv = d / N vectors per row); its x
// vector is input vector v + t * dv and its y vector dv further. Every vector
// is computed exactly once whatever d is, short rows share a block, a long row
// spreads over many blocks. Each thread first issues U independent pairs of
// loads, then computes and stores; consecutive threads touch consecutive
// vectors. The grid may be smaller than the work (grid-stride over chunks).
// N = 16 / sizeof(T) is the bandwidth shape; small N shortens each thread's
// dependent math chain, which is what a latency-bound (few-token) launch waits
// for. kWide: nvec >= 2^32 (64-bit division instead of FastDivU32).
// stream: evict-first loads (the window in policy.hpp), else plain loads
// that keep an L2-resident input's hits. kLoads fixes that choice at compile
// time (kLoadsPlain / kLoadsStream; kLoadsArg reads `stream`): with both
// loads compiled in and predicated, and the chunk loop below, 64-1024 x 4096
// took 0.15-0.3 us more (H200, act-and-mul-notes.md "flat's loop and load
// flag"), so U = 1 runs a plain grid-stride loop.
enum LoadKind : int { kLoadsArg = 0, kLoadsPlain = 1, kLoadsStream = 2 };

template <class T, Activation A, int N, int U, bool kWide, int kPdl, int kLoads = kLoadsArg>
__global__ void flat_kernel(const T* __restrict__ in, T* __restrict__ out, std::int64_t nvec,
                            std::int64_t dv, FastDivU32 div_dv, bool stream) {
  constexpr int V = N;
  if constexpr (kLoads != kLoadsArg) stream = kLoads == kLoadsStream;
  pdl_begin<kPdl>();
  if constexpr (U == 1) {
    const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < nvec; v += step) {
      const std::int64_t t =
          kWide ? v / dv : static_cast<std::int64_t>(div_dv.div(static_cast<std::uint32_t>(v)));
      const std::int64_t src = v + t * dv;
      VecN<T, N> xv, yv;
      xv.load(in + src * V, stream);
      yv.load(in + (src + dv) * V, stream);
      apply_vec<T, A>(xv, yv).store(out + v * V);
    }
    pdl_end<kPdl>();
    return;
  }
  const std::int64_t chunk = static_cast<std::int64_t>(blockDim.x) * U;
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * chunk; base < nvec;
       base += static_cast<std::int64_t>(gridDim.x) * chunk) {
    VecN<T, N> xv[U], yv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t v = base + u * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
      if (v < nvec) {
        const std::int64_t t =
            kWide ? v / dv : static_cast<std::int64_t>(div_dv.div(static_cast<std::uint32_t>(v)));
        const std::int64_t src = v + t * dv;
        xv[u].load(in + src * V, stream);
        yv[u].load(in + (src + dv) * V, stream);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t v = base + u * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
      if (v < nvec) apply_vec<T, A>(xv[u], yv[u]).store(out + v * V);
    }
  }
  pdl_end<kPdl>();
}

// Rows not split into whole vectors (odd d, d % N != 0, or unaligned bases):
// the output is still one contiguous array, so each thread takes N consecutive
// outputs (possibly across a row end), gathers their 2N inputs with element
// loads (all issued before any math) and writes one N-element vector when the
// output base allows. kWide: n >= 2^32.
template <class T, Activation A, int N, bool kWide, int kPdl>
__global__ void flat_unaligned_kernel(const T* __restrict__ in, T* __restrict__ out, std::int64_t n,
                                      std::int64_t d, FastDivU32 div_d, bool out_aligned) {
  constexpr int V = N;
  pdl_begin<kPdl>();
  const std::int64_t nv = (n + V - 1) / V;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v < nv;
       v += stride) {
    const std::int64_t i0 = v * V;
    std::int64_t t =
        kWide ? i0 / d : static_cast<std::int64_t>(div_d.div(static_cast<std::uint32_t>(i0)));
    std::int64_t j = i0 - t * d;
    float x[V], y[V];
#pragma unroll
    for (int e = 0; e < V; ++e) {
      x[e] = 0.0f;
      y[e] = 0.0f;
      if (i0 + e < n) {
        const T* row = in + t * 2 * d;
        x[e] = load_float(row + j);
        y[e] = load_float(row + d + j);
      }
      if (++j == d) {
        j = 0;
        ++t;
      }
    }
    apply<T, A>(x, y);
    if (out_aligned && i0 + V <= n) {
      VecN<T, N> o;
      o.from_float(x);
      o.store(out + i0);
    } else {
#pragma unroll
      for (int e = 0; e < V; ++e) {
        if (i0 + e < n) out[i0 + e] = Dtype<T>::from_float(x[e]);
      }
    }
  }
  pdl_end<kPdl>();
}

}  // namespace moekit::act::detail
