// Registry of the moe_path family: one variant, `stages`, the families' own
// `auto` picks launched one after another in one stream (so a graph capture
// of its launch is one CUDA graph of the whole path). With the expert FFN the
// experts family's auto pick runs its FFN stage between permute and combine.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/workspace_slices.hpp"
#include "moe_path/moe_path.hpp"

namespace moekit::moe_path {
namespace {

// The stages' families' auto rows read no PDL (tests/moe_path/cpu_moe_path.cpp
// checks), so the picks asked without it size the workspace and launch alike.
const route::Variant& route_pick(const Problem& p, const DeviceCaps& caps) {
  return route::registry().pick_auto(p.route, caps, false);
}
const permute::Variant& permute_pick(const Problem& p, const DeviceCaps& caps) {
  return permute::registry().pick_auto(p.permute, caps, false);
}
const combine::Variant& combine_pick(const Problem& p, const DeviceCaps& caps) {
  return combine::registry().pick_auto(p.combine, caps, false);
}
const experts::Variant& experts_pick(const Problem& p, const DeviceCaps& caps) {
  return experts::registry().pick_auto(p.experts, caps, false);
}
}  // namespace

// A pick without a layout stage (fused) lists the slots and combines itself:
// the path's permute and combine stages drop out.
bool ffn_lists_slots(const Problem& p, const DeviceCaps& caps) {
  return p.ffn && experts::layout_of(experts_pick(p, caps), p.experts, caps) == nullptr;
}

namespace {

// Workspace bytes of each stage and where its slice starts. The ffn slice is
// the experts pick's whole workspace, handed to it as its Buffers' workspace:
// its FFN stage uses only its own slice inside, the layout and combine slices
// there stay unused (this path's permute and combine have theirs).
constexpr int kSlices = 4;  // route, permute, combine, ffn
struct Slices : WorkspaceSlices<kSlices> {
  bool zeroed[kSlices] = {false, false, false, false};
};

Slices slices(const Problem& p, const DeviceCaps& caps) {
  Slices s;
  if (p.routed) {
    const route::Variant& v = route_pick(p, caps);
    s.bytes[0] = v.workspace_bytes(p.route, caps);
    s.zeroed[0] = needs_zeroed_workspace(v, p.route, caps);
  }
  const bool fused = ffn_lists_slots(p, caps);
  if (!fused) {
    const permute::Variant& pv = permute_pick(p, caps);
    s.bytes[1] = pv.workspace_bytes(p.permute, caps);
    s.zeroed[1] = needs_zeroed_workspace(pv, p.permute, caps);
    const combine::Variant& cv = combine_pick(p, caps);
    s.bytes[2] = cv.workspace_bytes(p.combine, caps);
    s.zeroed[2] = needs_zeroed_workspace(cv, p.combine, caps);
  }
  if (p.ffn) {
    const experts::Variant& ev = experts_pick(p, caps);
    s.bytes[3] = ev.workspace_bytes(p.experts, caps);
    // Only the FFN's scratch is used there (it holds what the FFN wrote): the
    // slice comes last, outside the zero promise of the slices before it;
    // except a whole FFN's (fused) zeroed prefix, its counters.
    s.zeroed[3] = fused && needs_zeroed_workspace(ev, p.experts, caps);
  }
  s.place();
  return s;
}

// The whole workspace keeps the zero-workspace promise when every stage with
// a workspace keeps it; a mix (one stage needs zeros, another leaves data) is
// refused rather than shared.
int zero_kind(const Slices& s) {  // 0: no stage needs zeros, 1: all that have one do, -1: a mix
  bool any_zeroed = s.zeroed[kSlices - 1], any_dirty = false;  // the FFN: its zeroed prefix only, if any
  for (int i = 0; i < kSlices - 1; ++i) {
    if (s.bytes[i] == 0) continue;
    (s.zeroed[i] ? any_zeroed : any_dirty) = true;
  }
  if (any_zeroed && any_dirty) return -1;
  return any_zeroed ? 1 : 0;
}

constexpr std::array<Stage, 3> kRouted = {Stage::route, Stage::permute, Stage::combine};
constexpr std::array<Stage, 2> kGiven = {Stage::permute, Stage::combine};
constexpr std::array<Stage, 4> kRoutedFfn = {Stage::route, Stage::permute, Stage::ffn, Stage::combine};
constexpr std::array<Stage, 3> kGivenFfn = {Stage::permute, Stage::ffn, Stage::combine};
constexpr std::array<Stage, 2> kRoutedSlots = {Stage::route, Stage::ffn};
constexpr std::array<Stage, 1> kGivenSlots = {Stage::ffn};

LaunchStatus launch_stages(const Problem& p, const Buffers& b, Stream s, bool pdl) {
  for (Stage st : stages(p, device_caps()))
    if (const LaunchStatus e = launch_stage(p, b, st, s, pdl); e != 0) return e;
  return 0;
}

const char* stages_na(const Problem& p, const DeviceCaps& caps) {
  if (p.routed)
    if (const char* why = route_pick(p, caps).not_applicable(p.route, caps)) return why;
  if (!ffn_lists_slots(p, caps)) {
    if (const char* why = permute_pick(p, caps).not_applicable(p.permute, caps)) return why;
    if (const char* why = combine_pick(p, caps).not_applicable(p.combine, caps)) return why;
  }
  if (p.ffn)
    if (const char* why = experts_pick(p, caps).not_applicable(p.experts, caps)) return why;
  if (zero_kind(slices(p, caps)) < 0)
    return "one stage keeps its workspace zero and another leaves data in its own (not supported)";
  return nullptr;
}
std::size_t stages_workspace(const Problem& p, const DeviceCaps& caps) { return slices(p, caps).total; }
bool stages_zeroed(const Problem& p, const DeviceCaps& caps) { return zero_kind(slices(p, caps)) > 0; }

std::string stages_limits(const DeviceCaps& caps) {
  const combine::Variant* c = combine::registry().find(combine::registry().auto_rows().back().variant);
  const experts::Variant* f = experts::registry().find(experts::registry().auto_rows().back().variant);
  return "each stage's auto pick applies: route E <= " + std::to_string(route::kMaxExperts) +
         " (with logits), align's limits, combine " + (c != nullptr ? c->limits(caps) : std::string("?")) +
         "; the expert FFN (--experts ffn): bf16 or f16 rows, experts " +
         (f != nullptr ? f->limits(caps) : std::string("?"));
}

const std::array<Variant, 1> kVariants{{
    {{"stages",
      "the families' own auto picks one after another in one stream: route (with logits), permute (align, "
      "then the row gather), the experts (identity: nothing, combine reads the permuted rows; ffn: the experts "
      "family's auto pick's FFN stage, gemm1 + act + gemm2 over the permuted rows into y, which combine reads), "
      "combine",
      "route:* permute:* experts:* combine:*"},
     false, stages_limits, stages_na, stages_workspace, launch_stages, stages_zeroed},
}};

const std::array<AutoRow<Problem>, 1> kAutoRows = {{
    {"stages", "", nullptr},
}};

}  // namespace

std::size_t zeroed_workspace_bytes(const Problem& p, const DeviceCaps& caps) {
  const Slices s = slices(p, caps);
  if (zero_kind(s) <= 0) return 0;
  if (!p.ffn) return s.total;
  if (!s.zeroed[kSlices - 1]) return s.offset[kSlices - 1];
  return s.offset[kSlices - 1] + experts::zeroed_workspace_bytes(experts_pick(p, caps), p.experts, caps);
}

std::span<const Stage> stages(const Problem& p, const DeviceCaps& caps) {
  if (ffn_lists_slots(p, caps))
    return p.routed ? std::span<const Stage>(kRoutedSlots) : std::span<const Stage>(kGivenSlots);
  if (p.ffn) return p.routed ? std::span<const Stage>(kRoutedFfn) : std::span<const Stage>(kGivenFfn);
  return p.routed ? std::span<const Stage>(kRouted) : std::span<const Stage>(kGiven);
}
std::span<const Stage> stages(const Problem& p) { return stages(p, device_caps()); }

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::route: return "route";
    case Stage::permute: return "permute";
    case Stage::ffn: return "ffn";
    case Stage::combine: return "combine";
  }
  return "?";
}

std::string_view stage_variant(const Problem& p, Stage s, const DeviceCaps& caps) {
  switch (s) {
    case Stage::route: return route_pick(p, caps).info.name;
    case Stage::permute: return permute_pick(p, caps).info.name;
    case Stage::ffn: return experts_pick(p, caps).info.name;
    case Stage::combine: return combine_pick(p, caps).info.name;
  }
  return "?";
}

LaunchStatus launch_stage(const Problem& p, const Buffers& b, Stage st, Stream s, bool pdl) {
  const DeviceCaps& caps = device_caps();
  const Slices sl = slices(p, caps);
  if (ffn_lists_slots(p, caps) && (st == Stage::permute || st == Stage::combine)) return 0;  // the FFN's own work
  switch (st) {
    case Stage::route: {
      route::Buffers rb;
      rb.logits = b.logits;
      rb.bias = b.bias;
      rb.topk_ids = b.topk_ids;
      rb.topk_weights = b.topk_weights;
      rb.workspace = sl.at(b.workspace, 0);
      return route_pick(p, caps).launch(p.route, rb, s, pdl);
    }
    case Stage::permute:
      return permute_pick(p, caps).launch(p.permute, permute::buffers_of(b, sl.at(b.workspace, 1)), s, pdl);
    case Stage::ffn: {
      if (!p.ffn) return 1;  // cudaErrorInvalidValue: no FFN planned
      if (p.experts.tokens == 0) return 0;  // as the experts variants' own launch
      experts::Buffers eb;
      eb.hidden = b.hidden;
      eb.topk_ids = b.topk_ids;
      eb.topk_weights = b.topk_weights;
      eb.w1 = b.w1;
      eb.w2 = b.w2;
      eb.permuted = b.permuted;
      eb.inverse = b.inverse;
      eb.sorted_token_ids = b.sorted_token_ids;
      eb.expert_ids = b.expert_ids;
      eb.num_tokens_post_pad = b.num_tokens_post_pad;
      eb.expert_offsets = b.expert_offsets;
      eb.y = b.y;
      eb.out = b.out;
      eb.workspace = sl.at(b.workspace, 3);
      return experts::launch_stage(experts_pick(p, caps), p.experts, eb, experts::Stage::ffn, s, pdl);
    }
    case Stage::combine: {
      combine::Buffers cb;
      cb.expert_out = p.ffn ? b.y : b.permuted;  // identity experts: their output is their input
      cb.inverse = b.inverse;
      cb.weights = b.topk_weights;
      cb.out = b.out;
      cb.workspace = sl.at(b.workspace, 2);
      return combine_pick(p, caps).launch(p.combine, cb, s, pdl);
    }
  }
  return 1;  // cudaErrorInvalidValue
}

const Registry& registry() {
  static const Registry r{kVariants, kAutoRows};
  return r;
}

}  // namespace moekit::moe_path
