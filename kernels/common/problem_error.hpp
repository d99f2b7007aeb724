// The kernel layer's refusal of a Problem. Host-visible: no CUDA headers.
#pragma once

#include <stdexcept>

namespace moekit {

// A problem no kernel of the family can take (an argument out of range,
// outputs past int32): make_problem and validate throw it, its message naming
// the argument and the limit. The kernel layer knows no exit codes: the CLI
// maps it to an input error (exit 2, the same text; src/planned.hpp).
struct ProblemError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

}  // namespace moekit
