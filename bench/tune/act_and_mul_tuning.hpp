// Tuning candidates of the act-and-mul flat grid (other vector widths, unroll
// and block sizes, persistent grids), for bench_act_and_mul only: entries in
// the shape of a Variant so the bench times them like one, but never
// registered (the product holds only kernels/act_and_mul/registry.cu's list).
#pragma once

#include <span>

#include "act_and_mul/act_and_mul.hpp"

namespace moekit::act::tune {

std::span<const Variant> flat_grid_candidates();

}  // namespace moekit::act::tune
