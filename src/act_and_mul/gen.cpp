#include "act_and_mul/gen.hpp"

#include <fmt/format.h>

#include "errors.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
#include "rows_gen.hpp"

namespace moekit::gen {

npy::Array act_input(std::int64_t tokens, std::int64_t d, npy::DType dtype, std::uint64_t seed) {
  if (tokens < 0) throw InputError("--tokens must be >= 0");
  if (d < 1) throw InputError("--d must be >= 1");
  if (dtype != npy::DType::f2 && dtype != npy::DType::bf16 && dtype != npy::DType::f4)
    throw InputError("the dtype must be f16, bf16 or f32");
  // Also bounds one row on its own, so 2*d cannot overflow when tokens is 0.
  check_size(2.0 * double(d), "an act-and-mul row (2*d)");
  check_size(double(tokens) * 2 * d, "act-and-mul input");
  require_host_memory(double(tokens) * 2 * double(d) * double(npy::dtype_size(dtype)), "this act-and-mul input");
  return normal_values(tokens, 2 * d, dtype, seed);
}

}  // namespace moekit::gen
