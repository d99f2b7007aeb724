// experts' problem planning (experts.hpp): the layout stage's and the combine
// stage's Problems, each planned by its own family, and experts' own limits.
// Host only.
#include <cstdint>
#include <string>

#include "common/problem_error.hpp"
#include "experts/experts.hpp"

namespace moekit::experts {

Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int64_t hidden,
                     std::int64_t inter, DType dtype, Act act, W1Layout w1_layout, permute::Layout layout,
                     std::int32_t block_size, float scaling, std::int32_t map_size) {
  if (hidden < 1) throw ProblemError("the hidden size H must be >= 1, got " + std::to_string(hidden));
  if (inter < 1) throw ProblemError("the intermediate size I must be >= 1, got " + std::to_string(inter));
  // Kernels index a row of W1 (2I x H) and of y with 32-bit arithmetic inside
  // an expert; an expert's matrices stay below 2^31 elements. Divided, not
  // multiplied: 2 * I * H wraps int64 for sizes the options accept.
  if (inter > ((std::int64_t{1} << 30) - 1) / hidden)
    throw ProblemError("2 * I * H must be below 2^31 elements per expert, got 2 * " + std::to_string(inter) + " * " +
                       std::to_string(hidden));
  if (act == Act::swiglu_oai && w1_layout != W1Layout::interleaved)
    throw ProblemError("--act swiglu-oai takes W1 with interleaved gate/up rows (--w1-layout interleaved)");
  Problem p;
  p.tokens = tokens;
  p.topk = topk;
  p.experts = experts;
  p.hidden = hidden;
  p.inter = inter;
  p.dtype = dtype;
  p.act = act;
  p.w1_layout = w1_layout;
  // Slots of experts that are not here contribute nothing: align drops them
  // (no bucket rows, which no expert's weights would compute).
  p.permute = permute::make_problem(tokens, topk, experts, block_size, hidden * 2, layout, map_size,
                                    align::Invalid::drop, align::MapSemantics::local);
  p.combine.tokens = tokens;
  p.combine.topk = topk;
  p.combine.rows = p.permute.align.max_num_tokens_padded;
  p.combine.hidden = hidden;
  p.combine.dtype = dtype == DType::bf16 ? combine::DType::bf16 : combine::DType::f16;
  p.combine.scaling = scaling;
  return p;
}

}  // namespace moekit::experts
