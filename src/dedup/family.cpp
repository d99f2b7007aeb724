// `moekit dedup`: per-batch de-duplication of speculative top-k index rows
// (docs/dedup.md).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "dedup/buffers.hpp"
#include "dedup/dedup.hpp"
#include "dedup/reference.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "host_memory.hpp"
#include "dedup/gen.hpp"

namespace moekit {
namespace {

struct Args {
  std::string indices;
  std::int32_t mtp_step = 0;
  std::int64_t max_index = -1;
  // synthetic input (no --indices)
  std::int32_t batch = -1;
  std::int32_t k = 2048;
  double overlap = 0.8;
};

struct GenArgs {
  std::int32_t batch = 0, mtp_step = 1, k = 0;
  std::int64_t max_index = std::int64_t(1) << 31;
  double overlap = 0.0, pad = 0.0;
};

class DedupJob final : public ProblemJob<dedup::Problem> {
 public:
  DedupJob(npy::Array in, dedup::Problem p) : ProblemJob(p), in_(std::move(in)) {}

  void reference() override { ref_ = dedup::reference(p_, in_.as<std::int32_t>()); }
  void adopt_reference() override { got_ = ref_; }

  Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) override {
    return var_.resolve("dedup", requested, p_, caps, pdl, dedup::registry());
  }
  std::size_t input_bytes() const override { return in_.data.size(); }
  void upload(int copies) override {
    const auto in = in_.as<std::int32_t>();
    d_.emplace(p_, std::span<const std::int32_t>(in.data(), in.size()), var_.workspace_need(p_),
               SetOptions::run(copies));
  }
  LaunchStatus launch(Stream s, bool pdl, int copy) override { return var_.v->launch(p_, d_->buffers(copy), s, pdl); }
  void download() override { (void)d_->download(got_); }  // no guards in a run's set: always ""
  double bytes_moved() const override { return dedup::bytes_moved(p_); }
  CheckResult check(bool) override { return dedup::check(p_, ref_, got_); }
  std::vector<NamedArray> outputs() override {
    return {{"dedup.npy", make_array(npy::DType::i4, {p_.batch, p_.row_len()}, got_)}};
  }
  std::vector<std::pair<std::string, std::string>> summary() const override {
    std::int64_t total = 0, most = 0;
    const std::int64_t row = p_.row_len();
    for (std::int64_t b = 0; b < p_.batch; ++b) {
      std::int64_t n = 0;
      for (std::int64_t j = 0; j < row && got_[b * row + j] >= 0; ++j) ++n;
      total += n;
      most = std::max(most, n);
    }
    return {{"distinct_values", std::to_string(total)}, {"most_in_a_batch", std::to_string(most)}};
  }
  CheckResult check_files(const std::vector<std::string>& paths) override {
    auto back = npy::read(paths[0]);
    return dedup::check(p_, ref_, back.as<std::int32_t>());
  }

 private:
  npy::Array in_;
  std::vector<std::int32_t> ref_, got_;
  ResolvedVariant<dedup::Variant> var_;
  std::optional<dedup::DeviceBuffers> d_;
};

class DedupFamily final : public RegistryFamily<dedup::Registry> {
 public:
  DedupFamily()
      : RegistryFamily(
            {.command = "dedup",
             .summary = "per-batch top-k index de-duplication (speculative decoding)",
             .outputs_help = "Output: dedup.npy, int32 [bs, M*k]: each batch's distinct values ascending, then -1.",
             .examples = {"dedup --indices data/dedup_bs115_m2_k2048.npy --mtp-step 2 --variant auto --out out/"}},
            dedup::registry()) {}

  void add_options(CLI::App& s) override {
    auto* in = s.add_option("--indices", a_.indices, "int32 [bs*M, k] or [bs, M, k] (.npy); negative values are ignored");
    s.add_option("--mtp-step,-M", a_.mtp_step, "rows per batch M")->required();
    s.add_option("--max-index", a_.max_index, "promise: every value < N (checked); lets variants sort fewer bits");
    // Generator options make no sense with an input file: refused, not ignored.
    s.add_option("--batch", a_.batch, "without --indices: generate this many batches")->excludes(in);
    s.add_option("--k", a_.k, "without --indices: values per row")->capture_default_str()->excludes(in);
    s.add_option("--overlap", a_.overlap, "without --indices: fraction shared by consecutive rows")
        ->capture_default_str()
        ->excludes(in);
  }

  std::function<npy::Array(std::uint64_t)> add_gen(CLI::App& s) override {
    s.description("speculative top-k rows: [bs*M, k] int32");
    s.add_option("--batch", g_.batch, "batches bs")->required();
    s.add_option("--mtp-step,-M", g_.mtp_step, "rows per batch M")->capture_default_str();
    s.add_option("--k", g_.k, "values per row")->required();
    s.add_option("--max-index", g_.max_index, "values are drawn from [0, N)")->capture_default_str();
    s.add_option("--overlap", g_.overlap, "fraction of a row's values carried from the previous row")
        ->capture_default_str();
    s.add_option("--pad", g_.pad, "fraction of each row's tail set to -1")->capture_default_str();
    return [this](std::uint64_t seed) {
      return gen::dedup_indices(g_.batch, g_.mtp_step, g_.k, g_.max_index, g_.overlap, g_.pad, seed);
    };
  }

  std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) override;

 private:
  Args a_;
  GenArgs g_;
};

std::unique_ptr<Job> DedupFamily::prepare(const CommonOpts& c, Report& r) {
  const Args& a = a_;
  if (a.mtp_step < 1) throw InputError("--mtp-step must be >= 1");
  if (a.max_index == 0 || a.max_index < -1 || a.max_index > (std::int64_t(1) << 31))
    throw InputError("--max-index must be in [1, 2^31]");

  npy::Array in;
  std::string label = display_path(a.indices);  // one printable line in messages
  if (a.indices.empty()) {
    if (a.batch < 0) throw InputError("dedup: give --indices FILE, or --batch N to generate input");
    std::int64_t hi = a.max_index > 0 ? a.max_index : (std::int64_t(1) << 31);
    // Held at once: the input and four outputs of its size (the reference,
    // the run's own, the output set's copy, the file read back for the check).
    // (Sizes no variant takes are the generator's to refuse first, as "too large".)
    if (a.batch >= 0 && a.k >= 1 && double(a.mtp_step) * a.k <= double(std::numeric_limits<std::int32_t>::max()))
      require_host_memory(5 * 4.0 * double(a.batch) * a.mtp_step * a.k, "this dedup run");
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

  if (a.max_index > 0) {
    auto vals = in.as<std::int32_t>();
    for (std::size_t i = 0; i < vals.size(); ++i)
      if (vals[i] >= a.max_index)
        throw InputError(fmt::format("{}: value {} at flat index {} breaks the promise --max-index {}", label,
                                     vals[i], i, a.max_index));
  }

  // The input and four outputs (as above); a generated input was checked before generating.
  if (!a.indices.empty()) require_host_memory(5.0 * double(in.data.size()), "this dedup run");
  dedup::Problem p;
  p.batch = static_cast<std::int32_t>(batch);
  p.mtp_step = a.mtp_step;
  p.k = static_cast<std::int32_t>(k);
  p.max_index = a.max_index;
  r.params = {{"batch", std::to_string(batch)},
              {"mtp_step", std::to_string(a.mtp_step)},
              {"k", std::to_string(k)},
              {"max_index", a.max_index > 0 ? std::optional(std::to_string(a.max_index)) : std::nullopt}};
  r.dtype = "int32";
  return std::make_unique<DedupJob>(std::move(in), p);
}

}  // namespace

std::unique_ptr<Family> make_dedup_family() { return std::make_unique<DedupFamily>(); }

}  // namespace moekit
