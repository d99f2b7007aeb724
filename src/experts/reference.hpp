// CPU reference and checker of the experts family (docs/experts.md, "Check").
// Independent of the kernels: it reads the kernel layer's Problem for the
// shapes and recomputes the formula of kernels/experts/experts.hpp in double,
// rounding each intermediate to the dtype where the GPU rounds it, for all
// tokens or a seeded sample, on several threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "check.hpp"
#include "experts/experts.hpp"

namespace moekit::experts {

// Where the reference reads W1 and W2: given host arrays (the dtype's bits)
// or the generator of kernels/experts/weights.hpp (recomputing only the rows
// of the experts a token uses).
struct WeightSource {
  bool generated = true;
  std::uint64_t seed = 0;                // generated
  std::span<const std::uint16_t> w1;     // given: [E, 2I, H]
  std::span<const std::uint16_t> w2;     // given: [E, H, I]

  // Given when w1 is not empty, else generated from `seed`.
  static WeightSource of(std::span<const std::uint16_t> w1, std::span<const std::uint16_t> w2, std::uint64_t seed) {
    return WeightSource{w1.empty(), seed, w1, w2};
  }
};

struct Inputs {
  std::span<const std::uint16_t> hidden;     // [T, H], the dtype's bits
  std::span<const std::int32_t> ids;         // [T, K]
  std::span<const float> weights;            // [T, K]
  std::span<const std::int32_t> expert_map;  // [map_size] global -> local or -1; empty: none
  WeightSource w;
};

// The reference on the tokens `tokens` (ascending; all T when the caller
// passes every index).
struct Outputs {
  std::vector<std::int64_t> tokens;   // the tokens computed, ascending
  std::vector<std::uint16_t> out;     // [tokens.size(), H] dtype bits
  std::vector<double> out_exact;      // [tokens.size(), H] the value before out's rounding
  std::vector<double> out_bound;      // [tokens.size(), H] |GPU - out_exact| allowed (docs/experts.md)
  std::vector<std::uint16_t> y;       // [tokens.size(), K, H] y of each slot (0 for a dropped slot)
  std::vector<double> y_bound;        // [tokens.size(), K, H] |GPU y - y| allowed
  std::vector<std::uint8_t> kept;     // [tokens.size(), K] 1 where the slot has an expert here
};

// The local expert of slot id `id` (-1: dropped): the map when given, else
// id itself when in [0, E).
std::int32_t local_expert(const Problem& p, const Inputs& in, std::int32_t id);

// Tokens the reference computes for a check: all T when T * K * (3 I H)
// multiply-adds fit `budget_macs`, else a seeded sample (ascending, first and
// last token included) of as many tokens as fit, at least one.
std::vector<std::int64_t> sample_tokens(const Problem& p, double budget_macs, std::uint64_t seed);

// `threads` <= 0: the machine's hardware concurrency.
Outputs reference(const Problem& p, const Inputs& in, std::span<const std::int64_t> tokens, int threads = 0);

// got_out [T, H] (dtype bits, all tokens) against ref on ref.tokens: each
// element within ref.out_bound of ref.out_exact; the first element outside
// it is named (token, column, both values, the bound). max_error: the largest
// |got - exact| / bound seen ("bound" units).
CheckResult check(const Problem& p, const Outputs& ref, std::span<const std::uint16_t> got_out);
// got_y [rows, H] in the layout's row order: the row of slot (t, j) is
// inverse[t * K + j] (-1: no row); each kept slot's row within ref.y_bound.
CheckResult check_y(const Problem& p, const Outputs& ref, std::span<const std::uint16_t> got_y,
                    std::span<const std::int32_t> inverse);

}  // namespace moekit::experts
