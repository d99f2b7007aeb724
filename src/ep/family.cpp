// `moekit ep`: expert-parallel dispatch and combine across the GPUs of one
// host, identity experts or the expert FFN between them (docs/ep.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "align/gen.hpp"
#include "combine/gen.hpp"
#include "cuda_util.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "ep/buffers.hpp"
#include "ep/comm.hpp"
#include "ep/ep.hpp"
#include "ep/gen.hpp"
#include "ep/reference.hpp"
#include "errors.hpp"
#include "experts/weight_files.hpp"
#include "family.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
#include "planned.hpp"
#include "rows_gen.hpp"
#include "sizes.hpp"

namespace moekit {
namespace {

using ep::rank_seed;

struct Args {
  std::string hidden, ids, weights, placement, dist = "uniform", gen_dtype = "bf16";
  std::int32_t ranks = 0, experts = 0, topk = 0;
  std::int64_t tokens = -1, hidden_size = 4096;
  double scaling = 1.0;
  // --experts ffn (docs/ep.md "The expert FFN")
  std::string expert_kind = "identity", act = "silu", w1_layout = "gate-up", w1, w2;
  std::int64_t inter = 0;
};

// A CPU run of --experts ffn computes every token's FFN (as moe-path's).
constexpr double kCpuFfnMacs = 1e10;
// A GPU run's check computes the FFN of a seeded sample of tokens within this many multiply-adds.
constexpr double kFfnCheckMacs = 2e9;

// `moekit gen ep`'s options.
struct GenArgs {
  std::string which = "hidden", dist = "uniform", dtype = "bf16";
  std::int32_t ranks = 1, experts = 0, topk = 0;
  std::int64_t tokens = -1, hidden_size = 4096;
};

// The visible GPUs (at most ep::kMaxRanks), 1 where there are none (a CPU run of one rank).
int default_ranks() { return std::clamp(cuda_device_count(), 1, ep::kMaxRanks); }

// Per-rank arrays stacked as [R, ...].
npy::Array stacked(const std::vector<npy::Array>& parts) {
  npy::Array a;
  a.dtype = parts.front().dtype;
  a.shape = parts.front().shape;
  a.shape.insert(a.shape.begin(), std::int64_t(parts.size()));
  for (const npy::Array& p : parts) a.data.insert(a.data.end(), p.data.begin(), p.data.end());
  return a;
}

class EpJob final : public ProblemJob<ep::Problem> {
 public:
  struct Host {
    std::vector<npy::Array> hidden;                 // per rank [T, H]
    std::vector<std::vector<std::int32_t>> ids;     // per rank T x K
    std::vector<std::vector<float>> weights;        // per rank T x K
    npy::DType dtype = npy::DType::bf16;
    ep::FfnInputs ffn;                              // p.ffn: the weights, the check's sample
    npy::Array w1, w2;                              // p.ffn, given: [E, 2I, H], [E, H, I] (ffn's spans)
  };

  EpJob(Host h, ep::Problem p, Report& r) : ProblemJob(std::move(p)), h_(std::move(h)), report_(&r) {
    if (!h_.w1.data.empty()) {  // views of this job's own arrays
      h_.ffn.w1 = {reinterpret_cast<const std::uint16_t*>(h_.w1.data.data()), h_.w1.data.size() / 2};
      h_.ffn.w2 = {reinterpret_cast<const std::uint16_t*>(h_.w2.data.data()), h_.w2.data.size() / 2};
    }
    for (int k = 0; k < p_.ranks; ++k)
      in_.push_back({std::span<const std::byte>(reinterpret_cast<const std::byte*>(h_.hidden[std::size_t(k)].data.data()),
                                                h_.hidden[std::size_t(k)].data.size()),
                     h_.ids[std::size_t(k)], h_.weights[std::size_t(k)]});
  }

  // The reference of the rule the asked variant follows (p2p-reduce*: the
  // sum of per-rank partials; any other, or none asked yet: combine's rule).
  // A CPU run resolves the variant after reference(), so each use asks again.
  ep::Return rule() const { return var_.v != nullptr ? ep::returns(*var_.v) : ep::Return::slots; }
  const std::vector<ep::RankOutputs>& ref() {
    if (!ref_rule_ || *ref_rule_ != rule()) {
      ref_ = ep::reference(p_, in_, rule(), p_.ffn ? &h_.ffn : nullptr);
      ref_rule_ = rule();
    }
    return ref_;
  }
  void reference() override { (void)ref(); }
  void adopt_reference() override { got_ = ref(); }

  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    if (caps.present()) {
      const int visible = cuda_device_count();
      if (p_.ranks > visible)
        throw InputError(fmt::format("--ranks {}: only {} GPU(s) visible (CUDA_VISIBLE_DEVICES)", p_.ranks, visible));
    }
    Resolved rv = var_.resolve("ep", requested, p_, caps, pdl, ep::registry());
    if (caps.present() && p_.ffn) {
      std::string picks;
      for (int r = 0; r < p_.ranks; ++r)
        picks += fmt::format("{}{}", r == 0 ? "" : ", ", ep::ffn_variant(p_, r, caps).info.name);
      report_->notes.push_back("the expert FFN on each rank (experts' auto pick on a layout): " + picks);
    }
    return rv;
  }

  std::size_t input_bytes() const override {
    std::size_t n = 0;
    for (const npy::Array& a : h_.hidden) n += a.data.size();
    return n;
  }

  void upload(int copies) override {
    d_.emplace(p_, in_, var_.workspace_need(p_), SetOptions::run(copies), &h_.ffn);
    std::string why;
    comm_ = ep::comm_on_process_streams(p_.ranks, ep::needs_nccl(*var_.v), &why);
    if (!comm_) throw CudaError("ep: " + why);
    if (ep::needs_nccl(*var_.v) && !comm_->has_nccl()) throw CudaError("ep: " + comm_->nccl_unavailable());
    if (!ep::needs_nccl(*var_.v) && !comm_->has_peers())
      throw CudaError("ep: peer access could not be enabled between the GPUs (cudaDeviceEnablePeerAccess)");
    report_->notes.push_back(fmt::format(
        "{} GPU(s), peer access {}; {}", p_.ranks, comm_->has_peers() ? "on" : "not available",
        comm_->has_nccl() ? fmt::format("NCCL {} (NVLink multicast off: NCCL_NVLS_ENABLE=0)", ep::nccl_version())
                          : "no NCCL communicators: " + comm_->nccl_unavailable()));
  }

  LaunchStatus launch(Stream s, bool pdl, int copy) override {
    return said(var_.v->launch(p_, d_->buffers(copy, comm_.get()), s, pdl));
  }

  std::vector<Stage> stages() override {
    std::vector<Stage> v;
    for (const auto& [name, st] : {std::pair{"dispatch", ep::Stage::dispatch}, std::pair{"experts", ep::Stage::experts},
                                   std::pair{"combine", ep::Stage::combine}})
      if (st != ep::Stage::experts || p_.ffn)  // identity experts launch nothing
      v.push_back({name, [this, st](Stream s, bool pdl, int copy) {
                     return said(ep::launch_stage(*var_.v, p_, d_->buffers(copy, comm_.get()), st, s, pdl));
                   }});
    return v;
  }

  void download() override {
    if (std::string why = d_->download(got_); !why.empty()) {
      // The check fails naming it; the output set keeps its shapes (zeros).
      download_error_ = why;
      got_.assign(std::size_t(p_.ranks), {});
      for (int r = 0; r < p_.ranks; ++r) {
        got_[std::size_t(r)].offsets.assign(std::size_t(p_.local[std::size_t(r)]) + 1, 0);
        got_[std::size_t(r)].out.assign(std::size_t(p_.tokens) * std::size_t(p_.row_bytes()), std::byte{0});
      }
    }
  }

  // The payload between the GPUs' memories (the FFN's weights and y not counted).
  double bytes_moved() const override {
    const ep::Traffic t = ep::traffic(p_, h_.ids);
    return double(t.dispatch_rows + t.combine_rows) * double(p_.row_bytes());
  }

  CheckResult check(bool) override {
    if (!download_error_.empty()) return CheckResult{false, download_error_, 1.0};
    // p2p-reduce's out is the sum of rounded per-rank partials: its own reference.
    const bool partials = rule() == ep::Return::partials;
    CheckResult c = ep::check(p_, ref(), got_, rule(), in_);
    if (c.ok && p_.ffn) {
      std::int64_t sampled = 0;
      for (const ep::RankOutputs& o : ref()) sampled += std::int64_t(o.ffn.tokens.size());
      report_->notes.push_back(fmt::format(
          "checked: each rank's rows per local expert bit for bit as a set, its expert offsets exactly, the FFN's y "
          "of {} of {} token(s) (a seeded sample within {:g} multiply-adds) against the experts reference with "
          "weights keyed by global expert (largest error {:.3g} of the derived bound), and out bit for bit against "
          "{} applied to the run's own y rows",
          sampled, std::int64_t(p_.ranks) * p_.tokens, h_.ffn.budget_macs, c.max_error,
          partials ? "the sum of per-rank partials" : "combine's rule"));
      return c;
    }
    if (c.ok)
      report_->notes.push_back(partials ? "checked: each rank's rows per local expert bit for bit as a set, its expert "
                                          "offsets exactly, and out bit for bit against the sum of per-rank partials "
                                          "(each combine's rule with S = 1, rounded), rank by rank, times S"
                                        : "checked: each rank's rows per local expert bit for bit as a set, its expert "
                                          "offsets exactly, and out bit for bit against combine's rule on the token's "
                                          "own rank");
    return c;
  }

  std::vector<NamedArray> outputs() override {
    std::int32_t most = 0;
    for (int r = 0; r < p_.ranks; ++r) most = std::max(most, p_.local[std::size_t(r)]);
    std::vector<std::int64_t> offsets;
    npy::Array rows, out;
    rows.dtype = out.dtype = h_.dtype;
    std::int64_t n = 0;
    for (const ep::RankOutputs& o : got_) {
      for (std::int32_t i = 0; i <= most; ++i)
        offsets.push_back(o.offsets.empty() ? 0 : o.offsets[std::min<std::size_t>(std::size_t(i), o.offsets.size() - 1)]);
      rows.data.insert(rows.data.end(), o.rows.begin(), o.rows.end());
      out.data.insert(out.data.end(), o.out.begin(), o.out.end());
      n += o.offsets.empty() ? 0 : o.offsets.back();
    }
    rows.shape = {n, p_.hidden};
    out.shape = {p_.ranks, p_.tokens, p_.hidden};
    std::vector<NamedArray> v;
    v.push_back({"out.npy", std::move(out)});
    v.push_back({"expert_offsets.npy", make_array(npy::DType::i8, {p_.ranks, std::int64_t(most) + 1}, offsets)});
    v.push_back({"received.npy", std::move(rows)});
    if (p_.ffn) {
      npy::Array y;
      y.dtype = h_.dtype;
      for (const ep::RankOutputs& o : got_) y.data.insert(y.data.end(), o.y.begin(), o.y.end());
      y.shape = {n, p_.hidden};
      v.push_back({"y.npy", std::move(y)});
    }
    return v;
  }

  std::vector<std::pair<std::string, std::string>> summary() const override {
    const ep::Traffic t = ep::traffic(p_, h_.ids);
    return {{"ranks", std::to_string(p_.ranks)},
            {"rows_sent", std::to_string(t.dispatch_rows)},
            {"rows_between_gpus", std::to_string(t.dispatch_remote)},
            {"slots_returned", std::to_string(t.combine_rows)},
            {"slots_between_gpus", std::to_string(t.combine_remote)}};
  }

  CheckResult check_files(const std::vector<std::string>& paths) override {
    const npy::Array out = npy::read(paths[0]), off = npy::read(paths[1]), rows = npy::read(paths[2]);
    const npy::Array y = p_.ffn && paths.size() > 3 ? npy::read(paths[3]) : npy::Array{};
    std::vector<ep::RankOutputs> back(std::size_t(p_.ranks));
    const std::size_t rb = std::size_t(p_.row_bytes()), per = off.shape.size() == 2 ? std::size_t(off.shape[1]) : 0;
    std::size_t at = 0;
    for (int r = 0; r < p_.ranks; ++r) {
      ep::RankOutputs& o = back[std::size_t(r)];
      for (std::int32_t i = 0; i <= p_.local[std::size_t(r)] && std::size_t(r) * per + std::size_t(i) < off.as<std::int64_t>().size(); ++i)
        o.offsets.push_back(off.as<std::int64_t>()[std::size_t(r) * per + std::size_t(i)]);
      const std::size_t bytes = o.offsets.empty() ? 0 : std::size_t(std::max<std::int64_t>(o.offsets.back(), 0)) * rb;
      if (at + bytes > rows.data.size()) return CheckResult{false, paths[2] + ": fewer rows than the offsets say", 1.0};
      o.rows.assign(rows.data.begin() + std::ptrdiff_t(at), rows.data.begin() + std::ptrdiff_t(at + bytes));
      if (p_.ffn) {
        if (at + bytes > y.data.size()) return CheckResult{false, (paths.size() > 3 ? paths[3] : "y.npy") + ": fewer rows than the offsets say", 1.0};
        o.y.assign(y.data.begin() + std::ptrdiff_t(at), y.data.begin() + std::ptrdiff_t(at + bytes));
      }
      at += bytes;
      const std::size_t ob = std::size_t(p_.tokens) * rb;
      if (out.data.size() < (std::size_t(r) + 1) * ob) return CheckResult{false, paths[0] + ": too short", 1.0};
      o.out.assign(out.data.begin() + std::ptrdiff_t(std::size_t(r) * ob),
                   out.data.begin() + std::ptrdiff_t((std::size_t(r) + 1) * ob));
    }
    return ep::check(p_, ref(), back, rule(), in_);
  }

 private:
  // A failed NCCL call's message as the run's CUDA error (exit 3).
  LaunchStatus said(LaunchStatus s) {
    if (s != 0 && comm_ && !comm_->error().empty()) throw CudaError("ep: " + comm_->error());
    return s;
  }

  Host h_;
  std::vector<ep::RankInputs> in_;
  Report* report_;
  std::vector<ep::RankOutputs> ref_, got_;
  std::optional<ep::Return> ref_rule_;  // the rule ref_ was computed for
  std::string download_error_;
  ResolvedVariant<ep::Variant> var_;
  std::optional<ep::DeviceBuffers> d_;
  std::unique_ptr<ep::Comm> comm_;
};

class EpFamily final : public RegistryFamily<ep::Registry> {
 public:
  EpFamily()
      : RegistryFamily(
            {.command = "ep",
             .summary = "expert-parallel dispatch and combine across the GPUs of one host (peer writes over NVLink, "
                 "or NCCL): each token's row to every rank that owns one of its experts, laid out there per local "
                 "expert, the experts' outputs back and combined on the token's rank (identity experts, or --experts ffn: "
                 "the expert FFN on each rank)",
             .outputs_help = "Outputs: out.npy [R, T, H] (the hidden dtype), expert_offsets.npy int64 [R, L + 1] (L: "
                 "the most local experts a rank has; a rank with fewer repeats its last offset) and received.npy "
                 "[N, H]: every rank's received rows in its compact layout, rank after rank; with --experts ffn also y.npy "
                 "[N, H], the FFN's output of each received row (same order).",
             .examples = {"ep --ranks 2 -E 256 -k 8 --hidden-size 7168 --tokens 128,4096 --routed-scaling-factor 2.5 "
                          "--bench",
                          "ep --ranks 1 --hidden h.npy --topk-ids ids.npy --topk-weights w.npy -E 64",
                          "ep --ranks 2 -E 256 -k 8 --hidden-size 7168 --tokens 128 --experts ffn --inter-size 256 "
                          "--routed-scaling-factor 2.5"}},
            ep::registry()) {}

  void add_options(CLI::App& s) override {
    s.add_option("--ranks", a_.ranks, "GPUs (ranks) of this host, devices 0 .. R-1 (default: every visible GPU; 1 "
                                      "without one)");
    auto* hid = s.add_option("--hidden", a_.hidden, "hidden states [R, T, H] (or [T, H] for one rank), f32, bf16 or "
                                                    "f16 (.npy); default: generated");
    auto* ids = s.add_option("--topk-ids", a_.ids, "expert ids [R, T, K] (or [T, K]), int32 or int64 (.npy); -1 or "
                                                   "an id outside [0, E): a dropped slot; default: generated");
    auto* w = s.add_option("--topk-weights", a_.weights, "with --topk-ids: weights [R, T, K] (or [T, K]), float32");
    ids->needs(w);
    w->needs(ids);
    s.add_option("-E,--num-experts", a_.experts, "experts E (global)")->required();
    s.add_option("-k,--topk", a_.topk, "without --topk-ids: experts per token K");
    s.add_option("--expert-placement", a_.placement,
                 "[E] int32 or int64: the rank that owns each expert (default: contiguous, E / R a rank)");
    auto* tok = s.add_option("--tokens", a_.tokens, "without input files: generate this many tokens per rank");
    tok->excludes(hid)->excludes(ids);
    s.add_option("--hidden-size", a_.hidden_size, "without --hidden: H of the generated rows")
        ->capture_default_str()
        ->excludes(hid);
    s.add_option("--dist", a_.dist, "generated ids: uniform, zipf:S, hot:F or load:FILE[:LAYER] (`moekit gen align`)")
        ->capture_default_str()
        ->excludes(ids);
    s.add_option("--gen-dtype", a_.gen_dtype, "generated hidden rows: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str()
        ->excludes(hid);
    s.add_option("--routed-scaling-factor", a_.scaling, "S: the combine multiplies the weighted sum by it")
        ->capture_default_str();
    // The experts (docs/ep.md "The expert FFN"); the FFN options need --experts ffn (checked in prepare).
    s.add_option("--experts", a_.expert_kind,
                 "the experts between dispatch and combine: identity (the received rows go back) or ffn (the expert "
                 "FFN of `moekit experts` on each rank's received rows, its auto pick among the variants that read a "
                 "layout; weights generated on each GPU from --seed, keyed by global expert)")
        ->check(CLI::IsMember({"identity", "ffn"}))
        ->capture_default_str();
    ffn_opts_[0] = s.add_option("--inter-size", a_.inter, "--experts ffn: the intermediate size I");
    ffn_opts_[1] = s.add_option("--act", a_.act, "--experts ffn: act(gate) * up: silu, gelu, gelu-tanh or swiglu-oai "
                                                 "(gpt-oss: clamped, interleaved W1)")
                       ->check(CLI::IsMember({"silu", "gelu", "gelu-tanh", "swiglu-oai"}))
                       ->capture_default_str();
    ffn_opts_[2] = s.add_option("--w1-layout", a_.w1_layout,
                                "--experts ffn: W1's rows: gate-up (gate rows 0..I-1, then up rows) or interleaved "
                                "(gate i at 2i, up i at 2i+1)")
                       ->check(CLI::IsMember({"gate-up", "interleaved"}))
                       ->capture_default_str();
    ffn_opts_[3] = s.add_option("--w1", a_.w1, "--experts ffn: W1 [E, 2I, H] of the E global experts in the hidden "
                                               "dtype (.npy; default: generated on each GPU from --seed)");
    auto* w2 = s.add_option("--w2", a_.w2, "--experts ffn: with --w1: W2 [E, H, I] in the hidden dtype (.npy)");
    ffn_opts_[3]->needs(w2);
    w2->needs(ffn_opts_[3]);
    ffn_opts_[0]->excludes(ffn_opts_[3]);  // I is W1's
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    s.description("ep's inputs for R ranks, as a run without them generates them for the same seed: --which hidden "
                  "[R, T, H], ids [R, T, K] (distinct per token), weights [R, T, K]");
    s.add_option("--which", g_.which, "hidden, ids or weights")
        ->check(CLI::IsMember({"hidden", "ids", "weights"}))
        ->capture_default_str();
    s.add_option("--ranks", g_.ranks, "R")->capture_default_str();
    s.add_option("--tokens", g_.tokens, "T per rank")->required();
    s.add_option("--hidden-size", g_.hidden_size, "hidden: H")->capture_default_str();
    s.add_option("--dtype", g_.dtype, "hidden: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str();
    s.add_option("-E,--num-experts", g_.experts, "ids: experts E");
    s.add_option("-k,--topk", g_.topk, "ids and weights: K");
    s.add_option("--dist", g_.dist, "ids: uniform, zipf:S, hot:F or load:FILE[:LAYER]")->capture_default_str();
    return [this](std::uint64_t seed) {
      const GenArgs& g = g_;
      if (g.ranks < 1 || g.ranks > ep::kMaxRanks)
        throw InputError(fmt::format("--ranks must be in [1, {}], got {}", ep::kMaxRanks, g.ranks));
      if (g.tokens < 0) throw InputError(fmt::format("--tokens must be >= 0, got {}", g.tokens));
      std::vector<npy::Array> parts;
      if (g.which == "hidden") {
        gen::check_size(double(g.ranks) * double(g.tokens) * double(g.hidden_size), "hidden rows");
        for (int r = 0; r < g.ranks; ++r)
          parts.push_back(gen::normal_rows(g.tokens, g.hidden_size, *npy::parse_dtype(g.dtype), rank_seed(seed, r),
                                           "hidden rows"));
      } else {
        if (g.topk < 1) throw InputError("--which ids/weights needs -k (K >= 1)");
        gen::check_size(double(g.ranks) * double(g.tokens) * double(g.topk), "expert ids");
        if (g.which == "ids") {
          if (g.experts < g.topk)
            throw InputError(fmt::format("-E {} must be >= K {} (the ids are distinct per token)", g.experts, g.topk));
          const gen::ExpertDist d = gen::parse_dist(g.dist);
          for (int r = 0; r < g.ranks; ++r)
            parts.push_back(gen::align_ids(g.tokens, g.topk, g.experts, d, rank_seed(seed, r), false));
        } else {
          for (int r = 0; r < g.ranks; ++r) parts.push_back(gen::topk_weights(g.tokens, g.topk, rank_seed(seed, r)));
        }
      }
      return stacked(parts);
    };
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  GenArgs g_;
  std::array<CLI::Option*, 4> ffn_opts_{};  // --inter-size, --act, --w1-layout, --w1
};

// A per-rank file: [R, n, m], or [n, m] for one rank. Returns R's view of n, m.
void rank_shape(const npy::Array& a, const std::string& label, std::int32_t& R, std::int64_t& n, std::int64_t& m) {
  if (a.shape.size() == 3) {
    if (R > 0 && a.shape[0] != R)
      throw InputError(fmt::format("{}: {} ranks in its first dimension, but {} given", label, a.shape[0], R));
    if (a.shape[0] < 1 || a.shape[0] > ep::kMaxRanks)
      throw InputError(fmt::format("{}: {} ranks in its first dimension (1 to {})", label, a.shape[0], ep::kMaxRanks));
    R = std::int32_t(a.shape[0]);
    n = a.shape[1];
    m = a.shape[2];
  } else if (a.shape.size() == 2) {
    if (R > 1)
      throw InputError(fmt::format("{}: a [T, ...] file is one rank's, but {} ranks given: stack them as [R, T, ...]",
                                   label, R));
    R = 1;
    n = a.shape[0];
    m = a.shape[1];
  } else {
    throw InputError(fmt::format("{}: expected [R, T, ...] or [T, ...], got {}", label, npy::format_shape(a.shape)));
  }
}

std::unique_ptr<Job> EpFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  std::int32_t R = a.ranks;
  if (R < 0 || R > ep::kMaxRanks) throw InputError(fmt::format("--ranks must be in [1, {}], got {}", ep::kMaxRanks, R));
  if (!std::isfinite(a.scaling) || !std::isfinite(static_cast<float>(a.scaling)))
    throw InputError(fmt::format("--routed-scaling-factor: {} is not a finite f32 number", a.scaling));
  if (a.experts < 1) throw InputError(fmt::format("-E must be >= 1, got {}", a.experts));
  EpJob::Host h;
  std::int64_t T = -1, H = a.hidden_size;
  std::int32_t K = a.topk;
  std::vector<std::string> generated;
  if (!a.hidden.empty()) {
    const std::string hl = display_path(a.hidden);
    const npy::Array x = npy::read(a.hidden);
    if (x.dtype != npy::DType::f4 && x.dtype != npy::DType::bf16 && x.dtype != npy::DType::f2)
      throw InputError(fmt::format("{}: hidden states must be f32, bf16 or f16, got {}", hl, npy::dtype_name(x.dtype)));
    rank_shape(x, hl, R, T, H);
    if (H < 1) throw InputError(fmt::format("{}: H must be >= 1", hl));
    const std::size_t per = std::size_t(T) * std::size_t(H) * npy::dtype_size(x.dtype);
    for (int k = 0; k < R; ++k) {
      npy::Array part;
      part.dtype = x.dtype;
      part.shape = {T, H};
      part.data.assign(x.data.begin() + std::ptrdiff_t(std::size_t(k) * per),
                       x.data.begin() + std::ptrdiff_t(std::size_t(k + 1) * per));
      h.hidden.push_back(std::move(part));
    }
    h.dtype = x.dtype;
  }
  if (!a.ids.empty()) {
    const std::string il = display_path(a.ids), wl = display_path(a.weights);
    const npy::Array ids = npy::read(a.ids), w = npy::read(a.weights);
    if (ids.dtype != npy::DType::i4 && ids.dtype != npy::DType::i8)
      throw InputError(fmt::format("{}: expert ids must be int32 or int64, got {}", il, npy::dtype_name(ids.dtype)));
    std::int64_t Ti = 0, Ki = 0;
    rank_shape(ids, il, R, Ti, Ki);
    if (T >= 0 && Ti != T)
      throw InputError(fmt::format("{}: {} tokens a rank, but the hidden states have {}", il, Ti, T));
    if (a.topk > 0 && Ki != a.topk) throw InputError(fmt::format("{}: K is {}, but -k says {}", il, Ki, a.topk));
    if (Ki < 1) throw InputError(fmt::format("{}: K must be >= 1", il));
    if (w.dtype != npy::DType::f4 || w.shape != ids.shape)
      throw InputError(fmt::format("{}: the weights must be float32 of the ids' shape {}", wl,
                                   npy::format_shape(ids.shape)));
    T = Ti;
    K = narrow_to_int32(Ki, il + ": K");
    const std::size_t per = std::size_t(T) * std::size_t(K);
    for (int k = 0; k < R; ++k) {
      std::vector<std::int32_t> v(per);
      for (std::size_t i = 0; i < per; ++i) {
        const std::size_t at = std::size_t(k) * per + i;
        const std::int64_t e = ids.dtype == npy::DType::i4 ? ids.as<std::int32_t>()[at] : ids.as<std::int64_t>()[at];
        v[i] = e < 0 || e >= a.experts ? -1 : static_cast<std::int32_t>(e);  // dropped slots
      }
      h.ids.push_back(std::move(v));
      const auto wv = w.as<float>().subspan(std::size_t(k) * per, per);
      for (std::size_t i = 0; i < per; ++i)
        if (!std::isfinite(wv[i]))
          throw InputError(fmt::format("{}: weight [{}, {}, {}] is {}: weights must be finite", wl, k, i / std::size_t(K),
                                       i % std::size_t(K), wv[i]));
      h.weights.emplace_back(wv.begin(), wv.end());
    }
  }
  if (R == 0) R = default_ranks();
  if (T < 0) {
    if (a.tokens < 0)
      throw InputError("ep: give --hidden FILE and/or --topk-ids FILE --topk-weights FILE, or --tokens N to generate "
                       "the inputs");
    T = a.tokens;
  }
  if (K < 1) throw InputError("ep: K is missing: give -k or --topk-ids");
  std::vector<std::int32_t> placement;
  if (!a.placement.empty()) {
    const std::string pl = display_path(a.placement);
    const npy::Array pa = npy::read(a.placement);
    if ((pa.dtype != npy::DType::i4 && pa.dtype != npy::DType::i8) || pa.shape.size() != 1)
      throw InputError(fmt::format("{}: the placement must be int32 or int64 [E], got {} {}", pl,
                                   npy::dtype_name(pa.dtype), npy::format_shape(pa.shape)));
    if (pa.shape[0] != a.experts)
      throw InputError(fmt::format("{}: {} entries for {} experts", pl, pa.shape[0], a.experts));
    for (std::int64_t e = 0; e < pa.shape[0]; ++e) {
      const std::int64_t v = pa.dtype == npy::DType::i4 ? pa.as<std::int32_t>()[std::size_t(e)]
                                                        : pa.as<std::int64_t>()[std::size_t(e)];
      if (v < 0 || v >= R)
        throw InputError(fmt::format("{}: expert {} is placed on rank {}, outside [0, {})", pl, e, v, R));
      placement.push_back(std::int32_t(v));
    }
  }
  gen::check_size(double(R) * double(T) * double(H), "hidden rows");
  gen::check_size(double(R) * double(T) * double(K), "expert ids");
  if (h.hidden.empty()) {
    const npy::DType dt = *npy::parse_dtype(a.gen_dtype);
    require_host_memory(double(R) * double(T) * double(H) * double(npy::dtype_size(dt)), "the hidden rows");
    for (int k = 0; k < R; ++k) h.hidden.push_back(gen::normal_rows(T, H, dt, rank_seed(c.seed, k), "hidden rows"));
    h.dtype = dt;
    generated.push_back(fmt::format("hidden {} x {} x {} ({}, standard normal)", R, T, H, a.gen_dtype));
  }
  if (h.ids.empty()) {
    if (K > a.experts)
      throw InputError(fmt::format("-k {} is more than the {} experts the generated ids draw from (distinct per "
                                   "token)",
                                   K, a.experts));
    const gen::ExpertDist d = gen::parse_dist(a.dist);
    for (int k = 0; k < R; ++k) {
      const npy::Array ids = gen::align_ids(T, K, a.experts, d, rank_seed(c.seed, k), false);
      h.ids.emplace_back(ids.as<std::int32_t>().begin(), ids.as<std::int32_t>().end());
      const npy::Array w = gen::topk_weights(T, K, rank_seed(c.seed, k));
      h.weights.emplace_back(w.as<float>().begin(), w.as<float>().end());
    }
    generated.push_back(fmt::format("ids {} x {} x {} ({} over {} experts, distinct per token) and their weights", R, T,
                                    K, a.dist, a.experts));
  }
  const combine::DType dt = h.dtype == npy::DType::f4     ? combine::DType::f32
                            : h.dtype == npy::DType::bf16 ? combine::DType::bf16
                                                          : combine::DType::f16;
  // The FFN's options with identity experts would be silently unused: refused.
  const bool ffn = a.expert_kind == "ffn";
  for (const CLI::Option* o : ffn_opts_)
    if (!ffn && o != nullptr && o->count() > 0)
      throw InputError(fmt::format("{} applies to the expert FFN: add --experts ffn (the experts are identity)",
                                   o->get_name()));
  experts::FfnArgs fa;
  fa.inter = a.inter;
  if (ffn && !a.w1.empty()) {
    const experts::WeightFiles wf = experts::inspect_weight_files(a.w1, a.w2, a.experts, H, h.dtype, {});
    fa.inter = wf.inter;  // --inter-size excludes --w1
    require_host_memory(3.0 * double(a.experts) * 3.0 * double(fa.inter) * double(H) * 2.0,
                        "the expert weights (read, and each rank's gathered)");
    experts::read_weight_files(a.w1, a.w2, {}, h.w1, h.w2);
  }
  if (ffn) {
    if (fa.inter < 1)
      throw InputError(ffn_opts_[0]->count() > 0 ? fmt::format("--inter-size must be >= 1, got {}", a.inter)
                                                 : std::string("--experts ffn needs the intermediate size I: --inter-size I"));
    fa.act = experts::act_named(a.act);
    fa.w1_layout = experts::w1_layout_named(a.w1_layout);
  }
  ep::Problem p = planned([&] {
    return ep::make_problem(R, T, K, a.experts, H, dt, static_cast<float>(a.scaling), std::move(placement),
                            ffn ? &fa : nullptr);
  });
  if (ffn) {
    // Every GPU holds its own experts' W1 and W2 (the placement says how
    // many): refuse what no GPU could hold.
    const std::int32_t most = *std::max_element(p.local.begin(), p.local.begin() + R);
    const double weight_bytes = double(most) * 3.0 * double(fa.inter) * double(H) * 2.0;
    if (weight_bytes > double(std::int64_t(1) << 40))
      throw InputError(fmt::format("--experts ffn: {} experts of 3 x {} x {} weights on one rank need {:.3g} TB a GPU",
                                   most, fa.inter, H, weight_bytes / 1e12));
    // The check's host memory: one source rank's slot rows at a time, every
    // rank's y and received rows (got's and the reference's), and on a CPU
    // run the experts reference of every slot (y, its bound and a working
    // copy: ~18 bytes an element).
    const double slots = double(R) * double(T) * double(K), rb = double(H) * 2.0;
    const bool cpu_all = c.device == "cpu" || (c.device != "gpu" && cuda_device_count() == 0);
    require_host_memory(slots * rb * 4.0 + double(T) * double(K) * rb + (cpu_all ? slots * double(H) * 18.0 : 0.0),
                        "the check of the expert FFN");
    // A CPU run's reference computes every token's FFN (its y and out are the
    // outputs); a GPU run's check a sample.
    h.ffn.all_tokens = cpu_all;
    h.ffn.weight_seed = h.ffn.sample_seed = c.seed;
    h.ffn.budget_macs = kFfnCheckMacs;
    // Each slot's 3 I H, and (generated) each used expert's weights recomputed once a rank.
    const bool given = !a.w1.empty();
    const double macs = double(R) * double(T) * double(K) * 3.0 * double(fa.inter) * double(H) +
                        (given ? 0.0 : double(R) * double(std::min<std::int64_t>(a.experts, T * K)) * 3.0 *
                                           double(fa.inter) * double(H));
    if (h.ffn.all_tokens && macs > kCpuFfnMacs)
      throw InputError(fmt::format(
          "--experts ffn on the CPU: the reference computes every token's FFN, {:.3g} multiply-adds (R T K 3 I H{}), "
          "over the CPU limit of {:g}: use fewer tokens or smaller sizes, or a GPU",
          macs, given ? "" : ", and each used expert's generated weights", kCpuFfnMacs));
    if (!given)
      generated.push_back(fmt::format("expert weights W1 {} x {} x {} and W2 {} x {} x {} ({}, keyed by global expert)",
                                    a.experts, 2 * fa.inter, H, a.experts, H, fa.inter,
                                    h.ffn.all_tokens ? "recomputed by the reference where it reads them"
                                                     : "on each rank's GPU, its own experts'"));
  }
  // The per-rank workspace of the worst case (every slot to one rank) is
  // what the GPU run allocates on each GPU: refuse what no GPU could hold.
  const double ws_rows = double(p.recv_capacity()) * 2.0 + double(p.slot_capacity()) * 3.0;
  if (ws_rows * double(p.row_bytes()) > double(std::int64_t(1) << 40))
    throw InputError(fmt::format("ep: R * T * K = {} slots of {} bytes need more than 1 TiB a GPU", p.slot_capacity(),
                                 p.row_bytes()));
  r.params = {{"ranks", std::to_string(R)}, {"tokens", std::to_string(T)}, {"topk", std::to_string(K)},
              {"experts", std::to_string(a.experts)}, {"hidden", std::to_string(H)},
              {"scaling", fmt::format("{:g}", p.scaling)}};
  // Only with the FFN, so identity runs report what they always did (moe-path's names).
  if (ffn) {
    r.params.push_back({"expert_ffn", "yes"});
    r.params.push_back({"inter", std::to_string(fa.inter)});
    r.params.push_back({"act", a.act});
    r.params.push_back({"w1_layout", a.w1_layout});
    r.params.push_back({"expert_weights", a.w1.empty() ? "generated" : "given"});
  }
  r.dtype = std::string(npy::dtype_name(h.dtype));
  for (const std::string& g : generated) r.notes.push_back("generated " + g + fmt::format(" (seed {})", c.seed));
  return std::make_unique<EpJob>(std::move(h), std::move(p), r);
}

}  // namespace

std::unique_ptr<Family> make_ep_family() { return std::make_unique<EpFamily>(); }

}  // namespace moekit
