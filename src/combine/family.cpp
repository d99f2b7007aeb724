// `moekit combine`: expert output rows gathered back to their tokens,
// weighted (docs/combine.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cmath>
#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>

#include "rows_gen.hpp"
#include "combine/buffers.hpp"
#include "combine/combine.hpp"
#include "combine/gen.hpp"
#include "combine/reference.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "gen_common.hpp"
#include "host_memory.hpp"
#include "sizes.hpp"

namespace moekit {
namespace {

struct Args {
  std::string expert_out, dtype, inverse, weights;
  double scaling = 1.0;
  std::int64_t tokens = -1, hidden_size = 4096;
  std::int32_t topk = 8;
  std::string gen_dtype = "bf16";
};

struct GenArgs {
  std::int64_t rows = -1, hidden_size = 0;
  std::string dtype = "bf16";
};

struct SlotGenArgs {  // `moekit gen inverse`, `moekit gen topk-weights`
  std::int64_t tokens = -1;
  std::int32_t topk = 0;
};

class CombineJob final : public ProblemJob<combine::Problem> {
 public:
  CombineJob(npy::Array x, std::vector<std::int32_t> inv, std::vector<float> w, combine::Problem p)
      : ProblemJob(p), x_(std::move(x)), inv_(std::move(inv)), w_(std::move(w)) {
    out_.dtype = x_.dtype;
    out_.shape = {p_.tokens, p_.hidden};
    out_.data.resize(std::size_t(p_.tokens * p_.hidden) * npy::dtype_size(x_.dtype));
  }
  void reference() override {
    if (ref_.data.empty()) ref_ = out_;
    combine::reference(p_, x_.data.data(), inv_.data(), w_.data(), ref_.data.data());
  }
  void adopt_reference() override { out_ = ref_; }
  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    return var_.resolve("combine", requested, p_, caps, pdl, combine::registry());
  }
  std::size_t input_bytes() const override { return x_.data.size(); }
  void upload(int copies) override {
    d_.emplace(p_, combine::HostInputs{x_.data, inv_, w_}, var_.workspace_need(p_), SetOptions::run(copies));
  }
  LaunchStatus launch(Stream s, bool pdl, int copy) override { return var_.v->launch(p_, d_->buffers(copy), s, pdl); }
  void download() override { (void)d_->download(out_.data.data()); }  // no guard zones: nothing to report
  double bytes_moved() const override { return combine::bytes_moved(p_, inv_); }
  CheckResult check(bool exact) override {
    if (!exact) return combine::check_tolerant(p_, x_.data.data(), inv_.data(), w_.data(), out_.data.data());
    return combine::check(p_, ref_.data.data(), out_.data.data());
  }
  std::vector<NamedArray> outputs() override { return {{"out.npy", out_}}; }
  std::vector<std::pair<std::string, std::string>> summary() const override {
    return {{"out_elements", std::to_string(p_.tokens * p_.hidden)}};
  }
  CheckResult check_files(const std::vector<std::string>& paths) override {
    const npy::Array back = npy::read(paths[0]);
    return combine::check(p_, ref_.data.data(), back.data.data());
  }

 private:
  npy::Array x_, out_, ref_;
  std::vector<std::int32_t> inv_;
  std::vector<float> w_;
  ResolvedVariant<combine::Variant> var_;
  std::optional<combine::DeviceBuffers> d_;
};

class CombineFamily final : public RegistryFamily<combine::Registry> {
 public:
  CombineFamily()
      : RegistryFamily(
            {.command = "combine",
             .summary = "MoE combine: out[t] = S * sum_j w[t, j] * expert_out[inverse[t, j]] (f32 accumulation)",
             .outputs_help = "Output: out.npy [T, H], the dtype of expert-out.",
             .examples = {"combine --tokens 4096 --topk 8 --hidden-size 7168 --routed-scaling-factor 2.5 --bench"}},
            combine::registry()) {}

  void add_options(CLI::App& s) override {
    auto* x = s.add_option("--expert-out", a_.expert_out, "expert output rows [P, H], f32, bf16 or f16 (.npy)");
    s.add_option("--dtype", a_.dtype, "with --expert-out: read 2-byte data as this dtype")
        ->check(CLI::IsMember({"bf16", "f16"}))
        ->needs(x);
    auto* inv = s.add_option("--inverse", a_.inverse, "int32 [T, K]: the row of each slot, -1 = dropped (.npy)");
    auto* w = s.add_option("--topk-weights", a_.weights, "float32 [T, K] (.npy)");
    x->needs(inv)->needs(w);
    inv->needs(x);
    w->needs(x);
    s.add_option("--routed-scaling-factor", a_.scaling, "S")->capture_default_str();
    s.add_option("--tokens", a_.tokens, "without files: generate this many tokens (P = T*K rows, shuffled)")
        ->excludes(x);
    s.add_option("--topk", a_.topk, "without files: K")->capture_default_str()->excludes(x);
    s.add_option("--hidden-size", a_.hidden_size, "without files: H")->capture_default_str()->excludes(x);
    s.add_option("--gen-dtype", a_.gen_dtype, "without files: f32, bf16 or f16")
        ->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str()
        ->excludes(x);
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    s.description("expert output rows [rows, H], standard normal (the inverse map and weights: `moekit gen inverse`, "
                  "`moekit gen topk-weights`)");
    s.add_option("--rows", g_.rows, "rows P")->required();
    s.add_option("--hidden-size", g_.hidden_size, "H")->required();
    s.add_option("--dtype", g_.dtype, "f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}))
        ->capture_default_str();
    return [this](std::uint64_t seed) { return gen::normal_rows(g_.rows, g_.hidden_size, *npy::parse_dtype(g_.dtype), seed, "expert rows"); };
  }

  std::vector<ExtraGen> extra_gens() override {
    auto shape = [this](CLI::App& s) {
      s.add_option("--tokens", s_.tokens, "tokens T")->required();
      s.add_option("--topk", s_.topk, "slots per token K")->required();
    };
    return {{"inverse",
             [this, shape](CLI::App& s) -> std::function<npy::Array(std::uint64_t)> {
               s.description("combine's --inverse: int32 [T, K], each slot's row of the expert output, one to one "
                             "onto rows 0..T*K-1, shuffled (expert rows: `moekit gen combine --rows T*K`)");
               shape(s);
               return [this](std::uint64_t seed) { return gen::combine_inverse(s_.tokens, s_.topk, seed); };
             }},
            {"topk-weights", [this, shape](CLI::App& s) -> std::function<npy::Array(std::uint64_t)> {
               s.description("--topk-weights (combine and the commands built on it): float32 [T, K], positive, each row largest "
                             "first and summing to 1");
               shape(s);
               return [this](std::uint64_t seed) { return gen::topk_weights(s_.tokens, s_.topk, seed); };
             }}};
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  GenArgs g_;
  SlotGenArgs s_;
};

std::unique_ptr<Job> CombineFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  if (!std::isfinite(a.scaling) || !std::isfinite(static_cast<float>(a.scaling)))
    throw InputError(fmt::format("--routed-scaling-factor: {} is not a finite f32 number", a.scaling));
  npy::Array x;
  std::vector<std::int32_t> inv;
  std::vector<float> w;
  std::int64_t T = 0;
  std::int32_t K = 0;
  if (a.expert_out.empty()) {
    if (a.tokens < 0) throw InputError("combine: give --expert-out, --inverse and --topk-weights, or --tokens N");
    if (a.topk < 1) throw InputError(fmt::format("--topk must be >= 1, got {}", a.topk));
    const auto t = npy::parse_dtype(a.gen_dtype);
    gen::check_size(double(a.tokens) * a.topk * double(a.hidden_size), "expert rows");
    // Held at once: the rows (and, for an odd H, the even-width rows they are
    // cut from), the map and weights (8 bytes a slot), and four [T, H] arrays:
    // the output, the reference, the output set's copy, the file read back.
    const double es = double(npy::dtype_size(*t)), slots = double(a.tokens) * a.topk, H = double(a.hidden_size);
    require_host_memory(slots * H * es + (a.hidden_size % 2 ? slots * (H + 1) * es : 0.0) + 8.0 * slots +
                            4.0 * double(a.tokens) * H * es,
                        "this combine run");
    T = a.tokens;
    K = a.topk;
    x = gen::normal_rows(T * K, a.hidden_size, *t, c.seed, "expert rows");
    inv.resize(std::size_t(T * K));
    std::iota(inv.begin(), inv.end(), 0);
    gen::Rng rng{gen::stream_key(c.seed, 0xc0b1)};
    gen::shuffle(inv.data(), inv.size(), rng);
    w.resize(inv.size());
    for (float& v : w) v = static_cast<float>(rng.unit());
    r.notes.push_back(fmt::format("generated input ({} tokens x top-{}, H {}, {}, rows shuffled, seed {})", T, K,
                                  a.hidden_size, a.gen_dtype, c.seed));
  } else {
    const std::string xl = display_path(a.expert_out), il = display_path(a.inverse), wl = display_path(a.weights);
    npy::ReadOptions ro;
    if (!a.dtype.empty()) ro.reinterpret = npy::parse_dtype(a.dtype);
    // Shapes first: the memory the run needs is known before anything is read.
    const npy::Info xi = npy::inspect(a.expert_out, ro), ii = npy::inspect(a.inverse), wi = npy::inspect(a.weights);
    if (xi.dtype != npy::DType::f4 && xi.dtype != npy::DType::bf16 && xi.dtype != npy::DType::f2)
      throw InputError(fmt::format("{}: expert output must be float32, bfloat16 or float16, got {}", xl,
                                   npy::dtype_name(xi.dtype)));
    if (xi.shape.size() != 2) throw InputError(fmt::format("{}: expert output must be 2-D [P, H]", xl));
    if (xi.shape[1] < 1)
      throw InputError(fmt::format("{}: expert output rows must have H >= 1, got shape {}", xl,
                                   npy::format_shape(xi.shape)));
    if (ii.dtype != npy::DType::i4 || ii.shape.size() != 2)
      throw InputError(fmt::format("{}: the inverse map must be int32 [T, K]", il));
    if (ii.shape[1] < 1)
      throw InputError(fmt::format("{}: the inverse map must have K >= 1 slots per token, got shape {}", il,
                                   npy::format_shape(ii.shape)));
    if (wi.dtype != npy::DType::f4 || wi.shape != ii.shape)
      throw InputError(fmt::format("{}: the weights must be float32 [T, K] = [{}, {}]", wl, ii.shape[0], ii.shape[1]));
    T = ii.shape[0];
    K = narrow_to_int32(ii.shape[1], il + ": K (the inverse map's last dimension)");
    const double es = double(npy::dtype_size(xi.dtype));
    const double P = double(xi.shape[0]), H = double(xi.shape[1]), slots = double(T) * double(K);
    // Held at once: the rows, the map and weights as read and as kept (4 x 4
    // bytes a slot), the duplicate check's sorted copy (8 a slot), and four
    // [T, H] arrays: the output, the reference, the output set's copy and the
    // written file read back for the check.
    require_host_memory(P * H * es + 24.0 * slots + 4.0 * double(T) * H * es,
                        fmt::format("this combine run ({}: {} rows x H {}; {} tokens x top-{})", xl, xi.shape[0], xi.shape[1], T, K));
    x = npy::read(a.expert_out, ro);
    // NaN payloads are not reproducible bit for bit.
    if (const auto i = npy::first_non_finite(x))
      throw InputError(fmt::format("{}: expert_out[{}, {}] is {}: rows must be finite", xl, *i / x.shape[1],
                                   *i % x.shape[1], npy::float_at(x, *i)));
    const npy::Array ia = npy::read(a.inverse), wa = npy::read(a.weights);
    const auto iv = ia.as<std::int32_t>();
    const auto wv = wa.as<float>();
    inv.assign(iv.begin(), iv.end());
    w.assign(wv.begin(), wv.end());
    for (std::size_t i = 0; i < inv.size(); ++i)
      if (inv[i] < -1 || inv[i] >= x.shape[0])
        throw InputError(fmt::format("{}: inverse[{}, {}] = {} is neither -1 nor a row of {} ({} rows)", il, i / K,
                                     i % K, inv[i], xl, x.shape[0]));
    // permute writes a one-to-one map; `scatter` reads each row once, for one
    // slot. Sorted (row, slot) pairs find a repeat in memory of the map's size,
    // never of the row count (a [2^30, H] header costs nothing to write).
    std::vector<std::pair<std::int32_t, std::int64_t>> used;
    used.reserve(inv.size());
    for (std::size_t i = 0; i < inv.size(); ++i)
      if (inv[i] >= 0) used.emplace_back(inv[i], static_cast<std::int64_t>(i));
    std::sort(used.begin(), used.end());
    std::int64_t i = -1;  // the first slot (in slot order) naming a row an earlier slot named
    for (std::size_t u = 1; u < used.size(); ++u)
      if (used[u].first == used[u - 1].first && (i < 0 || used[u].second < i)) i = used[u].second;
    if (i >= 0) {
      const std::int32_t row = inv[std::size_t(i)];
      const std::int64_t f = std::lower_bound(used.begin(), used.end(), std::pair{row, std::int64_t(-1)})->second;
      throw InputError(fmt::format("{}: inverse[{}, {}] and inverse[{}, {}] both name row {}: an inverse map (as "
                                   "permute writes it) names each row at most once",
                                   il, f / K, f % K, i / K, i % K, row));
    }
    for (std::size_t i = 0; i < w.size(); ++i)
      if (!std::isfinite(w[i]))
        throw InputError(fmt::format("{}: weight [{}, {}] is {}: weights must be finite", wl, i / K, i % K, w[i]));
  }
  combine::Problem p;
  p.tokens = T;
  p.topk = K;
  p.rows = x.shape[0];
  p.hidden = x.shape[1];
  p.dtype = x.dtype == npy::DType::f4 ? combine::DType::f32
            : x.dtype == npy::DType::bf16 ? combine::DType::bf16 : combine::DType::f16;
  p.scaling = static_cast<float>(a.scaling);
  r.params = {{"tokens", std::to_string(T)}, {"topk", std::to_string(K)}, {"rows", std::to_string(p.rows)},
              {"hidden", std::to_string(p.hidden)}, {"scaling", fmt::format("{:g}", p.scaling)}};
  r.dtype = std::string(npy::dtype_name(x.dtype));
  return std::make_unique<CombineJob>(std::move(x), std::move(inv), std::move(w), p);
}

}  // namespace

std::unique_ptr<Family> make_combine_family() { return std::make_unique<CombineFamily>(); }

}  // namespace moekit
