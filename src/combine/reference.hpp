// CPU reference and checker for combine (semantics: docs/combine.md).
#pragma once

#include <cstdint>
#include <vector>

#include "check.hpp"
#include "combine/combine.hpp"

namespace moekit::combine {

// x: P x H elements of p.dtype (f16/bf16 as raw bits); inverse, weights: T x K;
// out: T x H elements of p.dtype. out[t] = S * sum_j w[t, j] x[inverse[t, j]]
// over j ascending with inverse >= 0: f32 fused multiply-adds, one f32
// multiply by S, one rounding to the output dtype.
void reference(const Problem& p, const void* x, const std::int32_t* inverse, const float* weights, void* out);

// Bit for bit (the promise of every stable variant); the first differing element.
CheckResult check(const Problem& p, const void* ref, const void* got);

// For a variant that adds in another order (not stable): each element within
// max(1 ULP of the output dtype at the f32 result, 1e-5 * S * sum_j |w x|) of
// the f32 result (f32 output: the second term alone, 1e-5 relative to the
// terms' magnitude, which is what reordering can change).
CheckResult check_tolerant(const Problem& p, const void* x, const std::int32_t* inverse, const float* weights,
                           const void* got);

}  // namespace moekit::combine
