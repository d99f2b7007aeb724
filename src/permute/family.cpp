// `moekit permute`: hidden rows scattered into expert order (docs/permute.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstring>
#include <optional>

#include "rows_gen_cli.hpp"
#include "align/ep_cli.hpp"
#include "align/gen.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
#include "planned.hpp"
#include "sizes.hpp"
#include "permute/buffers.hpp"
#include "permute/permute.hpp"
#include "permute/reference.hpp"

namespace moekit {
namespace {

struct Args {
  std::string hidden, dtype, topk_ids;
  align::EpArgs ep;  // --expert-map, --invalid, --map-semantics
  std::int32_t experts = 0, block_size = 64;
  std::string layout = "padded";
  std::int64_t tokens = -1, hidden_size = 4096;
  std::int32_t topk = 8;
  std::string dist = "uniform", gen_dtype = "bf16";
};


class PermuteJob final : public ProblemJob<permute::Problem> {
 public:
  PermuteJob(npy::Array hidden, npy::Array ids, std::vector<std::int64_t> wide, std::vector<std::int32_t> map,
             permute::Problem p)
      : ProblemJob(p), hidden_(std::move(hidden)), ids_(std::move(ids)), wide_(std::move(wide)), map_(std::move(map)) {}

  void reference() override { ref_ = permute::reference(p_, hidden_.data.data(), wide_, map_); }
  void adopt_reference() override { got_ = ref_; }
  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    return var_.resolve("permute", requested, p_, caps, pdl, permute::registry());
  }
  std::size_t input_bytes() const override { return hidden_.data.size() + ids_.data.size(); }
  void upload(int copies) override {
    const auto ids = ids_.as<std::int32_t>();
    d_.emplace(p_, permute::HostInputs{hidden_.data, {ids.data(), ids.size()}, map_}, var_.workspace_need(p_),
               SetOptions::run(copies));
  }
  LaunchStatus launch(Stream s, bool pdl, int copy) override { return var_.v->launch(p_, d_->buffers(copy), s, pdl); }
  void download() override { (void)d_->download(got_); }  // a count out of range: check() names it
  double bytes_moved() const override { return permute::bytes_moved(p_); }
  CheckResult check(bool) override { return permute::check(p_, hidden_.data.data(), wide_, ref_, got_, map_); }
  std::vector<NamedArray> outputs() override {
    const std::int64_t rows = got_.aligned.num_tokens_post_pad;
    npy::Array perm;
    perm.dtype = hidden_.dtype;
    perm.shape = {rows, hidden_.shape[1]};
    perm.data = got_.permuted;
    std::vector<NamedArray> o;
    if (p_.layout == permute::Layout::padded) {
      o.push_back({"sorted_token_ids.npy", make_array(npy::DType::i4, {p_.align.max_num_tokens_padded},
                                                      got_.aligned.sorted_token_ids)});
      o.push_back({"expert_ids.npy", make_array(npy::DType::i4, {p_.align.max_num_blocks}, got_.aligned.expert_ids)});
      o.push_back({"num_tokens_post_pad.npy",
                   make_array(npy::DType::i4, {1}, std::vector<std::int32_t>{got_.aligned.num_tokens_post_pad})});
    } else {
      o.push_back({"expert_offsets.npy",
                   make_array(npy::DType::i8, {std::int64_t(p_.align.num_experts) + 1}, got_.offsets)});
    }
    o.push_back({"permuted.npy", std::move(perm)});
    o.push_back({"inverse.npy", make_array(npy::DType::i4, {p_.tokens, p_.topk}, got_.inverse)});
    return o;
  }
  std::vector<std::pair<std::string, std::string>> summary() const override {
    return {{"rows", std::to_string(got_.aligned.num_tokens_post_pad)}, {"slots", std::to_string(p_.align.numel)}};
  }
  CheckResult check_files(const std::vector<std::string>& paths) override {
    // The files hold the reference's outputs; read back the rows and the inverse map.
    Outputs back = ref_;
    const npy::Array perm = npy::read(paths[paths.size() - 2]);
    const npy::Array inv = npy::read(paths.back());
    back.permuted = perm.data;
    const auto iv = inv.as<std::int32_t>();
    back.inverse.assign(iv.begin(), iv.end());
    return permute::check(p_, hidden_.data.data(), wide_, ref_, back, map_);
  }

 private:
  using Outputs = permute::Outputs;
  npy::Array hidden_, ids_;
  std::vector<std::int64_t> wide_;
  std::vector<std::int32_t> map_;
  Outputs ref_, got_;
  ResolvedVariant<permute::Variant> var_;
  std::optional<permute::DeviceBuffers> d_;
};

class PermuteFamily final : public RegistryFamily<permute::Registry> {
 public:
  PermuteFamily()
      : RegistryFamily(
            {.command = "permute",
             .summary = "MoE dispatch: hidden rows scattered into expert order (padded or compact layout)",
             .outputs_help = "Outputs: permuted.npy [rows, H] and inverse.npy int32 [T, K]; padded: align's sorted_token_ids.npy, "
                 "expert_ids.npy, num_tokens_post_pad.npy; compact: expert_offsets.npy int64 [E + 1].",
             .examples = {"permute --tokens 4096 --topk 8 -E 256 --hidden-size 7168 --layout compact --bench"}},
            permute::registry()) {}

  void add_options(CLI::App& s) override {
    auto* in = s.add_option("--hidden", a_.hidden, "hidden states [T, H], f32, bf16 or f16 (.npy)");
    s.add_option("--dtype", a_.dtype, "with --hidden: read 2-byte data as this dtype (bf16 saved as int16/uint16/void)")
        ->check(CLI::IsMember({"bf16", "f16"}))
        ->needs(in);
    auto* ids = s.add_option("--topk-ids", a_.topk_ids,
                             "expert ids [T, K], int32 or int64, each in [0, E) or the map (others: --invalid) (.npy)");
    in->needs(ids);
    ids->needs(in);
    s.add_option("-E,--num-experts", a_.experts,
                 "experts E (local count, or global with --map-semantics vllm; as align's --num-experts)")
        ->required();
    align::add_ep_options(s, a_.ep, false);
    s.add_option("-B,--block-size", a_.block_size, "padded layout: align's block size B")->capture_default_str();
    s.add_option("--layout", a_.layout, "padded (align's rows, padded to B per expert) or compact (real rows only)")
        ->check(CLI::IsMember({"padded", "compact"}))
        ->capture_default_str();
    s.add_option("--tokens", a_.tokens, "without files: generate this many tokens")->excludes(in);
    s.add_option("--topk", a_.topk, "without files: experts per token")->capture_default_str()->excludes(in);
    s.add_option("--hidden-size", a_.hidden_size, "without files: H")->capture_default_str()->excludes(in);
    s.add_option("--dist", a_.dist, "without files: uniform, zipf:S, hot:F or load:FILE[:LAYER]")
        ->capture_default_str()
        ->excludes(in);
    s.add_option("--gen-dtype", a_.gen_dtype, "without files: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str()
        ->excludes(in);
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    return gen::add_hidden_rows_gen(s, g_,
                                    "hidden states [tokens, H], standard normal (ids: `moekit gen align`; a map: "
                                    "`moekit gen expert-map`)");
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  gen::HiddenRowsGen g_;
};

// Host memory of a run, held at once: the hidden rows, the ids as read
// (id_bytes each), widened and as int32; the outputs -- permuted rows up to
// their capacity with align's sorted ids, and the inverse map -- five times:
// the reference, the run's own, the output set's copy, the reference's copy
// the files are checked in, and the files read back.
double run_bytes(const permute::Problem& p, int id_bytes) {
  const double slots = double(p.tokens) * p.topk, rows = double(p.align.max_num_tokens_padded);
  return double(p.tokens) * double(p.row_bytes) + slots * (id_bytes + 12.0) +
         5.0 * (rows * (double(p.row_bytes) + 4.0) + 4.0 * slots + 4.0 * double(p.align.max_num_blocks));
}

std::unique_ptr<Job> PermuteFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  if (a.experts < 1 || a.experts > align::kMaxExperts)
    throw InputError(fmt::format("--num-experts must be in [1, {}]", align::kMaxExperts));
  const permute::Layout layout = a.layout == "compact" ? permute::Layout::compact : permute::Layout::padded;
  npy::Array hidden, ids;
  std::string hl = display_path(a.hidden), il = display_path(a.topk_ids);
  if (a.hidden.empty()) {
    if (a.tokens < 0) throw InputError("permute: give --hidden FILE --topk-ids FILE, or --tokens N to generate both");
    if (a.topk < 1 || a.topk > a.experts)
      throw InputError(fmt::format("--topk {} must be in [1, --num-experts {}]", a.topk, a.experts));
    const auto t = npy::parse_dtype(a.gen_dtype);
    gen::check_size(double(a.tokens) * double(a.hidden_size), "hidden rows");
    const std::int64_t row_bytes = a.hidden_size * std::int64_t(npy::dtype_size(*t));
    const permute::Problem p0 = planned([&] {  // int32 limits first
      return permute::make_problem(a.tokens, a.topk, a.experts, a.block_size, row_bytes, layout, 0,
                                   *align::parse_invalid(a.ep.invalid));
    });
    require_host_memory(run_bytes(p0, 4), "this permute run");
    hidden = gen::normal_rows(a.tokens, a.hidden_size, *t, c.seed, "hidden rows");
    ids = gen::align_ids(a.tokens, a.topk, a.experts, gen::parse_dist(a.dist), c.seed, false);
    il = "generated expert ids";
    r.notes.push_back(fmt::format("generated input ({} tokens x H {}, {}, top-{} of {} {}, seed {})", a.tokens,
                                  a.hidden_size, a.gen_dtype, a.topk, a.experts, printable(a.dist), c.seed));
  } else {
    npy::ReadOptions ro;
    if (!a.dtype.empty()) ro.reinterpret = npy::parse_dtype(a.dtype);
    hidden = npy::read(a.hidden, ro);
    ids = npy::read(a.topk_ids);
    if (hidden.dtype != npy::DType::f4 && hidden.dtype != npy::DType::bf16 && hidden.dtype != npy::DType::f2)
      throw InputError(fmt::format("{}: hidden states must be float32, bfloat16 or float16, got {} (bf16 saved as "
                                   "int16/uint16/void: add --dtype bf16)", hl, npy::dtype_name(hidden.dtype)));
    if (hidden.shape.size() != 2)
      throw InputError(fmt::format("{}: hidden states must be 2-D [T, H], got {} dimension(s)", hl, hidden.shape.size()));
    if (ids.dtype != npy::DType::i4 && ids.dtype != npy::DType::i8)
      throw InputError(fmt::format("{}: expert ids must be int32 or int64, got {}", il, npy::dtype_name(ids.dtype)));
    if (ids.shape.size() != 2 || ids.shape[0] != hidden.shape[0])
      throw InputError(fmt::format("{}: expert ids must be [T, K] with T = {} (the rows of {})", il, hidden.shape[0], hl));
  }
  const std::int64_t T = hidden.shape[0], H = hidden.shape[1];
  const std::int32_t K = narrow_to_int32(ids.shape[1], il + ": K (the expert ids' last dimension)");
  const align::Ep ep = align::read_ep(a.ep, a.experts);
  const permute::Problem p = planned([&] {
    return permute::make_problem(T, K, a.experts, a.block_size, H * std::int64_t(npy::dtype_size(hidden.dtype)),
                                 layout, static_cast<std::int32_t>(ep.map.size()), ep.invalid, ep.map_semantics);
  });
  if (!a.hidden.empty()) require_host_memory(run_bytes(p, int(npy::dtype_size(ids.dtype))), "this permute run");
  std::vector<std::int64_t> wide(ids.numel());
  if (ids.dtype == npy::DType::i8) {
    const auto v = ids.as<std::int64_t>();
    std::copy(v.begin(), v.end(), wide.begin());
  } else {
    const auto v = ids.as<std::int32_t>();
    std::copy(v.begin(), v.end(), wide.begin());
  }
  if (const std::string note = align::check_ids(ep, a.experts, wide, il,
                                                [K](std::size_t i) { return fmt::format("[{}, {}]", i / K, i % K); });
      !note.empty())
    r.notes.push_back(note);
  if (ids.dtype == npy::DType::i8) {  // the kernels read int32: an id outside the map or [0, E) becomes -1, as invalid
    const std::int64_t bound = align::id_bound(ep, a.experts);
    npy::Array n;
    n.dtype = npy::DType::i4;
    n.shape = ids.shape;
    n.data.resize(ids.numel() * 4);
    for (std::size_t i = 0; i < wide.size(); ++i) {
      const std::int32_t x = wide[i] < 0 || wide[i] >= bound ? -1 : static_cast<std::int32_t>(wide[i]);
      std::memcpy(n.data.data() + i * 4, &x, 4);
    }
    ids = std::move(n);
  }
  r.params = {{"tokens", std::to_string(T)}, {"topk", std::to_string(K)}, {"experts", std::to_string(a.experts)},
              {"block_size", std::to_string(layout == permute::Layout::padded ? a.block_size : 1)},
              {"hidden", std::to_string(H)}, {"layout", a.layout}};
  for (auto& kv : align::ep_params(ep)) r.params.push_back(std::move(kv));
  r.dtype = std::string(npy::dtype_name(hidden.dtype));
  return std::make_unique<PermuteJob>(std::move(hidden), std::move(ids), std::move(wide), ep.map, p);
}

}  // namespace

std::unique_ptr<Family> make_permute_family() { return std::make_unique<PermuteFamily>(); }

}  // namespace moekit
