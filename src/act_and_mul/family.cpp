// `moekit act-and-mul`: out = act(x[..., :d]) * x[..., d:] (docs/act-and-mul.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <optional>

#include "act_and_mul/act_and_mul.hpp"
#include "act_and_mul/buffers.hpp"
#include "act_and_mul/reference.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "host_memory.hpp"
#include "act_and_mul/gen.hpp"

namespace moekit {
namespace {

struct Args {
  std::string input;
  std::string activation = "silu";
  std::string dtype;  // reinterpret 2-byte input as this dtype (bf16)
  // synthetic input (no --input)
  std::int64_t tokens = -1;
  std::int64_t d = 4096;
  std::string gen_dtype = "bf16";
};

struct GenArgs {
  std::int64_t tokens = 0, d = 0;
  std::string dtype = "bf16";
};

act::Activation parse_activation(const std::string& s) {
  if (s == "silu") return act::Activation::silu;
  if (s == "gelu") return act::Activation::gelu;
  if (s == "gelu-tanh" || s == "gelu_tanh") return act::Activation::gelu_tanh;
  throw InputError(fmt::format("--activation: unknown activation '{}' (silu, gelu, gelu-tanh)", printable(s)));
}

class ActJob final : public ProblemJob<act::Problem> {
 public:
  ActJob(npy::Array in, act::Problem p) : ProblemJob(p), in_(std::move(in)) {
    std::vector<std::int64_t> shape = in_.shape;
    shape.back() = p_.d;
    out_.dtype = in_.dtype;
    out_.shape = shape;
    out_.data.resize(in_.data.size() / 2);
  }

  void reference() override {
    if (ref_.data.empty()) ref_ = out_;
    act::reference(p_, in_.data.data(), ref_.data.data());
  }
  void adopt_reference() override { out_ = ref_; }

  // auto takes the -pdl variants only with pdl.
  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    return var_.resolve("act-and-mul", requested, p_, caps, pdl, act::registry());
  }
  std::size_t input_bytes() const override { return in_.data.size(); }
  void upload(int copies) override {
    d_.emplace(p_, in_.data, var_.workspace_need(p_), SetOptions::run(copies));
  }
  LaunchStatus launch(Stream s, bool pdl, int copy) override { return var_.v->launch(p_, d_->buffers(copy), s, pdl); }
  void download() override { (void)d_->download(out_.data.data()); }  // no guards in a run's set: always ""
  double bytes_moved() const override { return act::bytes_moved(p_); }
  CheckResult check(bool) override { return act::check(p_, ref_.data.data(), out_.data.data()); }
  std::vector<NamedArray> outputs() override { return {{"out.npy", out_}}; }
  std::vector<std::pair<std::string, std::string>> summary() const override {
    return {{"out_elements", std::to_string(p_.tokens * p_.d)}};
  }
  CheckResult check_files(const std::vector<std::string>& paths) override {
    auto back = npy::read(paths[0]);
    return act::check(p_, ref_.data.data(), back.data.data());
  }

 private:
  npy::Array in_, out_, ref_;
  ResolvedVariant<act::Variant> var_;
  std::optional<act::DeviceBuffers> d_;
};

class ActFamily final : public RegistryFamily<act::Registry> {
 public:
  ActFamily()
      : RegistryFamily(
            {.command = "act-and-mul",
             .summary = "out = act(x[..., :d]) * x[..., d:] (SiLU/GELU-and-mul)",
             .outputs_help = "Output: out.npy [..., d], same dtype.",
             .examples = {"act-and-mul --input data/act_64x2x1024_bf16.npy --activation silu --bench --format json"},
             .aliases = {"act_and_mul"}},
            act::registry()) {}

  void add_options(CLI::App& s) override {
    auto* in = s.add_option("--input", a_.input, "f16, bf16 or f32 [..., 2d] (.npy)");
    s.add_option("--activation", a_.activation, "silu, gelu or gelu-tanh")
        ->check(CLI::IsMember({"silu", "gelu", "gelu-tanh", "gelu_tanh"}))
        ->capture_default_str();
    s.add_option("--dtype", a_.dtype, "with --input: read 2-byte data as this dtype (bf16 saved as int16/uint16/void)")
        ->check(CLI::IsMember({"bf16", "f16"}))
        ->needs(in);
    // Generator options make no sense with an input file: refused, not ignored.
    s.add_option("--tokens", a_.tokens, "without --input: generate this many tokens")->excludes(in);
    s.add_option("--d", a_.d, "without --input: output width d")->capture_default_str()->excludes(in);
    s.add_option("--gen-dtype", a_.gen_dtype, "without --input: f16, bf16 or f32")
        ->check(CLI::IsMember({"f16", "bf16", "f32"}))
        ->capture_default_str()
        ->excludes(in);
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    s.description("normal random [tokens, 2d] activations");
    s.add_option("--tokens", g_.tokens, "tokens")->required();
    s.add_option("--d", g_.d, "output width d (input rows are 2d)")->required();
    s.add_option("--dtype", g_.dtype, "f16, bf16 or f32")->check(CLI::IsMember({"f16", "bf16", "f32"}))
        ->capture_default_str();
    return [this](std::uint64_t seed) { return gen::act_input(g_.tokens, g_.d, *npy::parse_dtype(g_.dtype), seed); };
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  GenArgs g_;
};

std::unique_ptr<Job> ActFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  const act::Activation activation = parse_activation(a.activation);

  npy::Array in;
  std::string label = display_path(a.input);  // one printable line in messages
  if (a.input.empty()) {
    if (a.tokens < 0) throw InputError("act-and-mul: give --input FILE, or --tokens N to generate input");
    auto t = npy::parse_dtype(a.gen_dtype);
    if (!t) throw InputError(fmt::format("--gen-dtype: unknown dtype '{}'", printable(a.gen_dtype)));
    // Held at once: the input and four outputs of half its width (the
    // reference, the run's own, the output set's copy, the file read back
    // for the check): three times the input.
    if (a.tokens >= 0 && a.d >= 1)
      require_host_memory(3.0 * double(a.tokens) * 2 * double(a.d) * double(npy::dtype_size(*t)), "this act-and-mul run");
    in = gen::act_input(a.tokens, a.d, *t, c.seed);
    label = fmt::format("generated input ({} tokens x 2*{}, {}, seed {})", a.tokens, a.d, a.gen_dtype, c.seed);
    r.notes.push_back(label);
  } else {
    npy::ReadOptions ro;
    if (!a.dtype.empty()) {
      ro.reinterpret = npy::parse_dtype(a.dtype);
      if (!ro.reinterpret) throw InputError(fmt::format("--dtype: unknown dtype '{}'", printable(a.dtype)));
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

  // The input and four half-width outputs (as above); a generated input was checked before generating.
  if (!a.input.empty()) require_host_memory(3.0 * double(in.data.size()), "this act-and-mul run");
  act::Problem p;
  p.d = width / 2;
  p.tokens = in.numel() / width;
  p.dtype = dt;
  p.act = activation;
  // The canonical spelling, whatever was typed (gelu_tanh -> gelu-tanh).
  const char* act_name = activation == act::Activation::silu   ? "silu"
                         : activation == act::Activation::gelu ? "gelu"
                                                               : "gelu-tanh";
  r.params = {{"tokens", std::to_string(p.tokens)}, {"d", std::to_string(p.d)}, {"activation", act_name}};
  r.dtype = std::string(npy::dtype_name(in.dtype));
  return std::make_unique<ActJob>(std::move(in), p);
}

}  // namespace

std::unique_ptr<Family> make_act_and_mul_family() { return std::make_unique<ActFamily>(); }

}  // namespace moekit
