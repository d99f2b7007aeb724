// Unit tests of the act-and-mul input generator.
#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "act_and_mul/gen.hpp"
#include "errors.hpp"

using namespace moekit;

TEST_CASE("gen act-and-mul refuses sizes before allocating") {
  // 2*d must not overflow.
  CHECK_THROWS_AS(gen::act_input(0, std::int64_t(1) << 62, npy::DType::f4, 1), InputError);
  CHECK_THROWS_AS(gen::act_input(1, std::int64_t(1) << 40, npy::DType::f4, 1), InputError);
}
