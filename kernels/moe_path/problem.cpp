// moe_path's problem planning (moe_path.hpp): the stages' Problems, each
// planned by its own family. Host only.
#include <cstdint>

#include "common/problem_error.hpp"
#include "moe_path/moe_path.hpp"

namespace moekit::moe_path {

Problem make_problem(std::int64_t tokens, std::int32_t topk, std::int32_t experts, std::int64_t hidden,
                     combine::DType dtype, permute::Layout layout, std::int32_t block_size, float scaling,
                     const route::Problem* router, const FfnArgs* ffn) {
  Problem p;
  if (router != nullptr) {
    p.routed = true;
    p.route = *router;
    p.route.tokens = tokens;
    p.route.experts = experts;
    p.route.topk = topk;
    p.route.scaling = 1.0f;
    route::validate(p.route);
  }
  if (ffn != nullptr) {
    if (dtype == combine::DType::f32)
      throw ProblemError("the expert FFN takes bf16 or f16 rows, not f32");
    p.ffn = true;
    p.experts = experts::make_problem(tokens, topk, experts, hidden, ffn->inter,
                                      dtype == combine::DType::bf16 ? experts::DType::bf16 : experts::DType::f16,
                                      ffn->act, ffn->w1_layout, layout, block_size, scaling);
    // One plan for every stage: the layout and combine the FFN was planned around.
    p.permute = p.experts.permute;
    p.combine = p.experts.combine;
    return p;
  }
  const std::int64_t element_bytes = dtype == combine::DType::f32 ? 4 : 2;
  p.permute = permute::make_problem(tokens, topk, experts, block_size, hidden * element_bytes, layout);
  p.combine.tokens = tokens;
  p.combine.topk = topk;
  p.combine.rows = p.permute.align.max_num_tokens_padded;
  p.combine.hidden = hidden;
  p.combine.dtype = dtype;
  p.combine.scaling = scaling;
  return p;
}

}  // namespace moekit::moe_path
