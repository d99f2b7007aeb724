// permute's problem planning (permute.hpp): the align step's Problem. Host only.
#include <cstdint>

#include "align/align.hpp"
#include "permute/permute.hpp"

namespace moekit::permute {

Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int32_t block_size,
                     std::int64_t row_bytes, Layout layout, std::int32_t map_size, align::Invalid invalid,
                     align::MapSemantics map_semantics) {
  Problem p;
  p.tokens = tokens;
  p.topk = topk;
  p.row_bytes = row_bytes;
  p.layout = layout;
  const bool padded = layout == Layout::padded;
  if (!padded && map_semantics == align::MapSemantics::vllm) {
    // Validate as align would, then leave the map out (permute.hpp).
    (void)align::make_problem(tokens * topk, experts, 1, false, map_size, false, invalid, map_semantics);
    map_size = 0;
  }
  p.align = align::make_problem(tokens * topk, experts, padded ? block_size : 1, false, map_size, false, invalid,
                                map_semantics);
  return p;
}

}  // namespace moekit::permute
