// `moekit route`: router logits -> topk_ids, topk_weights (docs/route.md);
// with --then-align, the align outputs of those ids too.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "align/align.hpp"
#include "align/reference.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
#include "planned.hpp"
#include "route/buffers.hpp"
#include "route/gen.hpp"
#include "route/reference.hpp"
#include "route/route.hpp"
#include "route/then_align.hpp"

namespace moekit {
namespace {

struct Args {
  std::string logits, dtype, bias;
  std::int64_t tokens = -1;
  std::int32_t experts = 0;
  std::string dist = "uniform";
  std::string gen_dtype = "f32";
  std::int32_t topk = 0;
  std::string scoring = "softmax";
  std::int32_t groups = 1, topk_groups = 0;
  bool renormalize = false;
  double scaling = 1.0;
  bool then_align = false;
  std::int32_t block_size = 0;
  std::string align_variant = "auto";
};

struct GenArgs {
  std::int64_t tokens = -1;
  std::int32_t experts = 0;
  std::string dist = "uniform", dtype = "f32";
  bool bias = false;
};

class RouteJob final : public ProblemJob<route::Problem> {
 public:
  RouteJob(npy::Array logits, std::vector<float> wide, std::vector<float> bias, route::Problem p,
           std::int32_t block_size, std::string align_variant, Report& r)
      : ProblemJob(p), logits_(std::move(logits)), wide_(std::move(wide)), bias_(std::move(bias)),
        align_variant_(std::move(align_variant)), report_(&r) {
    if (block_size > 0) {
      then_align_ = true;
      ap_ = planned([&] { return route::plan_then_align(p_, block_size); });
    }
  }

  void reference() override { ref_ = route::reference(p_, wide_.data(), bias_ptr()); }
  void adopt_reference() override {
    got_ = ref_;
    if (then_align_) aligned_ = align_reference(got_.ids);
  }

  // --then-align: align's launches get the same pdl (launch_then_align).
  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    Resolved rv = var_.resolve("route", requested, p_, caps, pdl, route::registry());
    if (then_align_ && route::fuses_align(*var_.v)) {
      align_exact_ = false;  // slots inside an expert in atomic order
      if (align_variant_ != "auto")
        report_->notes.push_back(fmt::format("{} runs align itself: --align-variant {} not used", rv.name,
                                             printable(align_variant_)));
    } else if (then_align_) {
      const Resolved ar = avar_.resolve("align", align_variant_, ap_, caps, pdl, align::registry());
      align_exact_ = ar.exact_order;
      rv.name += "+" + ar.name;
      rv.pdl = rv.pdl || ar.pdl;
    }
    return rv;
  }
  std::size_t input_bytes() const override { return logits_.data.size(); }
  void upload(int copies) override {
    std::optional<WorkspaceNeed> align_ws;  // --then-align after a variant that does not fuse it
    if (avar_.v) align_ws = avar_.workspace_need(ap_);
    d_.emplace(p_, route::HostInputs{logits_.data, bias_}, var_.workspace_need(p_),
               SetOptions::run(copies), align_ws);
  }
  LaunchStatus launch(Stream s, bool pdl, int copy) override {
    const route::Buffers b = d_->buffers(copy);
    if (!then_align_) return var_.v->launch(p_, b, s, pdl);
    return route::launch_then_align(*var_.v, p_, avar_.v, ap_, b, d_->align_workspace(), s, pdl);
  }
  // No guards in a run's set: always "".
  void download() override { (void)d_->download(got_, then_align_ ? &aligned_ : nullptr); }
  double bytes_moved() const override { return route::bytes_moved(p_); }
  CheckResult check(bool) override { return check_against(got_, aligned_); }
  std::vector<NamedArray> outputs() override {
    const std::vector<std::int64_t> shape{p_.tokens, p_.topk};
    std::vector<NamedArray> o{{"topk_ids.npy", make_array(npy::DType::i4, shape, got_.ids)},
                              {"topk_weights.npy", make_array(npy::DType::f4, shape, got_.weights)}};
    if (then_align_) {
      o.push_back({"sorted_token_ids.npy", make_array(npy::DType::i4, {ap_.max_num_tokens_padded}, aligned_.sorted_token_ids)});
      o.push_back({"expert_ids.npy", make_array(npy::DType::i4, {ap_.max_num_blocks}, aligned_.expert_ids)});
      o.push_back({"num_tokens_post_pad.npy",
                   make_array(npy::DType::i4, {1}, std::vector<std::int32_t>{aligned_.num_tokens_post_pad})});
    }
    return o;
  }
  std::vector<std::pair<std::string, std::string>> summary() const override {
    std::vector<std::pair<std::string, std::string>> s{{"slots", std::to_string(p_.tokens * p_.topk)}};
    if (near_ties_ >= 0) s.push_back({"near_tie_rows", std::to_string(near_ties_)});
    if (then_align_) s.push_back({"num_tokens_post_pad", std::to_string(aligned_.num_tokens_post_pad)});
    return s;
  }
  CheckResult check_files(const std::vector<std::string>& paths) override {
    // Keep each array alive while its span is read.
    auto ints = [](const std::string& path) {
      const npy::Array a = npy::read(path);
      const auto v = a.as<std::int32_t>();
      return std::vector<std::int32_t>(v.begin(), v.end());
    };
    route::Outputs back;
    back.ids = ints(paths[0]);
    const npy::Array w = npy::read(paths[1]);
    back.weights.assign(w.as<float>().begin(), w.as<float>().end());
    align::Outputs aback;
    if (then_align_) {
      aback.sorted_token_ids = ints(paths[2]);
      aback.expert_ids = ints(paths[3]);
      aback.num_tokens_post_pad = ints(paths[4]).at(0);
      align_exact_ = true;  // the reference's own align outputs were written
    }
    return check_against(back, aback);
  }

 private:
  const float* bias_ptr() const { return bias_.empty() ? nullptr : bias_.data(); }

  align::Outputs align_reference(const std::vector<std::int32_t>& ids) const {
    const std::vector<std::int64_t> wide(ids.begin(), ids.end());
    return align::reference(ap_, wide, {});
  }

  CheckResult check_against(const route::Outputs& got, const align::Outputs& aligned) {
    const route::CheckReport rep = route::check(p_, wide_.data(), bias_ptr(), ref_, got);
    near_ties_ = rep.near_tie_rows;
    if (rep.near_tie_rows > 0)
      report_->notes.push_back(fmt::format(
          "{} row(s) with a near-tie (selection values within {:g} relative; first: token {}): any selection "
          "the tolerance allows passes there",
          rep.near_tie_rows, route::kTieRel, rep.first_near_tie_row));
    if (!rep.result.ok || !then_align_) return rep.result;
    // The align outputs of the ids this run produced (which may differ from
    // the reference's in near-tie rows).
    CheckResult a = align::check(ap_, align_reference(got.ids), aligned, align_exact_);
    if (!a.ok) a.first_difference = "align outputs: " + a.first_difference;
    return a.ok ? rep.result : a;
  }

  npy::Array logits_;
  std::vector<float> wide_, bias_;
  bool then_align_ = false, align_exact_ = false;
  std::string align_variant_;
  align::Problem ap_;
  Report* report_;
  route::Outputs ref_, got_;
  align::Outputs aligned_;
  std::int64_t near_ties_ = -1;
  ResolvedVariant<route::Variant> var_;
  ResolvedVariant<align::Variant> avar_;
  std::optional<route::DeviceBuffers> d_;
};

class RouteFamily final : public RegistryFamily<route::Registry> {
 public:
  RouteFamily()
      : RegistryFamily(
            {.command = "route",
             .summary = "router top-k: logits -> topk_ids, topk_weights (softmax/sigmoid, correction bias, groups)",
             .outputs_help = "Outputs: topk_ids.npy int32 [T, K] (best first, ties to the lower index), topk_weights.npy float32 "
                 "[T, K]; with --then-align also sorted_token_ids.npy, expert_ids.npy, num_tokens_post_pad.npy.",
             .examples = {"route --tokens 4096 -E 256 --topk 8 --scoring sigmoid --num-groups 8 --topk-groups 4 "
                 "--renormalize --routed-scaling-factor 2.5 --bench"}},
            route::registry()) {}

  void add_options(CLI::App& s) override {
    auto* in = s.add_option("--logits", a_.logits, "router logits [T, E], f32, bf16 or f16 (.npy)");
    s.add_option("--dtype", a_.dtype, "with --logits: read 2-byte data as this dtype (bf16 saved as int16/uint16/void)")
        ->check(CLI::IsMember({"bf16", "f16"}))
        ->needs(in);
    s.add_option("--tokens", a_.tokens, "without --logits: generate this many tokens")->excludes(in);
    s.add_option("-E,--num-experts", a_.experts, "experts E (with --logits: must match its last dimension)");
    s.add_option("--dist", a_.dist,
                 "without --logits: uniform (standard-normal logits) or load:FILE[:LAYER] (top-k frequencies "
                 "follow a recorded per-expert load)")
        ->capture_default_str()
        ->excludes(in);
    s.add_option("--gen-dtype", a_.gen_dtype, "without --logits: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str()
        ->excludes(in);
    s.add_option("-k,--topk", a_.topk, "experts per token K")->required();
    s.add_option("--scoring", a_.scoring, "softmax over the row, or sigmoid per logit (computed in f32)")
        ->check(CLI::IsMember({"softmax", "sigmoid"}))
        ->capture_default_str();
    s.add_option("--correction-bias", a_.bias, "[E] f32 added to the scores for selection only (.npy)");
    s.add_option("--num-groups", a_.groups, "expert groups G (divides E); 1 = no groups")->capture_default_str();
    s.add_option("--topk-groups", a_.topk_groups, "groups kept KG (default: all G)");
    s.add_flag("--renormalize", a_.renormalize, "divide the weights by their sum");
    s.add_option("--routed-scaling-factor", a_.scaling, "multiply the weights by this")->capture_default_str();
    auto* ta = s.add_flag("--then-align", a_.then_align, "also run align on the ids (needs -B): its outputs too");
    s.add_option("-B,--block-size", a_.block_size, "with --then-align: align block size")->needs(ta);
    s.add_option("--align-variant", a_.align_variant, "with --then-align: align variant or auto")
        ->capture_default_str()
        ->needs(ta);
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    s.description("router logits [tokens, E] (standard normal, or shaped by a recorded load), or with --bias an [E] "
                  "f32 correction bias (0.1 x standard normal)");
    s.add_option("--tokens", g_.tokens, "tokens (not with --bias)");
    s.add_option("-E,--num-experts", g_.experts, "experts E")->required();
    s.add_option("--dist", g_.dist, "uniform or load:FILE[:LAYER]")->capture_default_str();
    s.add_option("--dtype", g_.dtype, "f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str();
    s.add_flag("--bias", g_.bias, "write a correction bias [E] instead of logits");
    return [this](std::uint64_t seed) {
      if (g_.bias) return gen::route_bias(g_.experts, seed);
      if (g_.tokens < 0) throw InputError("gen route: give --tokens N (or --bias)");
      return gen::route_logits(g_.tokens, g_.experts, *npy::parse_dtype(g_.dtype), g_.dist, seed);
    };
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  GenArgs g_;
};

// Host memory of a run, held at once: the logits as read (`es` bytes each)
// and as f32; ids and weights five times (the reference, the run's own, the
// output set's copy, the files read back and their copy for the check); with
// --then-align, the ids widened for align and align's outputs six times (as
// ids and weights, and the check's own reference), at their largest (every
// expert's last block padded).
double run_bytes(double tokens, double experts, double topk, double es, bool then_align, double block) {
  const double slots = tokens * topk;
  double b = tokens * experts * (es + 4.0) + 5.0 * 8.0 * slots;
  if (then_align) {
    const double rows = slots + experts * std::max(block, 1.0);  // align's bound on padded rows
    b += 8.0 * slots + 6.0 * 4.0 * (rows + rows / std::max(block, 1.0));
  }
  return b;
}

std::unique_ptr<Job> RouteFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  if (a.then_align && a.block_size < 1) throw InputError("--then-align needs -B/--block-size N (N >= 1)");
  npy::Array in;
  std::string label = display_path(a.logits);
  if (a.logits.empty()) {
    if (a.tokens < 0) throw InputError("route: give --logits FILE, or --tokens N (and -E) to generate logits");
    if (a.experts < 1 || a.experts > route::kMaxExperts)
      throw InputError(fmt::format("route: -E must be in [1, {}], got {}", route::kMaxExperts, a.experts));
    const auto t = npy::parse_dtype(a.gen_dtype);
    gen::check_size(double(a.tokens) * a.experts, "router logits");
    require_host_memory(run_bytes(a.tokens, a.experts, a.topk, double(npy::dtype_size(*t)), a.then_align, a.block_size),
                        "this route run");
    in = gen::route_logits(a.tokens, a.experts, *t, a.dist, c.seed);
    label = fmt::format("generated logits ({} tokens x {}, {}, {}, seed {})", a.tokens, a.experts, a.gen_dtype,
                        printable(a.dist), c.seed);
    r.notes.push_back(label);
  } else {
    in = gen::read_logits(a.logits, a.dtype, a.experts, "-E");
    require_host_memory(run_bytes(in.shape[0], in.shape[1], a.topk, double(npy::dtype_size(in.dtype)), a.then_align,
                                  a.block_size),
                        "this route run");
  }

  route::Problem p;
  p.tokens = in.shape[0];
  p.experts = static_cast<std::int32_t>(in.shape[1]);
  p.topk = a.topk;
  p.groups = a.groups;
  p.topk_groups = a.topk_groups > 0 ? a.topk_groups : a.groups;
  p.scoring = a.scoring == "sigmoid" ? route::Scoring::sigmoid : route::Scoring::softmax;
  p.renormalize = a.renormalize;
  p.scaling = static_cast<float>(a.scaling);
  p.dtype = in.dtype == npy::DType::f4 ? route::DType::f32
            : in.dtype == npy::DType::bf16 ? route::DType::bf16 : route::DType::f16;
  if (!std::isfinite(a.scaling) || !std::isfinite(p.scaling))
    throw InputError(fmt::format("--routed-scaling-factor: {} is not a finite f32 number", a.scaling));
  planned([&] { route::validate(p); });
  // A CPU run resolves no variant of --variant auto, so the align variant is
  // checked here, on every machine: a typo must not pass as exit 0.
  if (a.then_align && a.align_variant != "auto" && !align::registry().find(a.align_variant))
    throw InputError(fmt::format("unknown align variant '{}' for --align-variant (see `moekit variants align`)",
                                 printable(a.align_variant)));

  std::vector<float> bias;
  if (!a.bias.empty()) {
    bias = gen::read_bias(a.bias, p.experts);
    p.bias = true;
  }
  std::vector<float> wide = gen::logits_as_f32(in, label);

  r.params = {{"tokens", std::to_string(p.tokens)},
              {"experts", std::to_string(p.experts)},
              {"topk", std::to_string(p.topk)},
              {"groups", std::to_string(p.groups)},
              {"topk_groups", std::to_string(p.topk_groups)},
              {"scoring", a.scoring},
              {"bias", p.bias ? "yes" : "no"},
              {"renormalize", p.renormalize ? "yes" : "no"},
              {"scaling", fmt::format("{:g}", p.scaling)}};
  if (a.then_align) r.params.push_back({"block_size", std::to_string(a.block_size)});
  r.dtype = std::string(npy::dtype_name(in.dtype));
  return std::make_unique<RouteJob>(std::move(in), std::move(wide), std::move(bias), p,
                                    a.then_align ? a.block_size : 0, a.align_variant, r);
}

}  // namespace

std::unique_ptr<Family> make_route_family() { return std::make_unique<RouteFamily>(); }

}  // namespace moekit
