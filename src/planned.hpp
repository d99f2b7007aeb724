// The kernel layer's refusals as the CLI's input errors.
#pragma once

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

}  // namespace moekit
