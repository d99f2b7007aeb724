// The kernel layer's refusals as the CLI's input errors.
#pragma once

#include <string>
#include <utility>

#include "common/problem_error.hpp"
#include "errors.hpp"

namespace moekit {

// f() (a make_problem, a validate: the kernel layer's planning); a
// ProblemError it throws becomes an InputError with the same message (exit 2).
template <class F>
decltype(auto) planned(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const ProblemError& e) {
    throw InputError(e.what());
  }
}

// f(); an InputError it throws (a size limit, a memory estimate) gains
// " (sizes from <sized_by>)" when sized_by is not empty: the files whose
// headers gave those sizes (a tiny file whose header claims gigabytes).
template <class F>
decltype(auto) sized_from(const std::string& sized_by, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const InputError& e) {
    if (sized_by.empty()) throw;
    throw InputError(std::string(e.what()) + " (sizes from " + sized_by + ")");
  }
}

}  // namespace moekit
