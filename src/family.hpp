// A kernel family's host side, as the CLI sees it. One class per family
// (src/<family>/family.cpp) registers the family's options, generator and
// variants; the run skeleton (run.cpp) drives every family's run through the
// Job interface below. The families list is families.txt at the top of the
// repository (docs/architecture.md). CUDA-free.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "check.hpp"
#include "common/device.hpp"
#include "common/variant.hpp"
#include "npy.hpp"
#include "report.hpp"

namespace CLI {
class App;
}

namespace moekit {

// Options every kernel command shares (registered by the skeleton).
struct CommonOpts {
  std::string variant = "auto";
  std::string device = "auto";  // auto | gpu | cpu
  std::string out;              // output folder; empty = write nothing
  bool check = true;
  bool bench = false;
  int warmup = 10;
  int iters = 100;
  bool cold = false;
  bool graph = true;
  bool profile = false;
  std::string format = "text";
  std::uint64_t seed = 1;
  std::string results;  // JSON-lines file each completed run's record is appended to; empty = none
  // What the command line may name as input files (main.cpp): --out never
  // replaces one, --results is never one.
  std::vector<std::string> inputs;
  // Programmatic dependent launch (sm_90+): "on" (default, as serving engines
  // run) lets every kernel launch overlap the previous kernel's tail where the
  // device has PDL; "off" launches without it. The skeleton turns it into the
  // one `pdl` its launches get (launch_pdl in driver.hpp).
  std::string pdl = "on";
};

// How the report names a PDL mode.
inline std::string_view pdl_name(bool on) { return on ? "on" : "off"; }

// What Job::resolve() found.
struct Resolved {
  std::string name;          // the variant that runs (a composed "<v>+<w>" included)
  bool exact_order = false;  // it promises the reference's order bit for bit
  // Whether its launches carry the PDL attribute (launches_with_pdl,
  // common/variant.hpp: the skeleton's pdl, or a variant's always_pdl, where
  // the device has PDL): the run report's "pdl".
  bool pdl = false;
  // It waits on the device from the host inside its launch (Variant::host_sync):
  // timed with events, never captured into a graph (timing_options, driver.hpp).
  bool host_sync = false;
};

// One line of `moekit variants`.
struct VariantRow {
  std::string name, description, limits;
  bool stable_order = false;
  std::string kernels;  // the registry's `kernels` spec (kernel_resources.hpp)
};

using NamedArray = std::pair<std::string, npy::Array>;  // output file name, contents

// One run of one family on one input: built by Family::prepare once the
// options are parsed and the input is read (or generated) and validated.
// The skeleton calls, in order: reference() when needed; then either
// adopt_reference() (CPU run) or resolve() .. download() (GPU run); outputs().
// The skeleton decides PDL once per run (launch_pdl: --pdl and the device)
// and hands the same `pdl` to resolve(), launch() and every stage.
class Job {
 public:
  virtual ~Job() = default;

  virtual void reference() = 0;        // CPU reference outputs (host)
  virtual void adopt_reference() = 0;  // the reference becomes the run's output

  // Picks the variant (a registry name or "auto") for this problem on this
  // device, for launches with `pdl` (an auto pick may depend on it); throws
  // InputError when unknown or not applicable (ResolvedVariant::resolve).
  // CPU runs call it with a caps object of no device and pdl false:
  // device-independent limits then refuse what a GPU run would. `caps`
  // outlives the job.
  virtual Resolved resolve(const std::string& requested, const DeviceCaps& caps, bool pdl) = 0;
  virtual std::size_t input_bytes() const = 0;  // one input copy (for rotation)
  virtual void upload(int copies) = 0;          // device inputs, outputs (poisoned), workspace
  // One launch of the resolved variant on `s`, with PDL when `pdl`
  // (Variant::launch), reading input copy `copy`.
  virtual LaunchStatus launch(Stream s, bool pdl, int copy) = 0;
  virtual void download() = 0;                  // device outputs -> host outputs
  virtual double bytes_moved() const = 0;       // per launch: inputs read once + outputs written once

  // Host outputs against the reference; exact_order from resolve().
  virtual CheckResult check(bool exact_order) = 0;
  virtual std::vector<NamedArray> outputs() = 0;
  // A few facts about the outputs for the report ("num_tokens_post_pad", "4096").
  virtual std::vector<std::pair<std::string, std::string>> summary() const = 0;
  // The written files read back, against the reference (CPU runs).
  virtual CheckResult check_files(const std::vector<std::string>& paths) = 0;

  // Named stages of launch(): launch sequences that together make one launch,
  // each able to run alone once launch() has run (the later stages read what
  // the earlier ones wrote). With --bench the skeleton times each as its own
  // graph, like the whole launch, and reports the times. Empty: no stages.
  struct Stage {
    std::string name;
    std::function<LaunchStatus(Stream, bool pdl, int copy)> launch;  // as launch()
  };
  virtual std::vector<Stage> stages() { return {}; }
};

// A Job over one family Problem `P`, kept in p_ (the family's resolve() picks
// for it, its launch() launches it).
template <class P>
class ProblemJob : public Job {
 protected:
  explicit ProblemJob(const P& p) : p_(p) {}

  P p_;
};

class Family {
 public:
  virtual ~Family() = default;

  virtual std::string_view command() const = 0;  // subcommand name (folder name, dashes for underscores)
  virtual std::vector<std::string> aliases() const { return {}; }
  virtual std::string_view summary() const = 0;  // one line for --help
  virtual std::string outputs_help() const = 0;  // "Outputs: ..." footer line
  virtual std::vector<std::string> examples() const = 0;  // command lines for `moekit --help`

  // Family options of `moekit <command>` (the skeleton adds the common ones).
  virtual void add_options(CLI::App& sub) = 0;
  // `moekit gen <command>`: registers its options; the returned function
  // builds the array once they are parsed.
  virtual std::function<npy::Array(std::uint64_t seed)> add_gen(CLI::App& sub) = 0;

  // More `moekit gen NAME` subcommands, for the family's other inputs (an
  // expert map, weights, ...): every file a command reads, gen can write.
  struct ExtraGen {
    std::string name;  // the gen subcommand, named after the option it feeds
    std::function<std::function<npy::Array(std::uint64_t seed)>(CLI::App& sub)> add;  // as add_gen
  };
  virtual std::vector<ExtraGen> extra_gens() { return {}; }

  // Validates the parsed options and the input (exit 2 on anything wrong),
  // fills r.params, r.dtype and notes, and returns the job.
  virtual std::unique_ptr<Job> prepare(const CommonOpts& c, Report& r) = 0;

  // Registered variants and the auto rule, from the kernel registry.
  virtual std::vector<VariantRow> variants(const DeviceCaps& caps) const = 0;
  virtual std::string auto_rule() const = 0;
};

// Registry rows -> `moekit variants` rows.
template <class V>
std::vector<VariantRow> variant_rows(std::span<const V> registry, const DeviceCaps& caps) {
  std::vector<VariantRow> rows;
  for (const V& v : registry)
    rows.push_back({std::string(v.info.name), std::string(v.info.description),
                    v.limits ? v.limits(caps) : std::string("any"), v.stable_order,
                    std::string(v.info.kernels)});
  return rows;
}

// What the help says about a family (Family's text members, as data).
struct FamilyText {
  std::string_view command;               // Family::command()
  std::string_view summary;               // Family::summary()
  std::string outputs_help;               // Family::outputs_help()
  std::vector<std::string> examples;      // Family::examples()
  std::vector<std::string> aliases = {};  // Family::aliases()
};

// A Family over a kernel registry `R` (kernels/common/registry.hpp): the text
// is data and `moekit variants` comes from the registry, so a family writes
// only what is its own: options, generators and prepare().
template <class R>
class RegistryFamily : public Family {
 public:
  std::string_view command() const final { return text_.command; }
  std::vector<std::string> aliases() const final { return text_.aliases; }
  std::string_view summary() const final { return text_.summary; }
  std::string outputs_help() const final { return text_.outputs_help; }
  std::vector<std::string> examples() const final { return text_.examples; }
  std::vector<VariantRow> variants(const DeviceCaps& caps) const final {
    return variant_rows(registry_.variants(), caps);
  }
  std::string auto_rule() const final { return registry_.auto_rule(); }

 protected:
  RegistryFamily(FamilyText text, const R& registry) : text_(std::move(text)), registry_(registry) {}

 private:
  FamilyText text_;
  const R& registry_;
};

// Every family, in families.txt order.
const std::vector<std::unique_ptr<Family>>& families();
// nullptr when no family has this command name or alias.
Family* find_family(std::string_view command);

// The run skeleton: device choice, reference, variant, launch, check, timing,
// outputs, report. Returns the exit code.
// `ran_variant`, when given, receives the variant that ran (the report's
// "variant": "reference" on the CPU), for a sweep's collapsed-axis note.
int run_family(Family& f, const CommonOpts& c, std::string* ran_variant = nullptr);

}  // namespace moekit
