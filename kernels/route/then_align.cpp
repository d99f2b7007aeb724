// --then-align (then_align.hpp): route's launch, then align's. Host only: both
// launch through their registries.
#include "route/then_align.hpp"

namespace moekit::route {

align::Problem plan_then_align(Problem& p, std::int32_t block_size) {
  const align::Problem ap = align::make_problem(p.tokens * p.topk, p.experts, block_size, false, 0, false);
  p.align_block = block_size;
  p.align_rows = ap.max_num_tokens_padded;
  p.align_blocks = ap.max_num_blocks;
  return ap;
}

LaunchStatus launch_then_align(const Variant& v, const Problem& p, const align::Variant* av,
                               const align::Problem& ap, const Buffers& b, void* align_workspace, Stream stream,
                               bool pdl) {
  const LaunchStatus e = v.launch(p, b, stream, pdl);
  if (e != 0 || fuses_align(v)) return e;
  constexpr LaunchStatus kInvalidValue = 1;  // cudaErrorInvalidValue: no align variant given
  if (av == nullptr) return kInvalidValue;
  align::Buffers ab;
  ab.topk_ids = b.topk_ids;
  ab.sorted_token_ids = b.sorted_token_ids;
  ab.expert_ids = b.expert_ids;
  ab.num_tokens_post_pad = b.num_tokens_post_pad;
  ab.workspace = align_workspace;
  return av->launch(ap, ab, stream, pdl);
}

}  // namespace moekit::route
