// `moekit align`: moe_align_block_size on a router trace.
#include <fmt/format.h>

#include <limits>

#include "commands.hpp"
#include "cuda_util.hpp"
#include "errors.hpp"
#include "gen.hpp"
#include "ops/align_ref.hpp"
#include "timing.hpp"

namespace moekit {
namespace {

using align::Outputs;
using align::Problem;

Outputs to_outputs(const npy::Array& sorted, const npy::Array& eids, const npy::Array& ntpp) {
  Outputs o;
  auto s = sorted.as<std::int32_t>();
  auto e = eids.as<std::int32_t>();
  o.sorted_token_ids.assign(s.begin(), s.end());
  o.expert_ids.assign(e.begin(), e.end());
  o.num_tokens_post_pad = ntpp.as<std::int32_t>()[0];
  return o;
}

}  // namespace

int run_align(const AlignArgs& a, const CommonOpts& c) {
  Report r;
  r.op = "align";
  r.variant_requested = c.variant;
  if (a.num_experts < 1) throw InputError("--num-experts must be >= 1");
  require_known_variant(c, r, align::find);

  // Input: a file, or a synthetic trace from the shape options.
  npy::Array ids;
  std::string label = a.topk_ids;
  if (a.topk_ids.empty()) {
    if (a.tokens < 0) throw InputError("align: give --topk-ids FILE, or --tokens N to generate a trace");
    // Shapes whose outputs cannot fit int32 fail here, before gigabytes are generated.
    if (a.topk >= 1 && double(a.tokens) * a.topk <= double(std::numeric_limits<std::int32_t>::max()))
      (void)align::make_problem(a.tokens * a.topk, a.num_experts, a.block_size, false, 0, a.pad_sorted_ids);
    ids = gen::align_ids(a.tokens, a.topk, a.num_experts, gen::parse_dist(a.dist), c.seed, false);
    label = fmt::format("generated input ({} tokens x top-{}, {}, seed {})", a.tokens, a.topk, a.dist, c.seed);
    r.notes.push_back(label);
  } else {
    ids = npy::read(a.topk_ids);
  }
  if (ids.dtype != npy::DType::i4 && ids.dtype != npy::DType::i8)
    throw InputError(fmt::format("{}: topk_ids must be int32 or int64, got {}", label, npy::dtype_name(ids.dtype)));
  const bool ids64 = ids.dtype == npy::DType::i8;
  const std::int64_t numel = ids.numel();
  std::vector<std::int64_t> ids_w(static_cast<std::size_t>(numel));
  if (ids64) {
    auto s = ids.as<std::int64_t>();
    std::copy(s.begin(), s.end(), ids_w.begin());
  } else {
    auto s = ids.as<std::int32_t>();
    std::copy(s.begin(), s.end(), ids_w.begin());
  }

  npy::Array map;
  std::vector<std::int32_t> map_v;
  if (!a.expert_map.empty()) {
    map = npy::read(a.expert_map);
    if (map.dtype != npy::DType::i4 || map.shape.size() != 1)
      throw InputError(fmt::format("{}: the expert map must be a 1-D int32 array, got {} with {} dimension(s)",
                                   a.expert_map, npy::dtype_name(map.dtype), map.shape.size()));
    if (map.numel() < 1) throw InputError(fmt::format("{}: the expert map is empty", a.expert_map));
    auto m = map.as<std::int32_t>();
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i] < -1 || m[i] >= a.num_experts)
        throw InputError(fmt::format("{}: entry {} maps to {}, outside [-1, {}) (--num-experts is the local count)",
                                     a.expert_map, i, m[i], a.num_experts));
    map_v.assign(m.begin(), m.end());
  }

  const std::int64_t bound = map_v.empty() ? a.num_experts : std::int64_t(map_v.size());
  std::int64_t invalid = 0;
  for (std::size_t i = 0; i < ids_w.size(); ++i) {
    if (ids_w[i] >= 0 && ids_w[i] < bound) continue;
    if (!a.ignore_invalid)
      throw InputError(fmt::format("{}: expert id {} at index {} is outside [0, {}); pass --ignore-invalid to drop "
                                   "such ids",
                                   label, ids_w[i], i, bound));
    ++invalid;
  }
  if (invalid) r.notes.push_back(fmt::format("{} invalid id(s) dropped (--ignore-invalid)", invalid));

  const Problem p = align::make_problem(numel, a.num_experts, a.block_size, ids64,
                                        static_cast<std::int32_t>(map_v.size()), a.pad_sorted_ids);
  r.params = {{"numel", std::to_string(numel)},
              {"num_experts", std::to_string(a.num_experts)},
              {"block_size", std::to_string(a.block_size)},
              {"expert_map", map_v.empty() ? "none" : std::to_string(map_v.size())},
              {"max_num_tokens_padded", std::to_string(p.max_num_tokens_padded)}};
  r.dtype = npy::dtype_name(ids.dtype);

  const bool gpu = decide_gpu(c, r);
  Outputs ref;
  if (!gpu || c.check) ref = align::reference(p, ids_w, map_v);

  Outputs got;
  if (!gpu) {
    r.variant = "reference";
    r.check_status = "n/a";
    measure_cpu(c, r, [&] { ref = align::reference(p, ids_w, map_v); });
    got = ref;
  } else {
    const DeviceCaps& caps = device_caps();
    const align::Variant* v = &resolve_variant(c, p, r, caps, align::pick_auto, align::find);

    const std::size_t id_bytes = ids.data.size();
    const int copies = c.bench ? rotation_copies(id_bytes, c.cold) : 1;
    std::vector<DeviceBuffer> d_ids = upload_copies(ids, copies);
    DeviceBuffer d_map(map_v.size() * 4);
    d_map.upload(map_v.data(), map_v.size() * 4);
    DeviceBuffer d_sorted(p.max_num_tokens_padded * 4), d_eids(p.max_num_blocks * 4), d_ntpp(4);
    DeviceBuffer d_ws(v->workspace_bytes(p, caps));
    if (needs_zeroed_workspace(*v, p, caps)) d_ws.fill_bytes(0);  // once: the variant keeps it zero
    for (auto* b : {&d_sorted, &d_eids, &d_ntpp}) b->fill_bytes(0xAB);  // poison: unwritten shows up

    auto launch = [&](Stream s, int copy) {
      align::Buffers b;
      b.topk_ids = d_ids[copy].get();
      b.expert_map = map_v.empty() ? nullptr : d_map.as<std::int32_t>();
      b.sorted_token_ids = d_sorted.as<std::int32_t>();
      b.expert_ids = d_eids.as<std::int32_t>();
      b.num_tokens_post_pad = d_ntpp.as<std::int32_t>();
      b.workspace = d_ws.get();
      cuda_check(v->launch(p, b, s), "align kernel launch");
    };
    launch(nullptr, 0);
    cuda_check_last("align kernel launch");
    cuda_sync("align kernel");

    got.sorted_token_ids.resize(p.max_num_tokens_padded);
    got.expert_ids.resize(p.max_num_blocks);
    d_sorted.download(got.sorted_token_ids.data(), got.sorted_token_ids.size() * 4);
    d_eids.download(got.expert_ids.data(), got.expert_ids.size() * 4);
    d_ntpp.download(&got.num_tokens_post_pad, 4);
    if (c.check) {
      // Variants that promise stable order (auto: the one it picked) are checked bit-exactly.
      r.check = align::check(p, ref, got, v->stable_order);
      r.check_status = r.check.ok ? "pass" : "fail";
    }
    r.bytes = double(id_bytes) + double(map_v.size()) * 4 +
              4.0 * double(p.max_num_tokens_padded + p.max_num_blocks + 1);
    measure_gpu(c, r, launch, copies);
  }

  auto sorted = make_array(npy::DType::i4, {p.max_num_tokens_padded}, got.sorted_token_ids);
  auto eids = make_array(npy::DType::i4, {p.max_num_blocks}, got.expert_ids);
  auto ntpp = make_array(npy::DType::i4, {1}, std::vector<std::int32_t>{got.num_tokens_post_pad});
  auto paths = write_outputs(c, r, {{"sorted_token_ids.npy", &sorted},
                                    {"expert_ids.npy", &eids},
                                    {"num_tokens_post_pad.npy", &ntpp}});
  if (!gpu && !paths.empty() && c.check) {
    // Without a GPU there is no kernel to check; validate what was written
    // instead: read the files back and compare them with the reference.
    Outputs back = to_outputs(npy::read(paths[0]), npy::read(paths[1]), npy::read(paths[2]));
    r.check = align::check(p, ref, back, true);
    r.check_status = r.check.ok ? "pass" : "fail";
    r.notes.push_back("validated the written .npy files against the CPU reference");
  }
  return finish(c, r);
}

}  // namespace moekit
