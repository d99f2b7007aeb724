// CPU reference and checker for SiLU/GELU-and-mul.
#pragma once

#include "act_and_mul/act_and_mul.hpp"
#include "check.hpp"

namespace moekit::act {

// input: tokens x 2d elements of p.dtype (f16/bf16 as raw uint16 bits);
// out: tokens x d elements. Computed in double, rounded once to p.dtype.
void reference(const Problem& p, const void* input, void* out);

// f16/bf16: max ULP distance <= 1; f32: relative error <= 1e-5 (absolute bound
// near zero, see docs/act-and-mul.md). NaN must match NaN.
CheckResult check(const Problem& p, const void* ref, const void* got);

}  // namespace moekit::act
