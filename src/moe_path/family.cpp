// `moekit moe-path`: route (given logits) or given ids and weights -> permute
// -> the experts (identity, or the expert FFN with given or generated weights)
// -> combine, as one launch sequence (docs/moe-path.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>

#include "rows_gen_cli.hpp"
#include "align/align.hpp"
#include "cuda_util.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
#include "planned.hpp"
#include "sizes.hpp"
#include "moe_path/buffers.hpp"
#include "moe_path/moe_path.hpp"
#include "experts/weight_files.hpp"
#include "moe_path/reference.hpp"
#include "permute/reference.hpp"
#include "route/gen.hpp"

namespace moekit {
namespace {

// Model shapes (their Hugging Face configs): what --model fills in where the
// command line leaves an option out.
struct Preset {
  std::string_view name;
  std::int32_t experts, topk;
  std::int64_t hidden, inter;  // inter: the expert FFN's I (--experts ffn)
  std::int32_t groups, topk_groups;
  route::Scoring scoring;
  bool bias;  // a correction bias (generated unless --correction-bias FILE)
  bool renormalize;
  double scaling;
};
constexpr std::array<Preset, 4> kPresets = {{
    {"deepseek-v3", 256, 8, 7168, 2048, 8, 4, route::Scoring::sigmoid, true, true, 2.5},
    // DeepSeek-V3's experts sharded over 8 GPUs by tensor parallelism: I = 2048 / 8.
    {"deepseek-v3-tp8", 256, 8, 7168, 256, 8, 4, route::Scoring::sigmoid, true, true, 2.5},
    {"qwen3-235b", 128, 8, 4096, 1536, 1, 1, route::Scoring::softmax, false, true, 1.0},
    {"mixtral", 8, 2, 4096, 14336, 1, 1, route::Scoring::softmax, false, true, 1.0},
}};

// The CPU reference of --experts ffn computes every token's FFN (twice: the
// reference, then its timing): runs over this many multiply-adds are refused
// on the CPU (ffn_reference_macs), seconds on a few cores below it.
constexpr double kCpuFfnMacs = 1e10;

struct Args {
  std::string logits, bias, ids, weights, hidden, dtype, model, w1, w2;
  std::string expert_kind = "identity", act = "silu", w1_layout = "gate-up";
  std::int64_t inter = 0;
  std::int64_t tokens = -1, hidden_size = 4096;
  std::int32_t experts = 0, topk = 0, block_size = 64, groups = 1, topk_groups = 0;
  std::string scoring = "softmax", layout = "padded", dist = "uniform", gen_dtype = "bf16";
  bool renormalize = false, no_renormalize = false;
  double scaling = 1.0;
};

// The options --model may fill in: given on the command line or not.
struct Given {
  CLI::Option *experts = nullptr, *topk = nullptr, *hidden_size = nullptr, *groups = nullptr,
              *topk_groups = nullptr, *scoring = nullptr, *renormalize = nullptr, *no_renormalize = nullptr,
              *scaling = nullptr, *inter = nullptr, *act = nullptr, *w1_layout = nullptr, *w1 = nullptr;
};
bool given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

class PathJob final : public ProblemJob<moe_path::Problem> {
 public:
  struct Host {
    npy::Array hidden, logits;          // logits: routed only
    std::vector<float> wide_logits, bias;
    std::vector<std::int32_t> ids;      // not routed
    std::vector<float> weights;         // not routed
    npy::Array w1, w2;                  // ffn: given weights (empty: generated from seed)
    std::uint64_t seed = 0;             // ffn: generated weights, the check's sample of tokens
    bool cpu_run = false;               // ffn: the reference computes every token's FFN
  };

  PathJob(Host h, moe_path::Problem p, Report& r) : ProblemJob(p), h_(std::move(h)), report_(&r) {
    in_.logits = p_.routed ? h_.wide_logits.data() : nullptr;
    in_.bias = h_.bias.empty() ? nullptr : h_.bias.data();
    in_.hidden = h_.hidden.data.data();
    in_.ids = h_.ids;
    in_.weights = h_.weights;
    in_.w.generated = h_.w1.data.empty();
    in_.w.seed = h_.seed;
    in_.w.w1 = bits16(h_.w1);
    in_.w.w2 = bits16(h_.w2);
    in_.sample_seed = h_.seed;
  }

  // A GPU run's reference leaves the FFN out: check() recomputes it on a
  // sample of tokens with the run's own ids and weights.
  void reference() override { ref_ = moe_path::reference(p_, in_, h_.cpu_run); }
  void adopt_reference() override { got_ = ref_; }

  // pdl goes to every stage (moe_path::launch_stage).
  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    auto rv = var_.resolve("moe-path", requested, p_, caps, pdl, moe_path::registry());
    if (caps.present()) {
      std::string picks;
      for (moe_path::Stage s : moe_path::stages(p_)) {
        picks += fmt::format("{}{} {}", picks.empty() ? "" : ", ", moe_path::stage_name(s),
                             moe_path::stage_variant(p_, s, caps));
        if (s == moe_path::Stage::permute)
          picks += fmt::format(" (align {})", align::registry().pick_auto(p_.permute.align, caps, pdl).info.name);
      }
      report_->notes.push_back("stages: " + picks);
    }
    return rv;
  }

  std::size_t input_bytes() const override { return h_.hidden.data.size() + h_.logits.data.size(); }

  void upload(int copies) override {
    d_.emplace(p_, moe_path::HostInputs{h_.logits.data, h_.bias, h_.hidden.data, h_.ids, h_.weights},
               var_.workspace_need(p_), SetOptions::run(copies),
               moe_path::HostWeights{h_.w1.data, h_.w2.data, h_.seed});
  }

  LaunchStatus launch(Stream s, bool pdl, int copy) override { return var_.v->launch(p_, d_->buffers(copy), s, pdl); }

  std::vector<Stage> stages() override {
    std::vector<Stage> v;
    for (moe_path::Stage st : moe_path::stages(p_))
      v.push_back({std::string(moe_path::stage_name(st)),
                   [this, st](Stream s, bool pdl, int copy) {
                     return moe_path::launch_stage(p_, d_->buffers(copy), st, s, pdl);
                   }});
    return v;
  }

  void download() override { (void)d_->download(got_); }  // a count out of range: check() names it

  double bytes_moved() const override {
    std::int64_t active = 0;  // experts with a row: each one's weights read once
    if (p_.ffn) {
      std::vector<bool> used(std::size_t(p_.experts.experts), false);
      for (const std::int32_t e : got_.routed.ids)
        if (e >= 0 && e < p_.experts.experts && !used[std::size_t(e)]) {
          used[std::size_t(e)] = true;
          ++active;
        }
    }
    return moe_path::bytes_moved(p_, h_.logits.data.size(), h_.bias.size(), active, got_.slot_rows);
  }

  CheckResult check(bool) override { return check_against(got_, true); }

  std::vector<NamedArray> outputs() override {
    const std::vector<std::int64_t> shape{p_.permute.tokens, p_.permute.topk};
    std::vector<NamedArray> o;
    if (p_.routed) {
      o.push_back({"topk_ids.npy", make_array(npy::DType::i4, shape, got_.routed.ids)});
      o.push_back({"topk_weights.npy", make_array(npy::DType::f4, shape, got_.routed.weights)});
    }
    npy::Array out;
    out.dtype = h_.hidden.dtype;
    out.shape = {p_.combine.tokens, p_.combine.hidden};
    out.data = got_.out;
    o.push_back({"out.npy", std::move(out)});
    return o;
  }

  std::vector<std::pair<std::string, std::string>> summary() const override {
    // rows: the layout's (num_tokens_post_pad), or the kept slots where the FFN listed them itself
    const std::int64_t rows =
        got_.slot_rows ? std::count_if(got_.permuted.inverse.begin(), got_.permuted.inverse.end(),
                                       [](std::int32_t r) { return r >= 0; })
                       : std::int64_t(got_.permuted.aligned.num_tokens_post_pad);
    std::vector<std::pair<std::string, std::string>> s{{"slots", std::to_string(p_.permute.align.numel)},
                                                       {"rows", std::to_string(rows)}};
    if (near_ties_ >= 0) s.push_back({"near_tie_rows", std::to_string(near_ties_)});
    return s;
  }

  CheckResult check_files(const std::vector<std::string>& paths) override {
    moe_path::Outputs back = ref_;
    if (p_.routed) {
      const npy::Array ids = npy::read(paths[0]), w = npy::read(paths[1]);
      back.routed.ids.assign(ids.as<std::int32_t>().begin(), ids.as<std::int32_t>().end());
      back.routed.weights.assign(w.as<float>().begin(), w.as<float>().end());
    }
    const npy::Array out = npy::read(paths.back());
    back.out = out.data;
    return check_against(back, false);
  }

 private:
  // got against the path's semantics (moe_path::check); `say_what` adds the note
  // naming what was checked (GPU runs: the CPU runs' note is the skeleton's).
  CheckResult check_against(const moe_path::Outputs& got, bool say_what) {
    const moe_path::CheckReport rep = moe_path::check(p_, in_, ref_, got);
    near_ties_ = p_.routed ? rep.near_tie_rows : -1;
    if (rep.near_tie_rows > 0)
      report_->notes.push_back(fmt::format(
          "route stage: {} row(s) with a near-tie (selection values within {:g} relative; first: token {}): any "
          "selection the tolerance allows passes there",
          rep.near_tie_rows, route::kTieRel, rep.first_near_tie_row));
    if (rep.result.ok && say_what && !p_.ffn)
      report_->notes.push_back(
          std::string(p_.routed ? "checked: route against its reference, " : "checked: ") +
          "permute's rules, combine bit for bit on the run's own rows and weights, and out = S * (sum_j w) * hidden "
          "(max error below)");
    if (rep.result.ok && say_what && p_.ffn)
      report_->notes.push_back(fmt::format(
          "{}{}, combine bit for bit on the run's own y rows and weights, and the FFN's y of {} of {} "
          "token(s) (a seeded sample within {:g} multiply-adds) against the experts reference with the run's ids "
          "(max error below, in units of the derived bound)",
          p_.routed ? "checked: route against its reference, " : "checked: ",
          got.slot_rows ? "the slot rows' inverse map (the FFN listed the slots itself)" : "permute's rules",
          rep.ffn_tokens, p_.experts.tokens,
          moe_path::kFfnCheckMacs));
    return rep.result;
  }

  // A given weight file's elements as the dtype's bits (empty: generated).
  static std::span<const std::uint16_t> bits16(const npy::Array& a) {
    return {reinterpret_cast<const std::uint16_t*>(a.data.data()), a.data.size() / 2};
  }

  Host h_;
  moe_path::Inputs in_;
  Report* report_;
  moe_path::Outputs ref_, got_;
  std::int64_t near_ties_ = -1;
  ResolvedVariant<moe_path::Variant> var_;
  std::optional<moe_path::DeviceBuffers> d_;
};

class PathFamily final : public RegistryFamily<moe_path::Registry> {
 public:
  PathFamily()
      : RegistryFamily(
            {.command = "moe-path",
             .summary = "the MoE layer: route (given logits) -> permute -> the experts (identity, or --experts ffn: "
                 "the expert FFN) -> combine, as one CUDA graph; times the whole path and each stage",
             .outputs_help = "Outputs: out.npy [T, H] (the hidden dtype); with routing also topk_ids.npy int32 [T, K] and "
                 "topk_weights.npy float32 [T, K] (the weights before S: combine applies S).",
             .examples = {"moe-path --model deepseek-v3 --tokens 1,16,256,4096 --layout compact --pdl off --bench",
                          "moe-path --model deepseek-v3-tp8 --experts ffn --tokens 1 --bench"}},
            moe_path::registry()) {}

  void add_options(CLI::App& s) override {
    auto* lg = s.add_option("--logits", a_.logits, "router logits [T, E], f32, bf16 or f16 (.npy): the path routes");
    auto* ids = s.add_option("--topk-ids", a_.ids, "instead of routing: expert ids [T, K], int32 or int64 (.npy)");
    auto* w = s.add_option("--topk-weights", a_.weights, "with --topk-ids: weights [T, K], float32 (.npy)");
    ids->needs(w)->excludes(lg);
    w->needs(ids)->excludes(lg);
    auto* hid = s.add_option("--hidden", a_.hidden, "hidden states [T, H], f32, bf16 or f16 (.npy); default: generated");
    s.add_option("--dtype", a_.dtype, "read 2-byte --hidden/--logits data saved as int16/uint16/void as this dtype")
        ->check(CLI::IsMember({"bf16", "f16"}));
    s.add_option("--model", a_.model,
                 "fill in the shape and router of a model where not given: deepseek-v3 (E 256, K 8, H 7168, I 2048, "
                 "groups 8/4, sigmoid, generated bias, renormalize, S 2.5), deepseek-v3-tp8 (the same, I 256: its "
                 "experts over 8 GPUs), qwen3-235b (E 128, K 8, H 4096, I 1536, softmax, renormalize), mixtral (E 8, "
                 "K 2, H 4096, I 14336, softmax, renormalize); I is used by --experts ffn")
        ->check(CLI::IsMember({"deepseek-v3", "deepseek-v3-tp8", "qwen3-235b", "mixtral"}));
    g_.experts = s.add_option("-E,--num-experts", a_.experts, "experts E (with --logits: must match it)");
    g_.topk = s.add_option("-k,--topk", a_.topk, "experts per token K (routing; with --topk-ids: must match it)");
    s.add_option("-B,--block-size", a_.block_size, "padded layout: align's block size B")->capture_default_str();
    s.add_option("--layout", a_.layout, "permute's layout: padded (align's rows) or compact (real rows only)")
        ->check(CLI::IsMember({"padded", "compact"}))
        ->capture_default_str();
    g_.scoring = s.add_option("--scoring", a_.scoring, "routing: softmax over the row, or sigmoid per logit")
                     ->check(CLI::IsMember({"softmax", "sigmoid"}))
                     ->capture_default_str();
    s.add_option("--correction-bias", a_.bias, "routing: [E] f32 added to the scores for selection")->excludes(ids);
    g_.groups = s.add_option("--num-groups", a_.groups, "routing: expert groups G (divides E)")->capture_default_str();
    g_.topk_groups = s.add_option("--topk-groups", a_.topk_groups, "routing: groups kept KG (default: all G)");
    g_.renormalize = s.add_flag("--renormalize", a_.renormalize, "routing: divide the weights by their sum");
    g_.no_renormalize = s.add_flag("--no-renormalize", a_.no_renormalize, "routing: do not, whatever --model says")
                            ->excludes(g_.renormalize);
    g_.scaling = s.add_option("--routed-scaling-factor", a_.scaling, "S: combine multiplies the weighted sum by it")
                     ->capture_default_str();
    // Routing options make no sense with given ids (--model's are simply not used there).
    for (auto* o : {g_.scoring, g_.groups, g_.topk_groups, g_.renormalize, g_.no_renormalize}) o->excludes(ids);
    auto* tok = s.add_option("--tokens", a_.tokens, "without input files: generate this many tokens");
    for (auto* f : {lg, ids, hid}) tok->excludes(f);
    g_.hidden_size = s.add_option("--hidden-size", a_.hidden_size, "without --hidden: H of the generated rows")
                         ->capture_default_str()
                         ->excludes(hid);
    s.add_option("--dist", a_.dist, "generated logits: uniform or load:FILE[:LAYER]")
        ->capture_default_str()
        ->excludes(lg)
        ->excludes(ids);
    s.add_option("--gen-dtype", a_.gen_dtype, "generated hidden rows: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str()
        ->excludes(hid);
    // The experts (docs/moe-path.md "The expert FFN"); the FFN options need --experts ffn (checked in prepare).
    s.add_option("--experts", a_.expert_kind,
                 "the experts between permute and combine: identity (combine reads the permuted rows) or ffn (the "
                 "expert FFN of `moekit experts`, its auto pick: y = act(gate(h)) * up(h) . W2[e]^T, h = x . W1[e]^T)")
        ->check(CLI::IsMember({"identity", "ffn"}))
        ->capture_default_str();
    g_.inter = s.add_option("--inter-size", a_.inter, "--experts ffn without --w1: the intermediate size I "
                                                      "(default: --model's)");
    g_.act = s.add_option("--act", a_.act, "--experts ffn: act(gate) * up: silu, gelu, gelu-tanh or swiglu-oai "
                                           "(gpt-oss: clamped, interleaved W1)")
                 ->check(CLI::IsMember({"silu", "gelu", "gelu-tanh", "swiglu-oai"}))
                 ->capture_default_str();
    g_.w1_layout = s.add_option("--w1-layout", a_.w1_layout,
                                "--experts ffn: W1's rows: gate-up (gate rows 0..I-1, then up rows) or interleaved "
                                "(gate i at 2i, up i at 2i+1)")
                       ->check(CLI::IsMember({"gate-up", "interleaved"}))
                       ->capture_default_str();
    g_.w1 = s.add_option("--w1", a_.w1, "--experts ffn: W1 [E, 2I, H] in the hidden dtype (.npy; default: generated "
                                        "on the device from --seed)");
    auto* w2 = s.add_option("--w2", a_.w2, "--experts ffn: with --w1: W2 [E, H, I] in the hidden dtype (.npy)");
    g_.w1->needs(w2);
    w2->needs(g_.w1);
    g_.inter->excludes(g_.w1);  // I is W1's (as `moekit experts` reads them)
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    return gen::add_hidden_rows_gen(s, gen_,
                                    "hidden states [tokens, H], standard normal (logits: `moekit gen route`; a bias: "
                                    "`moekit gen route --bias`; ids and weights: `moekit gen align`, `moekit gen "
                                    "topk-weights`)");
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  Given g_;
  gen::HiddenRowsGen gen_;
};

// Ids [T, K] (int32 or int64, each in [0, E)) and weights [T, K] (f32, finite).
void read_ids_and_weights(const Args& a, std::int32_t experts, PathJob::Host& h, std::int64_t& T, std::int32_t& K) {
  const std::string il = display_path(a.ids), wl = display_path(a.weights);
  const npy::Array ids = npy::read(a.ids), w = npy::read(a.weights);
  if ((ids.dtype != npy::DType::i4 && ids.dtype != npy::DType::i8) || ids.shape.size() != 2)
    throw InputError(fmt::format("{}: expert ids must be int32 or int64 [T, K], got {} {}", il,
                                 npy::dtype_name(ids.dtype), npy::format_shape(ids.shape)));
  if (w.dtype != npy::DType::f4 || w.shape != ids.shape)
    throw InputError(fmt::format("{}: the weights must be float32 [{}, {}] (the shape of {})", wl, ids.shape[0],
                                 ids.shape[1], il));
  T = ids.shape[0];
  K = narrow_to_int32(ids.shape[1], il + ": K (the expert ids' last dimension)");
  h.ids.resize(std::size_t(ids.numel()));
  for (std::size_t i = 0; i < h.ids.size(); ++i) {
    const std::int64_t v = ids.dtype == npy::DType::i4 ? ids.as<std::int32_t>()[i] : ids.as<std::int64_t>()[i];
    if (v < 0 || v >= experts)
      throw InputError(fmt::format("{}: expert id at [{}, {}] is {}, outside [0, {})", il, i / K, i % K, v, experts));
    h.ids[i] = static_cast<std::int32_t>(v);
  }
  const auto wv = w.as<float>();
  h.weights.assign(wv.begin(), wv.end());
  for (std::size_t i = 0; i < h.weights.size(); ++i)
    if (!std::isfinite(h.weights[i]))
      throw InputError(fmt::format("{}: weight [{}, {}] is {}: weights must be finite", wl, i / K, i % K, h.weights[i]));
}

std::unique_ptr<Job> PathFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  // --model fills in what the command line leaves out.
  const Preset* m = nullptr;
  for (const Preset& pr : kPresets)
    if (pr.name == a.model) m = &pr;
  auto from_model = [&](const CLI::Option* o) { return m != nullptr && !given(o); };
  const std::int32_t E0 = from_model(g_.experts) ? m->experts : a.experts;
  const std::int32_t K0 = from_model(g_.topk) ? m->topk : a.topk;
  const std::int64_t H0 = from_model(g_.hidden_size) ? m->hidden : a.hidden_size;
  const std::int32_t G = from_model(g_.groups) ? m->groups : a.groups;
  const std::int32_t KG0 = from_model(g_.topk_groups) ? m->topk_groups : a.topk_groups;
  const route::Scoring scoring = from_model(g_.scoring) ? m->scoring
                                 : a.scoring == "sigmoid" ? route::Scoring::sigmoid
                                                          : route::Scoring::softmax;
  const bool renormalize = given(g_.no_renormalize) ? false
                           : given(g_.renormalize)  ? true
                           : m != nullptr           ? m->renormalize
                                                    : false;
  const double scaling = from_model(g_.scaling) ? m->scaling : a.scaling;
  const bool gen_bias = m != nullptr && m->bias && a.bias.empty();
  const std::string e_what = from_model(g_.experts) ? fmt::format("--model {}'s E", a.model) : std::string("-E");

  if (!std::isfinite(scaling) || !std::isfinite(static_cast<float>(scaling)))
    throw InputError(fmt::format("--routed-scaling-factor: {} is not a finite f32 number", scaling));
  const permute::Layout layout = a.layout == "compact" ? permute::Layout::compact : permute::Layout::padded;
  const bool routed = a.ids.empty();
  // The FFN's options with identity experts would be silently unused: refused.
  const bool ffn = a.expert_kind == "ffn";
  if (!ffn)
    for (const CLI::Option* o : {g_.inter, g_.act, g_.w1_layout, g_.w1})
      if (given(o))
        throw InputError(fmt::format("{} applies to the expert FFN: add --experts ffn (the experts are identity)",
                                     o->get_name()));

  PathJob::Host h;
  std::int64_t T = -1;
  std::int32_t E = E0, K = K0;
  std::vector<std::string> generated;
  // Routing input, or ids and weights.
  if (!a.logits.empty()) {
    h.logits = gen::read_logits(a.logits, a.dtype, E0, e_what);
    T = h.logits.shape[0];
    E = static_cast<std::int32_t>(h.logits.shape[1]);
  } else if (!routed) {
    if (E < 1 || E > align::kMaxExperts)
      throw InputError(fmt::format("--num-experts must be in [1, {}] (or give --model)", align::kMaxExperts));
    std::int32_t k = 0;
    read_ids_and_weights(a, E, h, T, k);
    if (given(g_.topk) && a.topk != k)
      throw InputError(fmt::format("{}: {} ids per token, but --topk is {}", display_path(a.ids), k, a.topk));
    K = k;
  }
  // Hidden rows: T from them when no other file gave it.
  npy::Array hidden;
  if (!a.hidden.empty()) {
    const std::string hl = display_path(a.hidden);
    npy::ReadOptions ro;
    if (!a.dtype.empty()) ro.reinterpret = npy::parse_dtype(a.dtype);
    hidden = npy::read(a.hidden, ro);
    if (hidden.dtype != npy::DType::f4 && hidden.dtype != npy::DType::bf16 && hidden.dtype != npy::DType::f2)
      throw InputError(fmt::format("{}: hidden states must be float32, bfloat16 or float16, got {} (bf16 saved as "
                                   "int16/uint16/void: add --dtype bf16)",
                                   hl, npy::dtype_name(hidden.dtype)));
    if (hidden.shape.size() != 2)
      throw InputError(fmt::format("{}: hidden states must be 2-D [T, H], got {} dimension(s)", hl, hidden.shape.size()));
    if (T >= 0 && hidden.shape[0] != T)
      throw InputError(fmt::format("{}: {} rows, but the {} have {} tokens", hl, hidden.shape[0],
                                   routed ? "logits" : "expert ids", T));
    // NaN payloads are not reproducible bit for bit, and S * sum(w) * NaN checks nothing.
    if (const auto i = npy::first_non_finite(hidden))
      throw InputError(fmt::format("{}: hidden[{}, {}] is {}: rows must be finite", hl, *i / hidden.shape[1],
                                   *i % hidden.shape[1], npy::float_at(hidden, *i)));
    T = hidden.shape[0];
  }
  if (T < 0) {
    if (a.tokens < 0)
      throw InputError("moe-path: give --logits FILE or --topk-ids FILE --topk-weights FILE (and --hidden FILE), or "
                       "--tokens N to generate the inputs");
    T = a.tokens;
  }
  const std::int64_t H = hidden.shape.empty() ? H0 : hidden.shape[1];
  if (hidden.shape.empty() && H < 1) throw InputError(fmt::format("--hidden-size must be >= 1, got {}", H));
  const npy::DType hdt = hidden.shape.empty() ? *npy::parse_dtype(a.gen_dtype) : hidden.dtype;

  gen::check_size(double(T) * double(H), "hidden rows");
  if (routed) gen::check_size(double(T) * double(E), "router logits");

  // The expert FFN: bf16 or f16 rows, I from --inter-size, --w1 or --model;
  // given weights checked from their headers before anything is read.
  std::optional<moe_path::FfnArgs> ffn_args;
  // The weight files whose headers gave I (and the sizes it drives): a
  // refusal of those sizes names them (a tiny file whose header claims gigabytes).
  std::string sized_by;
  const auto sized = [&](auto&& f) { return sized_from(sized_by, f); };
  npy::ReadOptions wro;
  if (!a.dtype.empty()) wro.reinterpret = npy::parse_dtype(a.dtype);
  if (ffn) {
    if (hdt == npy::DType::f4)
      throw InputError(a.hidden.empty()
                           ? std::string("--experts ffn takes bf16 or f16 rows: --gen-dtype f32 is not one")
                           : fmt::format("{}: --experts ffn takes bf16 or f16 hidden states, got float32",
                                         display_path(a.hidden)));
    moe_path::FfnArgs f;
    f.inter = from_model(g_.inter) ? m->inter : a.inter;
    f.act = experts::act_named(a.act);
    f.w1_layout = experts::w1_layout_named(a.w1_layout);
    if (!a.w1.empty()) {
      const experts::WeightFiles wf = experts::inspect_weight_files(
          a.w1, a.w2, E, H, hdt, wro, " (bf16 saved as int16/uint16/void: add --dtype bf16)");
      f.inter = wf.inter;  // --inter-size excludes --w1
      sized_by = fmt::format("{} {}, {} {}", display_path(a.w1), npy::format_shape(wf.w1.shape), display_path(a.w2),
                             npy::format_shape(wf.w2.shape));
    }
    if (f.inter < 1)
      throw InputError(given(g_.inter) ? fmt::format("--inter-size must be >= 1, got {}", a.inter)
                                       : std::string("--experts ffn needs the intermediate size I: --inter-size I, "
                                                     "--model or --w1 FILE"));
    ffn_args = f;
  }

  route::Problem router;
  if (routed) {
    if (E < 1 || E > route::kMaxExperts)
      throw InputError(fmt::format("-E must be in [1, {}] with routing, got {} (or give --logits or --model)",
                                   route::kMaxExperts, E));
    if (K < 1) throw InputError("--topk K is needed to route (or give --model)");
    router.groups = G;
    router.topk_groups = KG0 > 0 ? KG0 : G;
    router.scoring = scoring;
    router.renormalize = renormalize;
    router.bias = !a.bias.empty() || gen_bias;
    const npy::DType ldt = a.logits.empty() ? npy::DType::f4 : h.logits.dtype;  // generated: f32
    router.dtype = ldt == npy::DType::f4 ? route::DType::f32
                   : ldt == npy::DType::bf16 ? route::DType::bf16 : route::DType::f16;
  }
  // Route's limits, then align's int32 limits, before anything T-long is made.
  const combine::DType cdt = hdt == npy::DType::f4 ? combine::DType::f32
                             : hdt == npy::DType::bf16 ? combine::DType::bf16 : combine::DType::f16;
  const moe_path::Problem p = sized([&] {
    return planned([&] {
      return moe_path::make_problem(T, K, E, H, cdt, layout, a.block_size, static_cast<float>(scaling),
                                    routed ? &router : nullptr, ffn_args ? &*ffn_args : nullptr);
    });
  });
  const std::int64_t row_bytes = p.permute.row_bytes;

  // Host memory at once: the hidden rows and the logits (as read and as f32);
  // the path's outputs three times (the reference, the run's own, and the
  // reference's copy the written files are checked in): permuted rows up to
  // their capacity with their sorted ids, the [T, H] output, ids, weights and
  // the inverse map; and two more [T, H] outputs (the output set's copy and
  // the file read back).
  // With the FFN: the given weights, y [rows, H] three times (the
  // reference's, the run's, the copy the written files are checked in), and
  // the experts reference's per-slot y and two bounds (18 bytes an element).
  const double hidden_bytes = double(T) * double(row_bytes);
  const double rows = double(p.permute.align.max_num_tokens_padded), slots = double(T) * K;
  const bool weights_given = ffn && !a.w1.empty();
  const double ffn_bytes = !ffn ? 0.0
                                : (weights_given ? 2.0 * double(p.experts.w1_elements() + p.experts.w2_elements()) : 0.0) +
                                      3.0 * rows * double(row_bytes) + slots * double(row_bytes) * 9.0;
  sized([&] {
    require_host_memory(hidden_bytes + (routed ? 8.0 * double(T) * E : 0.0) +
                            3.0 * (rows * (double(row_bytes) + 4.0) + hidden_bytes + 12.0 * slots) + 2.0 * hidden_bytes +
                            ffn_bytes,
                        "this moe-path run");
  });
  // The CPU reference computes every token's FFN; a GPU run checks a sample.
  h.cpu_run = ffn && (c.device == "cpu" || (c.device != "gpu" && cuda_device_count() == 0));
  if (ffn && h.cpu_run) {
    const double macs = moe_path::ffn_reference_macs(p, !weights_given);
    if (macs > kCpuFfnMacs)
      throw InputError(fmt::format(
          "--experts ffn on the CPU: the reference computes every token's FFN, {:.3g} multiply-adds (T K 3 I H{}), "
          "over the CPU limit of {:g}: use fewer tokens or smaller sizes, or a GPU",
          macs, weights_given ? "" : ", and each used expert's generated weights", kCpuFfnMacs));
  }
  h.seed = c.seed;
  if (weights_given) experts::read_weight_files(a.w1, a.w2, wro, h.w1, h.w2);

  if (routed && a.logits.empty()) {
    h.logits = gen::route_logits(T, E, npy::DType::f4, a.dist, c.seed);
    generated.push_back(fmt::format("logits {} x {} f32 ({})", T, E, printable(a.dist)));
  }
  if (routed) {
    h.wide_logits = gen::logits_as_f32(h.logits, a.logits.empty() ? std::string("generated logits")
                                                                   : display_path(a.logits));
    if (!a.bias.empty()) h.bias = gen::read_bias(a.bias, E);
    else if (gen_bias) {
      const npy::Array b = gen::route_bias(E, c.seed);
      h.bias.assign(b.as<float>().begin(), b.as<float>().end());
      generated.push_back(fmt::format("correction bias [{}]", E));
    }
  }
  if (hidden.shape.empty()) {
    hidden = gen::normal_rows(T, H, hdt, c.seed, "hidden rows");
    generated.push_back(fmt::format("hidden {} x {} {}", T, H, a.gen_dtype));
  }
  if (ffn && !weights_given)
    generated.push_back(fmt::format("expert weights W1 {} x {} x {} and W2 {} x {} x {} ({})", E, 2 * p.experts.inter,
                                    H, E, H, p.experts.inter,
                                    h.cpu_run ? "recomputed by the reference where it reads them"
                                              : "on the device"));
  h.hidden = std::move(hidden);
  if (!generated.empty()) {
    std::string what;
    for (const auto& g : generated) what += (what.empty() ? "" : ", ") + g;
    r.notes.push_back(fmt::format("generated {} (seed {})", what, c.seed));
  }
  if (routed && scaling != 1.0)
    r.notes.push_back("the routed scaling factor is applied once, by combine: topk_weights are the route's weights "
                      "before S");

  auto opt_if = [&](bool on, std::string v) { return on ? std::optional<std::string>(std::move(v)) : std::nullopt; };
  r.params = {{"tokens", std::to_string(T)},
              {"experts", std::to_string(E)},
              {"topk", std::to_string(K)},
              {"hidden", std::to_string(H)},
              {"layout", a.layout},
              {"block_size", std::to_string(layout == permute::Layout::padded ? a.block_size : 1)},
              {"routed", routed ? "yes" : "no"},
              {"scoring", opt_if(routed, scoring == route::Scoring::sigmoid ? "sigmoid" : "softmax")},
              {"groups", opt_if(routed, std::to_string(router.groups))},
              {"topk_groups", opt_if(routed, std::to_string(router.topk_groups))},
              {"bias", opt_if(routed, router.bias ? "yes" : "no")},
              {"renormalize", opt_if(routed, renormalize ? "yes" : "no")},
              {"scaling", fmt::format("{:g}", p.combine.scaling)},
              {"model", opt_if(m != nullptr, a.model)}};
  // Only with the FFN, so identity runs report what they always did.
  if (ffn) {
    r.params.push_back({"expert_ffn", "yes"});
    r.params.push_back({"inter", std::to_string(p.experts.inter)});
    r.params.push_back({"act", a.act});
    r.params.push_back({"w1_layout", a.w1_layout});
    r.params.push_back({"expert_weights", weights_given ? "given" : "generated"});
  }
  r.dtype = std::string(npy::dtype_name(hdt));
  return std::make_unique<PathJob>(std::move(h), p, r);
}

}  // namespace

std::unique_ptr<Family> make_moe_path_family() { return std::make_unique<PathFamily>(); }

}  // namespace moekit
