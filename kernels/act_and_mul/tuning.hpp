// Tuning candidates of the act-and-mul flat grid (other unroll and block
// sizes), for bench_act only: not part of the public variant list.
#pragma once

#include <span>

#include "act_and_mul/act_and_mul.hpp"

namespace moekit::act {

std::span<const Variant> tuning_variants();

}  // namespace moekit::act
