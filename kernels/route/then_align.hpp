// --then-align: route, then align on the ids route wrote, composed here once
// for every caller (the CLI, the bench, the GPU test), as align composes its
// expert-parallel passes (align::launch_ep) around a variant.
// Host-visible: no CUDA headers.
#pragma once

#include <cstdint>

#include "align/align.hpp"
#include "common/variant.hpp"
#include "route/route.hpp"

namespace moekit::route {

// align's Problem for route's T*K int32 ids over its E experts with block
// size B (no map, no padding of sorted_token_ids to a block), and p told of
// it: p.align_block, align_rows, align_blocks, which the variants that fuse
// align read. Throws ProblemError (align::make_problem's limits). Host only.
align::Problem plan_then_align(Problem& p, std::int32_t block_size);

// v on p, then, unless v writes the align outputs itself (fuses_align), the
// align variant `av` on `ap` (plan_then_align's) with route's ids as its
// input, b's align outputs as its outputs and `align_workspace` as its
// workspace (av->workspace_bytes(ap, caps) bytes, zeroed once where av says
// so); b.workspace is route's own. Both launch with `pdl` (as
// Variant::launch). av may be nullptr only when v fuses align: the caller
// picks it (align::registry().pick_auto(ap, pdl), or a named one). Returns the
// first CUDA error of the launches (0: all were issued); capturable like a
// variant's launch.
LaunchStatus launch_then_align(const Variant& v, const Problem& p, const align::Variant* av,
                               const align::Problem& ap, const Buffers& b, void* align_workspace, Stream stream,
                               bool pdl);

}  // namespace moekit::route
