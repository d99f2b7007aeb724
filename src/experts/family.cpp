// `moekit experts`: the MoE expert computation, every kept slot's token row
// through its expert's FFN (gemm1, the gated activation, gemm2), weighted and summed
// back to token order (docs/experts.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>
#include <tuple>
#include <utility>

#include "align/gen.hpp"
#include "combine/gen.hpp"
#include "cuda_util.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "experts/buffers.hpp"
#include "experts/experts.hpp"
#include "experts/reference.hpp"
#include "experts/weights.hpp"
#include "family.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
#include "permute/reference.hpp"
#include "planned.hpp"
#include "rows_gen.hpp"
#include "sizes.hpp"

namespace moekit {
namespace {

// Model shapes (their Hugging Face configs; the TP8 shard: I / 8): what
// --model fills in where the command line and the files leave a size out.
struct Preset {
  std::string_view name;
  std::int32_t experts, topk;
  std::int64_t hidden, inter;
  double scaling;
};
constexpr std::array<Preset, 4> kPresets = {{
    {"mixtral", 8, 2, 4096, 14336, 1.0},
    {"qwen3-235b", 128, 8, 4096, 1536, 1.0},
    {"deepseek-v3", 256, 8, 7168, 2048, 2.5},
    {"deepseek-v3-tp8", 256, 8, 7168, 256, 2.5},
}};

// The reference a GPU run is checked against, in multiply-adds: all tokens
// when T * K * 3 I H fits, else a seeded sample of tokens that does. The
// reference does about 7.5e8 multiply-adds a second per core (given weights;
// generating an expert's weights costs more per element): about 3 s on two
// cores, under a second on a GPU machine's sixteen.
constexpr double kCheckMacs = 4e9;
// A CPU run's output is the reference of every token: refused above this
// (about 30 s on two cores).
constexpr double kCpuMacs = 5e10;

struct Args {
  std::string hidden, dtype, ids, weights, map, w1, w2, model;
  std::string w1_layout = "gate-up", act = "silu", layout = "compact", gen_dtype = "bf16";
  std::int64_t tokens = -1, hidden_size = 0, inter_size = 0;
  std::int32_t experts = 0, topk = 0, block_size = 64;
  double scaling = 1.0;
  bool keep_intermediate = false;
};

// The options --model may fill in: given on the command line or not.
struct Given {
  CLI::Option *experts = nullptr, *topk = nullptr, *hidden_size = nullptr, *inter_size = nullptr,
              *scaling = nullptr;
};
bool given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

struct GenArgs {  // `moekit gen experts`, `moekit gen experts-weights`
  std::int64_t tokens = -1, hidden_size = 0, inter_size = 0;
  std::int32_t experts = 0;
  std::string dtype = "bf16", which;
};

std::span<const std::uint16_t> bits(const npy::Array& a) { return a.as<std::uint16_t>(); }

// Generated W1 ([E, 2I, H], matrix 0) or W2 ([E, H, I], matrix 1): the values
// generate_weights writes on the device (kernels/experts/weights.hpp, rounded
// to nearest even as the device's conversion does).
npy::Array weights_array(int matrix, std::int64_t E, std::int64_t H, std::int64_t I, npy::DType dt,
                         std::uint64_t seed) {
  const std::int64_t rows = matrix == 0 ? 2 * I : H, cols = matrix == 0 ? H : I;
  const float scale = experts::weight_scale(cols);
  npy::Array a;
  a.dtype = dt;
  a.shape = {E, rows, cols};
  a.data.resize(std::size_t(E) * std::size_t(rows) * std::size_t(cols) * 2);
  std::uint16_t* o = a.as<std::uint16_t>().data();
  for (std::int64_t e = 0; e < E; ++e)
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) {
        const float v = experts::weight_value(seed, matrix, e, r, c, rows, cols, scale);
        *o++ = dt == npy::DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
      }
  return a;
}

class ExpertsJob final : public ProblemJob<experts::Problem> {
 public:
  struct Host {
    npy::Array hidden;                // [T, H], the dtype
    std::vector<std::int32_t> ids;    // [T, K] as given (int64 ids beyond int32: -1)
    std::vector<float> weights;       // [T, K]
    std::vector<std::int32_t> map;    // [map_size] or empty
    npy::Array w1, w2;                // given weights, or empty: generated on the device from `seed`
    std::uint64_t seed = 0;
    bool cpu = false;                 // the run is the CPU reference: every token, no sample
    bool keep = false;                // --keep-intermediate
    std::int64_t active = 0, kept = 0;  // experts with a slot, kept slots
  };

  ExpertsJob(Host h, experts::Problem p, Report& r) : ProblemJob(p), h_(std::move(h)), report_(&r) {
    in_.hidden = bits(h_.hidden);
    in_.ids = h_.ids;
    in_.weights = h_.weights;
    in_.expert_map = h_.map;
    in_.w.generated = h_.w1.data.empty();
    in_.w.seed = h_.seed;
    if (!in_.w.generated) {
      in_.w.w1 = bits(h_.w1);
      in_.w.w2 = bits(h_.w2);
    }
  }

  void reference() override {
    if (ref_tokens_.empty() && p_.tokens > 0) {
      if (h_.cpu) {
        ref_tokens_.resize(std::size_t(p_.tokens));
        for (std::int64_t t = 0; t < p_.tokens; ++t) ref_tokens_[std::size_t(t)] = t;
      } else {
        ref_tokens_ = experts::sample_tokens(p_, kCheckMacs, h_.seed);
      }
    }
    ref_ = experts::reference(p_, in_, ref_tokens_);
  }

  // The reference of every token is the output; the kept y rows are laid
  // out as permute's reference lays out the slots (its inverse map).
  void adopt_reference() override {
    got_out_ = ref_.out;
    if (!h_.keep) return;
    std::vector<std::int64_t> wide(h_.ids.begin(), h_.ids.end());
    const permute::Outputs lay =
        permute::reference(p_.permute, h_.hidden.data.data(), wide, permute::align_map(p_.permute, h_.map));
    got_inv_ = lay.inverse;
    got_y_.assign(std::size_t(p_.rows()) * std::size_t(p_.hidden), 0);
    for (std::size_t s = 0; s < got_inv_.size(); ++s)
      if (got_inv_[s] >= 0 && ref_.kept[s])
        std::memcpy(got_y_.data() + std::size_t(got_inv_[s]) * std::size_t(p_.hidden),
                    ref_.y.data() + s * std::size_t(p_.hidden), std::size_t(p_.hidden) * 2);
  }

  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    auto rv = var_.resolve("experts", requested, p_, caps, pdl, experts::registry());
    if (caps.present()) {
      if (const permute::Variant* layout = experts::layout_of(*var_.v, p_, caps))
        report_->notes.push_back(fmt::format(
            "stages: layout permute {} (align {}), ffn {}, combine {}", layout->info.name,
            align::registry().pick_auto(p_.permute.align, caps, false).info.name, rv.name,
            combine::registry().pick_auto(p_.combine, caps, false).info.name));
      else
        report_->notes.push_back(fmt::format("stages: ffn {} alone (it lists the slots and combines itself; y rows "
                                             "are the slots t*K+j)", rv.name));
    }
    return rv;
  }

  std::size_t input_bytes() const override { return h_.hidden.data.size(); }

  void upload(int copies) override {
    experts::HostInputs in;
    in.hidden = h_.hidden.data;
    in.ids = h_.ids;
    in.weights = h_.weights;
    in.expert_map = h_.map;
    in.w1 = h_.w1.data;
    in.w2 = h_.w2.data;
    in.seed = h_.seed;
    d_.emplace(p_, in, var_.workspace_need(p_), SetOptions::run(copies));
  }

  LaunchStatus launch(Stream s, bool pdl, int copy) override { return var_.v->launch(p_, d_->buffers(copy), s, pdl); }

  std::vector<Stage> stages() override {
    std::vector<Stage> v;
    for (experts::Stage st : experts::stages(*var_.v))
      v.push_back({std::string(experts::stage_name(st)), [this, st](Stream s, bool pdl, int copy) {
                     return experts::launch_stage(*var_.v, p_, d_->buffers(copy), st, s, pdl);
                   }});
    return v;
  }

  void download() override {
    download_error_ = d_->download(got_out_, h_.keep ? &got_y_ : nullptr, h_.keep ? &got_inv_ : nullptr);
  }

  double bytes_moved() const override { return experts::bytes_moved(p_, h_.active, h_.kept); }

  CheckResult check(bool) override {
    if (!download_error_.empty()) {
      CheckResult r;
      r.ok = false;
      r.first_difference = download_error_;
      return r;
    }
    CheckResult r = experts::check(p_, ref_, got_out_);
    if (h_.keep) {
      CheckResult y = experts::check_y(p_, ref_, got_y_, got_inv_);
      if (r.ok && !y.ok) r.first_difference = y.first_difference;
      r.ok = r.ok && y.ok;
      r.max_error = std::max(r.max_error, y.max_error);
    }
    if (std::int64_t(ref_.tokens.size()) < p_.tokens)
      report_->notes.push_back(fmt::format("checked {} of {} tokens (seeded sample: the reference of all would take "
                                           "over {:g} multiply-adds)",
                                           ref_.tokens.size(), p_.tokens, kCheckMacs));
    else
      report_->notes.push_back(h_.keep ? "checked every token's out and every kept slot's y against the reference"
                                       : "checked every token's out against the reference");
    return r;
  }

  std::vector<NamedArray> outputs() override {
    std::vector<NamedArray> o;
    npy::Array out;
    out.dtype = h_.hidden.dtype;
    out.shape = {p_.tokens, p_.hidden};
    out.data.resize(got_out_.size() * 2);
    std::memcpy(out.data.data(), got_out_.data(), out.data.size());
    o.push_back({"out.npy", std::move(out)});
    if (h_.keep) {
      clear_unused_rows();
      npy::Array y;
      y.dtype = h_.hidden.dtype;
      y.shape = {p_.rows(), p_.hidden};
      y.data.resize(got_y_.size() * 2);
      std::memcpy(y.data.data(), got_y_.data(), y.data.size());
      o.push_back({"y.npy", std::move(y)});
      o.push_back({"inverse.npy", make_array(npy::DType::i4, {p_.tokens, p_.topk}, got_inv_)});
    }
    return o;
  }

  std::vector<std::pair<std::string, std::string>> summary() const override {
    return {{"active_experts", std::to_string(h_.active)},
            {"kept_slots", std::to_string(h_.kept)},
            {"flop", fmt::format("{:.0f}", experts::flops(p_, h_.kept))}};
  }

  // The files hold what the run produced, byte for byte.
  CheckResult check_files(const std::vector<std::string>& paths) override {
    CheckResult r;
    const auto same = [&](const std::string& path, const void* want, std::size_t bytes) {
      const npy::Array back = npy::read(path);
      if (r.ok && (back.data.size() != bytes || (bytes > 0 && std::memcmp(back.data.data(), want, bytes) != 0))) {
        r.ok = false;
        r.first_difference = fmt::format("{}: does not hold the run's output", display_path(path));
      }
    };
    same(paths[0], got_out_.data(), got_out_.size() * 2);
    if (h_.keep && paths.size() >= 3) {
      same(paths[1], got_y_.data(), got_y_.size() * 2);
      same(paths[2], got_inv_.data(), got_inv_.size() * 4);
    }
    return r;
  }

 private:
  // y rows no slot names (padding, and the capacity beyond the used rows)
  // hold whatever the kernels left there: written as 0.
  void clear_unused_rows() {
    std::vector<char> used(std::size_t(p_.rows()), 0);
    for (const std::int32_t row : got_inv_)
      if (row >= 0 && row < p_.rows()) used[std::size_t(row)] = 1;
    for (std::size_t row = 0; row < used.size(); ++row)
      if (!used[row]) std::fill_n(got_y_.begin() + std::ptrdiff_t(row * std::size_t(p_.hidden)), p_.hidden, 0);
  }

  Host h_;
  experts::Inputs in_;
  Report* report_;
  std::vector<std::int64_t> ref_tokens_;
  experts::Outputs ref_;
  std::vector<std::uint16_t> got_out_, got_y_;
  std::vector<std::int32_t> got_inv_;
  std::string download_error_;
  ResolvedVariant<experts::Variant> var_;
  std::optional<experts::DeviceBuffers> d_;
};

class ExpertsFamily final : public RegistryFamily<experts::Registry> {
 public:
  ExpertsFamily()
      : RegistryFamily(
            {.command = "experts",
             .summary = "the MoE expert FFN: each kept slot's token row through its expert (gemm1, the gated activation, "
                        "gemm2), weighted and summed back to token order",
             .outputs_help = "Outputs: out.npy [T, H] (the hidden dtype); with --keep-intermediate also y.npy [R, H] "
                             "(each kept slot's expert output, in the layout's row order; unused rows 0) and "
                             "inverse.npy int32 [T, K] (each slot's row of y, -1 = dropped).",
             .examples = {"experts --model deepseek-v3-tp8 --tokens 1,16,256 --bench"}},
            experts::registry()) {}

  void add_options(CLI::App& s) override {
    auto* hid = s.add_option("--hidden", a_.hidden, "hidden states [T, H], bf16 or f16 (.npy); default: generated");
    s.add_option("--dtype", a_.dtype, "read 2-byte --hidden/--w1/--w2 data saved as int16/uint16 as this dtype")
        ->check(CLI::IsMember({"bf16", "f16"}));
    auto* ids = s.add_option("--topk-ids", a_.ids,
                             "expert ids [T, K], int32 or int64 (.npy); ids -1 or outside [0, E) (the map's length "
                             "with --expert-map) are dropped slots; default: generated, distinct per token");
    auto* w = s.add_option("--topk-weights", a_.weights, "with --topk-ids: routing weights [T, K], float32 (.npy)");
    ids->needs(w);
    w->needs(ids);
    s.add_option("--expert-map", a_.map,
                 "int32 [E_global] (.npy): global id -> local expert, -1 = not here (its slots are dropped); the "
                 "ids are global, W1 and W2 hold the local experts (E: --w1's, else -E, else the largest entry + 1)");
    auto* w1 = s.add_option("--w1", a_.w1, "gate and up weights [E, 2I, H], the hidden dtype (.npy); default: generated");
    auto* w2 = s.add_option("--w2", a_.w2, "down weights [E, H, I], the hidden dtype (.npy)");
    w1->needs(w2);
    w2->needs(w1);
    s.add_option("--w1-layout", a_.w1_layout,
                 "rows of W1: gate-up (gate rows 0..I-1, then up rows) or interleaved (row 2i gate i, 2i+1 up i)")
        ->check(CLI::IsMember({"gate-up", "interleaved"}))
        ->capture_default_str();
    s.add_option("--act", a_.act,
                 "activation: silu, gelu, gelu-tanh, or swiglu-oai (gpt-oss: clamped, alpha 1.702; needs "
                 "--w1-layout interleaved)")
        ->check(CLI::IsMember({"silu", "gelu", "gelu-tanh", "swiglu-oai"}))
        ->capture_default_str();
    s.add_option("--model", a_.model,
                 "fill in the shape where not given: mixtral (E 8, K 2, H 4096, I 14336), qwen3-235b (E 128, K 8, H "
                 "4096, I 1536), deepseek-v3 (E 256, K 8, H 7168, I 2048, S 2.5), deepseek-v3-tp8 (I 256, else as "
                 "deepseek-v3)")
        ->check(CLI::IsMember({"mixtral", "qwen3-235b", "deepseek-v3", "deepseek-v3-tp8"}));
    auto* tok = s.add_option("--tokens", a_.tokens, "without --hidden and --topk-ids: generate this many tokens");
    tok->excludes(hid)->excludes(ids);
    g_.experts = s.add_option("-E,--num-experts", a_.experts,
                              "experts E (with --w1: must match it; with --expert-map: the local count)");
    g_.topk = s.add_option("-k,--topk", a_.topk, "experts per token K (with --topk-ids: must match it)");
    g_.hidden_size =
        s.add_option("--hidden-size", a_.hidden_size, "without --hidden and --w1: H")->excludes(hid)->excludes(w1);
    g_.inter_size = s.add_option("--inter-size", a_.inter_size, "without --w1: the intermediate size I")->excludes(w1);
    s.add_option("--gen-dtype", a_.gen_dtype, "without --hidden: the dtype of the generated rows and weights")
        ->check(CLI::IsMember({"bf16", "f16"}))
        ->capture_default_str()
        ->excludes(hid);
    g_.scaling = s.add_option("--routed-scaling-factor", a_.scaling, "S: out = S * sum_j w[t, j] * y[t, j]")
                     ->capture_default_str();
    s.add_option("--layout", a_.layout,
                 "the rows the FFN reads: compact (permute's: real rows grouped by expert) or padded (align's: each "
                 "expert's rows padded to a multiple of B)")
        ->check(CLI::IsMember({"compact", "padded"}))
        ->capture_default_str();
    s.add_option("-B,--block-size", a_.block_size, "padded layout: align's block size B")->capture_default_str();
    s.add_flag("--keep-intermediate", a_.keep_intermediate,
               "also write (and check) y.npy, the expert outputs in the layout's row order, and inverse.npy");
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    s.description("hidden states [tokens, H], standard normal, bf16 or f16 (ids: `moekit gen align`; weights: "
                  "`moekit gen topk-weights`; W1 and W2: `moekit gen experts-weights`)");
    s.add_option("--tokens", gh_.tokens, "tokens")->required();
    s.add_option("--hidden-size", gh_.hidden_size, "H")->required();
    s.add_option("--dtype", gh_.dtype, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"}))->capture_default_str();
    return [this](std::uint64_t seed) {
      return gen::normal_rows(gh_.tokens, gh_.hidden_size, *npy::parse_dtype(gh_.dtype), seed, "hidden rows");
    };
  }

  std::vector<ExtraGen> extra_gens() override {
    return {{"experts-weights", [this](CLI::App& s) -> std::function<npy::Array(std::uint64_t)> {
               s.description("experts' --w1 [E, 2I, H] or --w2 [E, H, I]: the weights a run without --w1/--w2 "
                             "generates on the device for the same seed, E, H, I and dtype, element for element");
               s.add_option("--which", gw_.which, "w1 or w2")->check(CLI::IsMember({"w1", "w2"}))->required();
               s.add_option("-E,--num-experts", gw_.experts, "experts E")->required();
               s.add_option("--hidden-size", gw_.hidden_size, "H")->required();
               s.add_option("--inter-size", gw_.inter_size, "the intermediate size I")->required();
               s.add_option("--dtype", gw_.dtype, "bf16 or f16")->check(CLI::IsMember({"bf16", "f16"}))
                   ->capture_default_str();
               return [this](std::uint64_t seed) {
                 const GenArgs& g = gw_;
                 if (g.experts < 1) throw InputError(fmt::format("-E must be >= 1, got {}", g.experts));
                 if (g.hidden_size < 1) throw InputError(fmt::format("--hidden-size must be >= 1, got {}", g.hidden_size));
                 if (g.inter_size < 1) throw InputError(fmt::format("--inter-size must be >= 1, got {}", g.inter_size));
                 const double n = double(g.experts) * 2.0 * double(g.inter_size) * double(g.hidden_size) /
                                  (g.which == "w1" ? 1.0 : 2.0);
                 gen::check_size(n, "expert weights");
                 require_host_memory(2.0 * n, "the expert weights");
                 return weights_array(g.which == "w1" ? 0 : 1, g.experts, g.hidden_size, g.inter_size,
                                      *npy::parse_dtype(g.dtype), seed);
               };
             }}};
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  Given g_;
  GenArgs gh_, gw_;
};

// A weight file's header: a 3-D array of the hidden dtype.
npy::Info inspect_weights(const std::string& path, const npy::ReadOptions& ro, npy::DType dt, const char* what) {
  const std::string l = display_path(path);
  const npy::Info i = npy::inspect(path, ro);
  if (i.dtype != npy::DType::bf16 && i.dtype != npy::DType::f2)
    throw InputError(fmt::format("{}: {} must be bfloat16 or float16, got {} (bf16 saved as int16/uint16: add --dtype "
                                 "bf16)",
                                 l, what, npy::dtype_name(i.dtype)));
  if (i.dtype != dt)
    throw InputError(fmt::format("{}: {} are {}, the hidden states {}: weights and activations share one dtype", l,
                                 what, npy::dtype_name(i.dtype), npy::dtype_name(dt)));
  if (i.shape.size() != 3)
    throw InputError(fmt::format("{}: {} must be 3-D, got shape {}", l, what, npy::format_shape(i.shape)));
  return i;
}

std::unique_ptr<Job> ExpertsFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  const Preset* m = nullptr;
  for (const Preset& pr : kPresets)
    if (pr.name == a.model) m = &pr;
  const bool have_map = !a.map.empty();
  // Sizes: the options', then the files' (which must agree with an option
  // given), then --model's for what is still missing (0: none yet).
  std::int32_t E = given(g_.experts) ? a.experts : 0;
  std::int32_t K = given(g_.topk) ? a.topk : 0;
  std::int64_t H = given(g_.hidden_size) ? a.hidden_size : 0;
  std::int64_t I = given(g_.inter_size) ? a.inter_size : 0;
  const double scaling = given(g_.scaling) ? a.scaling : m != nullptr ? m->scaling : a.scaling;

  if (!std::isfinite(scaling) || !std::isfinite(static_cast<float>(scaling)))
    throw InputError(fmt::format("--routed-scaling-factor: {} is not a finite f32 number", scaling));
  if (given(g_.experts) && a.experts < 1) throw InputError(fmt::format("-E must be >= 1, got {}", a.experts));
  if (given(g_.topk) && a.topk < 1) throw InputError(fmt::format("--topk must be >= 1, got {}", a.topk));
  if (given(g_.hidden_size) && a.hidden_size < 1)
    throw InputError(fmt::format("--hidden-size must be >= 1, got {}", a.hidden_size));
  if (given(g_.inter_size) && a.inter_size < 1)
    throw InputError(fmt::format("--inter-size must be >= 1, got {}", a.inter_size));

  npy::ReadOptions ro;
  if (!a.dtype.empty()) ro.reinterpret = npy::parse_dtype(a.dtype);
  ExpertsJob::Host h;
  h.seed = c.seed;
  h.keep = a.keep_intermediate;
  std::int64_t T = -1;
  std::vector<std::string> generated;

  // Headers first: every size is known, and checked, before anything is read.
  npy::Info hi, ii, wi, w1i, w2i;
  const std::string hl = display_path(a.hidden), il = display_path(a.ids), wl = display_path(a.weights);
  const std::string w1l = display_path(a.w1), w2l = display_path(a.w2), ml = display_path(a.map);
  npy::DType dt = *npy::parse_dtype(a.gen_dtype);
  if (!a.hidden.empty()) {
    hi = npy::inspect(a.hidden, ro);
    if (hi.dtype != npy::DType::bf16 && hi.dtype != npy::DType::f2)
      throw InputError(fmt::format("{}: hidden states must be bfloat16 or float16, got {} (bf16 saved as "
                                   "int16/uint16: add --dtype bf16)",
                                   hl, npy::dtype_name(hi.dtype)));
    if (hi.shape.size() != 2)
      throw InputError(fmt::format("{}: hidden states must be 2-D [T, H], got shape {}", hl, npy::format_shape(hi.shape)));
    if (hi.shape[1] < 1) throw InputError(fmt::format("{}: hidden states must have H >= 1, got shape {}", hl,
                                                      npy::format_shape(hi.shape)));
    dt = hi.dtype;
    T = hi.shape[0];
    H = hi.shape[1];
  }
  if (!a.w1.empty()) {
    w1i = inspect_weights(a.w1, ro, dt, "W1");
    w2i = inspect_weights(a.w2, ro, dt, "W2");
    const auto& s1 = w1i.shape;
    const auto& s2 = w2i.shape;
    if (s1[1] % 2 != 0 || s1[1] < 2)
      throw InputError(fmt::format("{}: W1 must be [E, 2I, H] (gate and up rows), got shape {}: {} rows per expert is "
                                   "not 2I",
                                   w1l, npy::format_shape(s1), s1[1]));
    if (H > 0 && s1[2] != H)
      throw InputError(fmt::format("{}: W1 rows have {} columns, but H is {} ({})", w1l, s1[2], H, hl));
    if (s1[0] < 1) throw InputError(fmt::format("{}: W1 has no experts (shape {})", w1l, npy::format_shape(s1)));
    if (E > 0 && s1[0] != E) throw InputError(fmt::format("{}: W1 holds {} experts, but -E is {}", w1l, s1[0], E));
    const std::vector<std::int64_t> want2{s1[0], s1[2], s1[1] / 2};
    if (s2 != want2)
      throw InputError(fmt::format("{}: W2 must be [E, H, I] = {} to match {} {}, got {}", w2l,
                                   npy::format_shape(want2), w1l, npy::format_shape(s1), npy::format_shape(s2)));
    E = narrow_to_int32(s1[0], w1l + ": E");
    H = s1[2];
    I = s1[1] / 2;
  }
  if (!a.ids.empty()) {
    ii = npy::inspect(a.ids);
    wi = npy::inspect(a.weights);
    if ((ii.dtype != npy::DType::i4 && ii.dtype != npy::DType::i8) || ii.shape.size() != 2)
      throw InputError(fmt::format("{}: expert ids must be int32 or int64 [T, K], got {} of shape {}", il,
                                   npy::dtype_name(ii.dtype), npy::format_shape(ii.shape)));
    if (ii.shape[1] < 1)
      throw InputError(fmt::format("{}: expert ids must have K >= 1 per token, got shape {}", il,
                                   npy::format_shape(ii.shape)));
    if (wi.dtype != npy::DType::f4 || wi.shape != ii.shape)
      throw InputError(fmt::format("{}: the weights must be float32 [{}, {}] (the shape of {}), got {} of shape {}", wl,
                                   ii.shape[0], ii.shape[1], il, npy::dtype_name(wi.dtype), npy::format_shape(wi.shape)));
    if (T >= 0 && ii.shape[0] != T)
      throw InputError(fmt::format("{}: {} tokens, but {} has {} rows", il, ii.shape[0], hl, T));
    const std::int32_t k = narrow_to_int32(ii.shape[1], il + ": K");
    if (K > 0 && k != K) throw InputError(fmt::format("{}: {} ids per token, but --topk is {}", il, k, K));
    K = k;
    T = ii.shape[0];
  }
  if (have_map) {
    const npy::Info mi = npy::inspect(a.map);
    if (mi.dtype != npy::DType::i4 || mi.shape.size() != 1 || mi.shape[0] < 1)
      throw InputError(fmt::format("{}: the expert map must be a non-empty 1-D int32 array, got {} of shape {}", ml,
                                   npy::dtype_name(mi.dtype), npy::format_shape(mi.shape)));
    if (mi.shape[0] > align::kMaxMapSize)
      throw InputError(fmt::format("{}: the expert map has {} entries, more than {}", ml, mi.shape[0],
                                   align::kMaxMapSize));
    const npy::Array map = npy::read(a.map);
    h.map.assign(map.as<std::int32_t>().begin(), map.as<std::int32_t>().end());
    const std::int32_t top = *std::max_element(h.map.begin(), h.map.end());
    if (E <= 0) E = std::max(top + 1, 1);
    for (std::size_t i = 0; i < h.map.size(); ++i)
      if (h.map[i] < -1 || h.map[i] >= E)
        throw InputError(fmt::format("{}: entry {} maps to {}, outside [-1, {}) (E, the local expert count: {})", ml, i,
                                     h.map[i], E, !a.w1.empty() ? w1l + "'s" : given(g_.experts) ? "-E" : "?"));
  }

  // --model fills in what neither the options nor the files gave (with a
  // map, E is the local count: never the model's global one).
  if (m != nullptr) {
    if (E < 1 && !have_map) E = m->experts;
    if (K < 1) K = m->topk;
    if (H < 1) H = m->hidden;
    if (I < 1) I = m->inter;
  }
  if (T < 0) {
    if (a.tokens < 0)
      throw InputError("experts: give --hidden FILE and/or --topk-ids FILE --topk-weights FILE, or --tokens N to "
                       "generate the inputs");
    T = a.tokens;
  }
  if (E < 1) throw InputError("experts: the expert count is missing: give -E, --w1 or --model");
  if (K < 1) throw InputError("experts: K is missing: give --topk, --topk-ids or --model");
  if (H < 1) throw InputError("experts: H is missing: give --hidden-size, --hidden, --w1 or --model");
  if (I < 1) throw InputError("experts: I is missing: give --inter-size, --w1 or --model");
  const std::int64_t id_bound = have_map ? std::int64_t(h.map.size()) : E;
  if (a.ids.empty() && K > id_bound)
    throw InputError(fmt::format("--topk {} is more than the {} experts the generated ids draw from (distinct per "
                                 "token)",
                                 K, id_bound));
  // The files whose headers gave the sizes: a refusal of the sizes names them
  // (a tiny file whose header claims gigabytes).
  std::string sized_by;
  for (const auto& [path, l, info] : {std::tuple{&a.hidden, &hl, &hi}, std::tuple{&a.ids, &il, &ii},
                                      std::tuple{&a.w1, &w1l, &w1i}, std::tuple{&a.w2, &w2l, &w2i}})
    if (!path->empty())
      sized_by += fmt::format("{}{} {}", sized_by.empty() ? "" : ", ", *l, npy::format_shape(info->shape));
  const auto sized = [&](auto&& f) { return sized_from(sized_by, f); };
  sized([&] {
    gen::check_size(double(T) * double(H), "hidden rows");
    gen::check_size(double(T) * double(K), "expert ids");
  });

  const experts::DType edt = dt == npy::DType::bf16 ? experts::DType::bf16 : experts::DType::f16;
  const experts::Act act = experts::act_named(a.act);
  const experts::W1Layout w1_layout = experts::w1_layout_named(a.w1_layout);
  const permute::Layout layout = a.layout == "padded" ? permute::Layout::padded : permute::Layout::compact;
  const experts::Problem p = sized([&] {
    return planned([&] {
      return experts::make_problem(T, K, E, H, I, edt, act, w1_layout, layout, a.block_size,
                                   static_cast<float>(scaling), have_map ? std::int32_t(h.map.size()) : 0);
    });
  });

  // A CPU run (--device cpu, or auto without a device: decide_gpu's rule) is
  // the reference of every token.
  h.cpu = c.device == "cpu" || (c.device == "auto" && cuda_device_count() == 0);
  const double macs = double(T) * double(K) * 3.0 * double(I) * double(H);
  sized([&] {
    if (h.cpu && macs > kCpuMacs)
      throw InputError(fmt::format("a CPU run computes every token: T * K * 3 * I * H = {:.3g} multiply-adds is over "
                                   "{:g}; run on a GPU (--device gpu) or with fewer --tokens",
                                   macs, kCpuMacs));
  });

  // Host memory at once: the inputs (hidden, ids and weights as read and as
  // kept, the given weights), the reference on the tokens it computes (out
  // with its exact value and bound, y with its bound: 18 bytes an element
  // of out, 10 of y, plus 8 of a working copy of y's bound), the run's out,
  // the output set's copy and the written file read back; with
  // --keep-intermediate y over the layout's rows twice, and the CPU layout's
  // permuted copy of the rows; generated weights: the reference's one
  // expert's W1 and W2 (2I x H and H x I, 2 bytes an element).
  const double slots = double(T) * double(K), rowsH = double(T) * double(H);
  const double ref_tokens = h.cpu ? double(T) : std::min(double(T), std::max(1.0, kCheckMacs / (macs / std::max(1.0, double(T)))));
  const double w_bytes =
      a.w1.empty() ? 6.0 * double(I) * double(H) : 2.0 * double(p.w1_elements() + p.w2_elements());
  const double cap = double(p.rows()) * double(H) * 2.0;
  sized([&] {
    require_host_memory(rowsH * 2.0 + 24.0 * slots + w_bytes + ref_tokens * double(H) * (18.0 + 18.0 * double(K)) +
                            3.0 * rowsH * 2.0 + (h.keep ? 3.0 * cap : 0.0),
                        "this experts run");
  });

  // Read or generate.
  if (!a.hidden.empty()) {
    h.hidden = npy::read(a.hidden, ro);
    if (const auto i = npy::first_non_finite(h.hidden))
      throw InputError(fmt::format("{}: hidden[{}, {}] is {}: rows must be finite", hl, *i / std::size_t(H),
                                   *i % std::size_t(H), npy::float_at(h.hidden, *i)));
  } else {
    h.hidden = gen::normal_rows(T, H, dt, c.seed, "hidden rows");
    generated.push_back(fmt::format("hidden {} x {} {}", T, H, a.gen_dtype));
  }
  std::int64_t dropped = 0;
  if (!a.ids.empty()) {
    const npy::Array ids = npy::read(a.ids), w = npy::read(a.weights);
    h.ids.resize(std::size_t(ids.numel()));
    for (std::size_t i = 0; i < h.ids.size(); ++i) {
      const std::int64_t v = ids.dtype == npy::DType::i4 ? ids.as<std::int32_t>()[i] : ids.as<std::int64_t>()[i];
      // As given (the kernels drop what is outside [0, id_bound)), except
      // int64 ids beyond int32, which become -1 rather than wrap.
      h.ids[i] = v < INT32_MIN || v > INT32_MAX ? -1 : static_cast<std::int32_t>(v);
    }
    h.weights.assign(w.as<float>().begin(), w.as<float>().end());
    for (std::size_t i = 0; i < h.weights.size(); ++i)
      if (!std::isfinite(h.weights[i]))
        throw InputError(fmt::format("{}: weight [{}, {}] is {}: weights must be finite", wl, i / std::size_t(K),
                                     i % std::size_t(K), h.weights[i]));
  } else {
    const npy::Array ids = gen::align_ids(T, K, narrow_to_int32(id_bound, "the generated ids' expert count"),
                                          gen::ExpertDist{}, c.seed, false);
    h.ids.assign(ids.as<std::int32_t>().begin(), ids.as<std::int32_t>().end());
    const npy::Array w = gen::topk_weights(T, K, c.seed);
    h.weights.assign(w.as<float>().begin(), w.as<float>().end());
    generated.push_back(fmt::format("ids {} x {} (uniform over {} experts, distinct per token) and their weights", T, K,
                                    id_bound));
  }
  if (!a.w1.empty()) {
    h.w1 = npy::read(a.w1, ro);
    h.w2 = npy::read(a.w2, ro);
    for (const auto& [arr, l] : {std::pair{&h.w1, &w1l}, std::pair{&h.w2, &w2l}})
      if (const auto i = npy::first_non_finite(*arr))
        throw InputError(fmt::format("{}: element {} is {}: weights must be finite", *l, *i, npy::float_at(*arr, *i)));
  } else {
    generated.push_back(fmt::format("W1 and W2 of {} experts (`moekit gen experts-weights` writes the same)", E));
  }

  // Kept slots and the experts they use (the traffic of bytes_moved); what
  // align drops (-1 or out-of-range ids, experts the map puts elsewhere).
  {
    experts::Inputs view;
    view.expert_map = h.map;
    std::vector<char> used(std::size_t(E), 0);
    for (const std::int32_t id : h.ids) {
      const std::int32_t e = experts::local_expert(p, view, id);
      if (e < 0) {
        ++dropped;
        continue;
      }
      ++h.kept;
      if (!used[std::size_t(e)]) used[std::size_t(e)] = 1, ++h.active;
    }
  }

  if (!generated.empty()) {
    std::string what;
    for (const auto& g : generated) what += (what.empty() ? "" : ", ") + g;
    r.notes.push_back(fmt::format("generated {} (seed {})", what, c.seed));
  }
  if (dropped > 0)
    r.notes.push_back(fmt::format("{} of {} slots dropped (id -1 or outside [0, {}){}): they contribute nothing",
                                  dropped, T * K, id_bound, have_map ? ", or mapped to -1" : ""));

  auto opt_if = [&](bool on, std::string v) { return on ? std::optional<std::string>(std::move(v)) : std::nullopt; };
  r.params = {{"tokens", std::to_string(T)},
              {"experts", std::to_string(E)},
              {"topk", std::to_string(K)},
              {"hidden", std::to_string(H)},
              {"inter", std::to_string(I)},
              {"act", a.act},
              {"w1_layout", a.w1_layout},
              {"layout", a.layout},
              {"block_size", std::to_string(layout == permute::Layout::padded ? a.block_size : 1)},
              {"scaling", fmt::format("{:g}", p.combine.scaling)},
              {"expert_map", opt_if(have_map, std::to_string(h.map.size()))},
              {"weights", a.w1.empty() ? "generated" : "files"},
              {"model", opt_if(m != nullptr, a.model)}};
  r.dtype = std::string(npy::dtype_name(dt));
  return std::make_unique<ExpertsJob>(std::move(h), p, r);
}

}  // namespace

std::unique_ptr<Family> make_experts_family() { return std::make_unique<ExpertsFamily>(); }

}  // namespace moekit
