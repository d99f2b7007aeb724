// `moekit dedup`: per-batch de-duplication of speculative top-k index rows.
#include <fmt/format.h>

#include <limits>

#include "commands.hpp"
#include "cuda_util.hpp"
#include "errors.hpp"
#include "gen.hpp"
#include "ops/dedup_ref.hpp"
#include "timing.hpp"

namespace moekit {

int run_dedup(const DedupArgs& a, const CommonOpts& c) {
  Report r;
  r.op = "dedup";
  r.variant_requested = c.variant;
  if (a.mtp_step < 1) throw InputError("--mtp-step must be >= 1");
  require_known_variant(c, r, dedup::find);
  if (a.max_index == 0 || a.max_index < -1 || a.max_index > (std::int64_t(1) << 31))
    throw InputError("--max-index must be in [1, 2^31]");

  npy::Array in;
  std::string label = a.indices;
  if (a.indices.empty()) {
    if (a.batch < 0) throw InputError("dedup: give --indices FILE, or --batch N to generate input");
    std::int64_t hi = a.max_index > 0 ? a.max_index : (std::int64_t(1) << 31);
    in = gen::dedup_indices(a.batch, a.mtp_step, a.k, hi, a.overlap, 0.0, c.seed);
    label = fmt::format("generated input (batch {} x {} steps x k {}, values < {}, overlap {}, seed {})", a.batch,
                        a.mtp_step, a.k, hi, a.overlap, c.seed);
    r.notes.push_back(label);
  } else {
    in = npy::read(a.indices);
  }
  if (in.dtype != npy::DType::i4)
    throw InputError(fmt::format("{}: indices must be int32, got {}", label, npy::dtype_name(in.dtype)));

  // [bs*M, k] or [bs, M, k]
  std::int64_t rows = 0, k = 0;
  if (in.shape.size() == 2) {
    rows = in.shape[0];
    k = in.shape[1];
  } else if (in.shape.size() == 3) {
    if (in.shape[1] != a.mtp_step)
      throw InputError(fmt::format("{}: shape [{}, {}, {}] has {} steps per batch but --mtp-step is {}", label,
                                   in.shape[0], in.shape[1], in.shape[2], in.shape[1], a.mtp_step));
    rows = in.shape[0] * in.shape[1];
    k = in.shape[2];
  } else {
    throw InputError(fmt::format("{}: indices must be [bs*M, k] or [bs, M, k], got {} dimension(s)", label,
                                 in.shape.size()));
  }
  if (k < 1) throw InputError(fmt::format("{}: k (the last dimension) must be >= 1", label));
  if (rows % a.mtp_step != 0)
    throw InputError(fmt::format("{}: {} rows do not divide into batches of --mtp-step {} rows", label, rows,
                                 a.mtp_step));
  const std::int64_t batch = rows / a.mtp_step;
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  if (batch > kMax || std::int64_t(a.mtp_step) * k > kMax)
    throw InputError(fmt::format("{}: {} batches of {} values overflow int32 indexing", label, batch,
                                 std::int64_t(a.mtp_step) * k));

  auto vals = in.as<std::int32_t>();
  if (a.max_index > 0) {
    for (std::size_t i = 0; i < vals.size(); ++i)
      if (vals[i] >= a.max_index)
        throw InputError(fmt::format("{}: value {} at flat index {} breaks the promise --max-index {}", label,
                                     vals[i], i, a.max_index));
  }

  dedup::Problem p;
  p.batch = static_cast<std::int32_t>(batch);
  p.mtp_step = a.mtp_step;
  p.k = static_cast<std::int32_t>(k);
  p.max_index = a.max_index;
  r.params = {{"batch", std::to_string(batch)},
              {"mtp_step", std::to_string(a.mtp_step)},
              {"k", std::to_string(k)},
              {"max_index", a.max_index > 0 ? std::to_string(a.max_index) : "none"}};
  r.dtype = "int32";

  const bool gpu = decide_gpu(c, r);
  std::vector<std::int32_t> ref;
  if (!gpu || c.check) ref = dedup::reference(p, vals);

  std::vector<std::int32_t> got;
  if (!gpu) {
    r.variant = "reference";
    r.check_status = "n/a";
    measure_cpu(c, r, [&] { ref = dedup::reference(p, vals); });
    got = ref;
  } else {
    const DeviceCaps& caps = device_caps();
    const dedup::Variant& v = resolve_variant(c, p, r, caps, dedup::pick_auto, dedup::find);
    const int copies = c.bench ? rotation_copies(in.data.size(), c.cold) : 1;
    std::vector<DeviceBuffer> d_in = upload_copies(in, copies);
    const std::size_t out_elems = static_cast<std::size_t>(batch) * a.mtp_step * k;
    DeviceBuffer d_out(out_elems * 4), d_ws(v.workspace_bytes(p, caps));
    d_out.fill_bytes(0xAB);  // poison: unwritten shows up
    auto launch = [&](Stream s, int copy) {
      dedup::Buffers b;
      b.indices = d_in[copy].as<std::int32_t>();
      b.out = d_out.as<std::int32_t>();
      b.workspace = d_ws.get();
      cuda_check(v.launch(p, b, s), "dedup kernel launch");
    };
    launch(nullptr, 0);
    cuda_check_last("dedup kernel launch");
    cuda_sync("dedup kernel");
    got.resize(out_elems);
    d_out.download(got.data(), out_elems * 4);
    if (c.check) {
      r.check = dedup::check(p, ref, got);
      r.check_status = r.check.ok ? "pass" : "fail";
    }
    r.bytes = 2.0 * double(out_elems) * 4;  // input read once, output written once (same size)
    measure_gpu(c, r, launch, copies);
  }

  auto out = make_array(npy::DType::i4, {batch, std::int64_t(a.mtp_step) * k}, got);
  auto paths = write_outputs(c, r, {{"dedup.npy", &out}});
  if (!gpu && !paths.empty() && c.check) {
    auto back = npy::read(paths[0]);
    r.check = dedup::check(p, ref, back.as<std::int32_t>());
    r.check_status = r.check.ok ? "pass" : "fail";
    r.notes.push_back("validated the written .npy file against the CPU reference");
  }
  return finish(c, r);
}

}  // namespace moekit
