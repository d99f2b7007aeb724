// `moekit align`: moe_align_block_size on a router trace (docs/align.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "align/align.hpp"
#include "align/buffers.hpp"
#include "align/ep_cli.hpp"
#include "align/reference.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "host_memory.hpp"
#include "planned.hpp"
#include "align/gen.hpp"

namespace moekit {
namespace {

using align::Outputs;
using align::Problem;

struct Args {
  std::string topk_ids;    // input file; empty = generate from the shape options
  align::EpArgs ep;        // --expert-map, --invalid, --map-semantics, --ignore-invalid
  std::int32_t num_experts = 0;
  std::int32_t block_size = 128;
  bool pad_sorted_ids = false;
  // synthetic input (no --topk-ids)
  std::int64_t tokens = -1;
  std::int32_t topk = 8;
  std::string dist = "uniform";
};

struct GenArgs {
  std::int64_t tokens = 0;
  std::int32_t topk = 0, num_experts = 0;
  std::string dist = "uniform", dtype = "int32";
};

struct MapGenArgs {  // `moekit gen expert-map`
  std::int64_t global = 0, ranks = 0, rank = 0;
  std::string placement = "linear";
};

struct LoadGenArgs {  // `moekit gen load`
  std::int64_t tokens = 0, layers = 1;
  std::int32_t topk = 0, num_experts = 0;
  std::string dist = "uniform";
};

Outputs to_outputs(const npy::Array& sorted, const npy::Array& eids, const npy::Array& ntpp) {
  Outputs o;
  auto s = sorted.as<std::int32_t>();
  auto e = eids.as<std::int32_t>();
  o.sorted_token_ids.assign(s.begin(), s.end());
  o.expert_ids.assign(e.begin(), e.end());
  o.num_tokens_post_pad = ntpp.as<std::int32_t>()[0];
  return o;
}

class AlignJob final : public ProblemJob<align::Problem> {
 public:
  AlignJob(npy::Array ids, std::vector<std::int64_t> ids_w, std::vector<std::int32_t> map, Problem p)
      : ProblemJob(p), ids_(std::move(ids)), ids_w_(std::move(ids_w)), map_(std::move(map)) {}

  void reference() override { ref_ = align::reference(p_, ids_w_, map_); }
  void adopt_reference() override { got_ = ref_; }

  // The variant is picked and checked on the problem it runs (align::variant_problem:
  // E + 1 groups with the bucket, the global experts and no map with vllm semantics).
  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    caps_ = &caps;
    return var_.resolve("align", requested, align::variant_problem(p_), caps, pdl, align::registry());
  }
  std::size_t input_bytes() const override { return ids_.data.size(); }
  void upload(int copies) override {
    d_.emplace(p_, align::HostInputs{ids_.data, map_}, align::workspace_need(*var_.v, p_, *caps_),
               SetOptions::run(copies));
  }
  LaunchStatus launch(Stream s, bool pdl, int copy) override {
    return align::launch_ep(*var_.v, p_, d_->buffers(copy), s, pdl);
  }
  void download() override { (void)d_->download(got_); }  // no guards in a run's set: always ""
  double bytes_moved() const override { return align::bytes_moved(p_); }
  CheckResult check(bool exact_order) override { return align::check(p_, ref_, got_, exact_order); }
  std::vector<NamedArray> outputs() override {
    return {{"sorted_token_ids.npy", make_array(npy::DType::i4, {p_.max_num_tokens_padded}, got_.sorted_token_ids)},
            {"expert_ids.npy", make_array(npy::DType::i4, {p_.max_num_blocks}, got_.expert_ids)},
            {"num_tokens_post_pad.npy",
             make_array(npy::DType::i4, {1}, std::vector<std::int32_t>{got_.num_tokens_post_pad})}};
  }
  std::vector<std::pair<std::string, std::string>> summary() const override {
    const std::int64_t blocks = got_.num_tokens_post_pad / p_.block_size;
    std::int64_t experts = 0;  // runs of one expert; blocks of -1 (the bucket, non-local experts) are none
    for (std::int64_t b = 0; b < blocks && b < std::int64_t(got_.expert_ids.size()); ++b)
      experts += got_.expert_ids[b] >= 0 && (b == 0 || got_.expert_ids[b] != got_.expert_ids[b - 1]);
    return {{"num_tokens_post_pad", std::to_string(got_.num_tokens_post_pad)},
            {"blocks", std::to_string(blocks)},
            {"experts_used", std::to_string(experts)}};
  }
  CheckResult check_files(const std::vector<std::string>& paths) override {
    Outputs back = to_outputs(npy::read(paths[0]), npy::read(paths[1]), npy::read(paths[2]));
    return align::check(p_, ref_, back, true);
  }

 private:
  npy::Array ids_;
  std::vector<std::int64_t> ids_w_;
  std::vector<std::int32_t> map_;
  Outputs ref_, got_;
  ResolvedVariant<align::Variant> var_;
  const DeviceCaps* caps_ = nullptr;
  std::optional<align::DeviceBuffers> d_;
};

class AlignFamily final : public RegistryFamily<align::Registry> {
 public:
  AlignFamily()
      : RegistryFamily(
            {.command = "align",
             .summary = "moe_align_block_size: sort token slots by expert, pad to blocks",
             .outputs_help = "Outputs: sorted_token_ids.npy, expert_ids.npy, num_tokens_post_pad.npy.",
             .examples = {"align --topk-ids data/trace_4096x8_e256.npy --num-experts 256 --block-size 128 --bench",
                 "gen align --tokens 4096 --topk 8 --num-experts 256 --dist zipf:1.2 -o trace.npy", "variants align"}},
            align::registry()) {}

  void add_options(CLI::App& s) override {
    auto* in = s.add_option("--topk-ids", a_.topk_ids, "router expert ids, int32 or int64, any shape (.npy)");
    s.add_option("--num-experts,-E", a_.num_experts,
                 fmt::format("number of experts E, 1..{} (local count, or global with --map-semantics vllm; "
                             "{} with --invalid bucket)",
                             align::kMaxExperts, align::kMaxExperts - 1))
        ->required();
    s.add_option("--block-size,-B", a_.block_size, "block size B (1..1024)")->capture_default_str();
    align::add_ep_options(s, a_.ep, true);
    s.add_flag("--pad-sorted-ids", a_.pad_sorted_ids, "round the sorted_token_ids length up to a multiple of B");
    // Generator options make no sense with an input file: refused, not ignored.
    s.add_option("--tokens", a_.tokens, "without --topk-ids: generate this many tokens")->excludes(in);
    s.add_option("--topk", a_.topk, "without --topk-ids: experts per token")->capture_default_str()->excludes(in);
    s.add_option("--dist", a_.dist,
                 "without --topk-ids: uniform, zipf:S, hot:F or load:FILE[:LAYER] (a recorded per-expert load)")
        ->capture_default_str()
        ->excludes(in);
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    s.description("router trace: [tokens, topk] expert ids, distinct per token");
    s.add_option("--tokens", g_.tokens, "tokens")->required();
    s.add_option("--topk", g_.topk, "experts per token")->required();
    s.add_option("--num-experts,-E", g_.num_experts, "experts, 1..65536")->required();
    s.add_option("--dist", g_.dist,
                 "uniform, zipf:S, hot:F or load:FILE[:LAYER] (a recorded per-expert load, [E] or [layers, E])")
        ->capture_default_str();
    s.add_option("--dtype", g_.dtype, "int32 or int64")->check(CLI::IsMember({"int32", "int64"}))
        ->capture_default_str();
    return [this](std::uint64_t seed) {
      return gen::align_ids(g_.tokens, g_.topk, g_.num_experts, gen::parse_dist(g_.dist), seed,
                            g_.dtype == "int64");
    };
  }

  std::vector<ExtraGen> extra_gens() override {
    return {{"expert-map",
             [this](CLI::App& s) -> std::function<npy::Array(std::uint64_t)> {
               s.description("expert-parallel rank's --expert-map: int32 [global experts], the rank's local id of "
                             "each global expert, -1 where another rank holds it");
               s.add_option("--global-experts", m_.global, "global experts: the map's length")->required();
               s.add_option("--ranks", m_.ranks, "expert-parallel ranks sharing them")->required();
               s.add_option("--rank", m_.rank, "the rank whose map this is, 0..ranks-1")->capture_default_str();
               s.add_option("--placement", m_.placement,
                            "linear (contiguous ranges, the first global % ranks ranks one more) or round-robin "
                            "(expert e on rank e % ranks)")
                   ->check(CLI::IsMember({"linear", "round-robin"}))
                   ->capture_default_str();
               return [this](std::uint64_t) {
                 return gen::expert_map(m_.global, m_.ranks, m_.rank, m_.placement == "round-robin");
               };
             }},
            {"load", [this](CLI::App& s) -> std::function<npy::Array(std::uint64_t)> {
               s.description("per-expert loads for --dist load:FILE[:LAYER]: int64 [layers, E], each row the slot "
                             "counts of a [tokens, topk] trace drawn from --dist (own seed per layer)");
               s.add_option("--tokens", l_.tokens, "tokens per layer")->required();
               s.add_option("--topk", l_.topk, "experts per token")->required();
               s.add_option("--num-experts,-E", l_.num_experts, "experts E")->required();
               s.add_option("--layers", l_.layers, "layers (rows)")->capture_default_str();
               s.add_option("--dist", l_.dist, "uniform, zipf:S, hot:F or load:FILE[:LAYER], as in gen align")
                   ->capture_default_str();
               return [this](std::uint64_t seed) {
                 return gen::expert_load(l_.tokens, l_.topk, l_.num_experts, l_.layers, gen::parse_dist(l_.dist), seed);
               };
             }}};
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  GenArgs g_;
  MapGenArgs m_;
  LoadGenArgs l_;
};

// Host memory of a run, held at once: the ids as read (id_bytes each) and
// widened to int64, and the outputs (sorted ids, expert ids; int32) four
// times -- the reference, the run's own (a copy on the CPU), the output set's
// copy and the files read back for the check -- plus the reference's block
// groups.
double run_bytes(const Problem& p, int id_bytes) {
  return double(p.numel) * (id_bytes + 8.0) + 16.0 * double(p.max_num_tokens_padded + p.max_num_blocks) +
         4.0 * double(p.max_num_blocks);
}

std::unique_ptr<Job> AlignFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  if (a.num_experts < 1 || a.num_experts > align::kMaxExperts)
    throw InputError(fmt::format("--num-experts must be in [1, {}] (no align variant takes more)", align::kMaxExperts));

  // Input: a file, or a synthetic trace from the shape options.
  npy::Array ids;
  std::string label = display_path(a.topk_ids);  // one printable line in messages
  if (a.topk_ids.empty()) {
    if (a.tokens < 0) throw InputError("align: give --topk-ids FILE, or --tokens N to generate a trace");
    if (a.topk < 1 || a.topk > a.num_experts)
      throw InputError(fmt::format("--topk {} must be in [1, --num-experts {}] (each token's experts are distinct)",
                                   a.topk, a.num_experts));
    // Shapes whose outputs cannot fit int32 fail here, before gigabytes are generated.
    if (a.topk >= 1 && double(a.tokens) * a.topk <= double(std::numeric_limits<std::int32_t>::max())) {
      const Problem p0 = planned([&] {
        return align::make_problem(a.tokens * a.topk, a.num_experts, a.block_size, false, 0, a.pad_sorted_ids,
                                   *align::parse_invalid(a.ep.ignore_invalid ? "drop" : a.ep.invalid));
      });
      require_host_memory(run_bytes(p0, 4), "this align run");  // before generating the trace
    }
    ids = gen::align_ids(a.tokens, a.topk, a.num_experts, gen::parse_dist(a.dist), c.seed, false);
    label = fmt::format("generated input ({} tokens x top-{}, {}, seed {})", a.tokens, a.topk, printable(a.dist), c.seed);
    r.notes.push_back(label);
  } else {
    ids = npy::read(a.topk_ids);
  }
  if (ids.dtype != npy::DType::i4 && ids.dtype != npy::DType::i8)
    throw InputError(fmt::format("{}: topk_ids must be int32 or int64, got {}", label, npy::dtype_name(ids.dtype)));
  const bool ids64 = ids.dtype == npy::DType::i8;
  const std::int64_t numel = ids.numel();
  const align::Ep ep = align::read_ep(a.ep, a.num_experts);
  const Problem p = planned([&] {
    return align::make_problem(numel, a.num_experts, a.block_size, ids64, static_cast<std::int32_t>(ep.map.size()),
                               a.pad_sorted_ids, ep.invalid, ep.map_semantics);
  });
  require_host_memory(run_bytes(p, ids64 ? 8 : 4), "this align run");
  std::vector<std::int64_t> ids_w(static_cast<std::size_t>(numel));
  if (ids64) {
    auto s = ids.as<std::int64_t>();
    std::copy(s.begin(), s.end(), ids_w.begin());
  } else {
    auto s = ids.as<std::int32_t>();
    std::copy(s.begin(), s.end(), ids_w.begin());
  }

  if (const std::string note = align::check_ids(ep, a.num_experts, ids_w, label,
                                                [](std::size_t i) { return fmt::format("index {}", i); });
      !note.empty())
    r.notes.push_back(note);

  // tokens and topk name a sweep's cells apart (numel alone does not: 8 x 2 = 16 x 1)
  // and give plots their x; null when the ids are not [tokens, topk].
  const bool two_d = ids.shape.size() == 2;
  r.params = {{"tokens", two_d ? std::optional(std::to_string(ids.shape[0])) : std::nullopt},
              {"topk", two_d ? std::optional(std::to_string(ids.shape[1])) : std::nullopt},
              {"numel", std::to_string(numel)},
              {"num_experts", std::to_string(a.num_experts)},
              {"block_size", std::to_string(a.block_size)}};
  for (auto& kv : align::ep_params(ep)) r.params.push_back(std::move(kv));
  r.params.push_back({"max_num_tokens_padded", std::to_string(p.max_num_tokens_padded)});
  r.dtype = npy::dtype_name(ids.dtype);
  return std::make_unique<AlignJob>(std::move(ids), std::move(ids_w), ep.map, p);
}

}  // namespace

std::unique_ptr<Family> make_align_family() { return std::make_unique<AlignFamily>(); }

}  // namespace moekit
