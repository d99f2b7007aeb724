// `moekit act-and-mul`: out = act(x[..., :d]) * x[..., d:].
#include <fmt/format.h>

#include "commands.hpp"
#include "cuda_util.hpp"
#include "errors.hpp"
#include "gen.hpp"
#include "ops/act_ref.hpp"
#include "timing.hpp"

namespace moekit {
namespace {

act::Activation parse_activation(const std::string& s) {
  if (s == "silu") return act::Activation::silu;
  if (s == "gelu") return act::Activation::gelu;
  if (s == "gelu-tanh" || s == "gelu_tanh") return act::Activation::gelu_tanh;
  throw InputError(fmt::format("--activation: unknown activation '{}' (silu, gelu, gelu-tanh)", s));
}

}  // namespace

int run_act(const ActArgs& a, const CommonOpts& c) {
  Report r;
  r.op = "act-and-mul";
  r.variant_requested = c.variant;
  const act::Activation activation = parse_activation(a.activation);
  require_known_variant(c, r, act::find);

  npy::Array in;
  std::string label = a.input;
  if (a.input.empty()) {
    if (a.tokens < 0) throw InputError("act-and-mul: give --input FILE, or --tokens N to generate input");
    auto t = npy::parse_dtype(a.gen_dtype);
    if (!t) throw InputError(fmt::format("--dtype: unknown dtype '{}'", a.gen_dtype));
    in = gen::act_input(a.tokens, a.d, *t, c.seed);
    label = fmt::format("generated input ({} tokens x 2*{}, {}, seed {})", a.tokens, a.d, a.gen_dtype, c.seed);
    r.notes.push_back(label);
  } else {
    npy::ReadOptions ro;
    if (!a.dtype.empty()) {
      ro.reinterpret = npy::parse_dtype(a.dtype);
      if (!ro.reinterpret) throw InputError(fmt::format("--dtype: unknown dtype '{}'", a.dtype));
    }
    in = npy::read(a.input, ro);
  }
  act::DType dt;
  switch (in.dtype) {
    case npy::DType::f2: dt = act::DType::f16; break;
    case npy::DType::bf16: dt = act::DType::bf16; break;
    case npy::DType::f4: dt = act::DType::f32; break;
    default:
      throw InputError(fmt::format("{}: input must be float16, bfloat16 or float32, got {} (2-byte bf16 data "
                                   "saved as int16/uint16/void: add --dtype bf16)",
                                   label, npy::dtype_name(in.dtype)));
  }
  if (in.shape.empty()) throw InputError(fmt::format("{}: input must have at least one dimension", label));
  const std::int64_t width = in.shape.back();
  if (width < 2 || width % 2 != 0)
    throw InputError(fmt::format("{}: the last dimension must be 2*d with d >= 1, got {}", label, width));
  const std::int64_t d = width / 2;
  const std::int64_t tokens = in.numel() / width;

  act::Problem p;
  p.tokens = tokens;
  p.d = d;
  p.dtype = dt;
  p.act = activation;
  r.params = {{"tokens", std::to_string(tokens)}, {"d", std::to_string(d)}, {"activation", a.activation}};
  r.dtype = std::string(npy::dtype_name(in.dtype));

  std::vector<std::int64_t> out_shape = in.shape;
  out_shape.back() = d;
  npy::Array out;
  out.dtype = in.dtype;
  out.shape = out_shape;
  out.data.resize(in.data.size() / 2);
  npy::Array ref;
  const bool gpu = decide_gpu(c, r);
  if (!gpu || c.check) {
    ref = out;
    act::reference(p, in.data.data(), ref.data.data());
  }

  if (!gpu) {
    r.variant = "reference";
    r.check_status = "n/a";
    measure_cpu(c, r, [&] { act::reference(p, in.data.data(), ref.data.data()); });
    out = ref;
  } else {
    const DeviceCaps& caps = device_caps();
    const act::Variant& v = resolve_variant(c, p, r, caps, act::pick_auto, act::find);
    const int copies = c.bench ? rotation_copies(in.data.size(), c.cold) : 1;
    std::vector<DeviceBuffer> d_in = upload_copies(in, copies);
    DeviceBuffer d_out(out.data.size()), d_ws(v.workspace_bytes(p, caps));
    d_out.fill_bytes(0xAB);  // poison: unwritten shows up
    auto launch = [&](Stream s, int copy) {
      act::Buffers b;
      b.input = d_in[copy].get();
      b.out = d_out.get();
      b.workspace = d_ws.get();
      cuda_check(v.launch(p, b, s), "act-and-mul kernel launch");
    };
    launch(nullptr, 0);
    cuda_check_last("act-and-mul kernel launch");
    cuda_sync("act-and-mul kernel");
    d_out.download(out.data.data(), out.data.size());
    if (c.check) {
      r.check = act::check(p, ref.data.data(), out.data.data());
      r.check_status = r.check.ok ? "pass" : "fail";
    }
    r.bytes = double(in.data.size() + out.data.size());
    measure_gpu(c, r, launch, copies);
  }

  auto paths = write_outputs(c, r, {{"out.npy", &out}});
  if (!gpu && !paths.empty() && c.check) {
    auto back = npy::read(paths[0]);
    r.check = act::check(p, ref.data.data(), back.data.data());
    r.check_status = r.check.ok ? "pass" : "fail";
    r.notes.push_back("validated the written .npy file against the CPU reference");
  }
  return finish(c, r);
}

}  // namespace moekit
