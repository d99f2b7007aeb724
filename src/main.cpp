// moekit: command-line lab for MoE-serving GPU kernels. The kernel commands
// and `gen` come from the families list (family.hpp); this file wires the
// commands shared by all of them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <utility>

#include "commands.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "outputs.hpp"
#include "report.hpp"
#include "sweep.hpp"

namespace {

using namespace moekit;

constexpr const char* kExitCodes =
    "Exit codes: 0 ok, 1 validation mismatch (stderr names the first difference), 2 bad usage or bad input, "
    "3 CUDA error or no CUDA device where one is needed.";

// Seeds are unsigned 64-bit: "-1" or 2^64 must not wrap silently.
const CLI::Validator kSeed(
    [](std::string& s) -> std::string {
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || ec != std::errc() || end != s.data() + s.size())
        return "must be an integer in [0, 2^64), got '" + s + "'";
      return "";
    },
    "UINT64");

// Every option that takes a floating-point number refuses NaN and infinity
// (CLI11 reads "nan" and "inf", and its Range passes NaN, which compares false
// to both bounds): no option gives them a meaning (README "Exit codes").
const CLI::Validator kFinite(
    [](std::string& s) -> std::string {
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      if (end != s.c_str() && !std::isfinite(v)) return "must be a finite number, got '" + s + "'";
      return "";  // a finite number, or not a number at all (CLI11's conversion says so)
    },
    "");

// kFinite on every floating-point option of `app` and its subcommands, found
// by the type CLI11 gives them ("FLOAT"), so no option can be registered without it.
void require_finite_numbers(CLI::App& app) {
  for (CLI::Option* o : app.get_options())
    if (o->get_type_name().rfind("FLOAT", 0) == 0) o->check(kFinite);
  for (CLI::App* sub : app.get_subcommands({})) require_finite_numbers(*sub);
}

void add_common(CLI::App* sub, CommonOpts& c) {
  sub->add_option("--variant", c.variant, "kernel variant, or auto (see `moekit variants`)")
      ->capture_default_str();
  sub->add_option("--device", c.device,
                  "gpu, cpu (the CPU reference only) or auto (gpu when a CUDA device exists)")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}))
      ->capture_default_str();
  sub->add_option("--out", c.out, "folder for the output .npy files (written atomically); default: write nothing");
  // Separate flags rather than CLI11's "!--no-x", whose help reads "{false}" like a default.
  sub->add_flag_callback("--check", [&c] { c.check = true; }, "compare the GPU result with the CPU reference (default)");
  sub->add_flag_callback("--no-check", [&c] { c.check = false; }, "skip the comparison with the CPU reference");
  sub->add_flag("--bench", c.bench, "time the kernel (CUDA graph replay by default)");
  sub->add_option("--warmup", c.warmup, "untimed launches before timing")->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  sub->add_option("--iters", c.iters, "timed samples")->check(CLI::Range(1, 1000000))->capture_default_str();
  sub->add_flag("--cold", c.cold, "flush L2 before each timed launch (outside the timed region)");
  sub->add_flag_callback("--graph", [&c] { c.graph = true; }, "time replays of a CUDA graph of 20 launches (default)");
  sub->add_flag_callback("--no-graph", [&c] { c.graph = false; }, "time with CUDA events around each launch instead");
  sub->add_option("--format", c.format, "report format")->check(CLI::IsMember({"text", "json", "csv"}))
      ->capture_default_str();
  sub->add_flag("--profile", c.profile,
                "ncu mode: one warm-up launch, then one launch between cudaProfilerStart/Stop in NVTX range "
                "moekit/<op>/<variant> (use ncu --profile-from-start off)");
  sub->add_option("--seed", c.seed, "seed for generated inputs")->check(kSeed)->capture_default_str();
  sub->add_option("--pdl", c.pdl,
                  "programmatic dependent launch: on (every kernel may overlap the previous one's tail, where the "
                  "GPU has it: sm_90+) or off; the report's pdl says what the launch did")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--results", c.results,
                  "append each completed run's JSON record as one line to this JSON-lines file (moekit compare, plot)");
}

// Edit distance, for "did you mean" on a mistyped command.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The one-line error for a command line CLI11 rejected.
std::string parse_error_line(const CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (argc > 1 && argv[1][0] != '-') {
    const std::string_view typed = argv[1];
    std::string best;
    std::size_t best_d = 3;  // suggest only close names
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      std::vector<std::string> names = sub->get_aliases();
      names.push_back(sub->get_name());
      for (const auto& n : names) {
        if (n == typed) known = true;
        const std::size_t d = edit_distance(typed, n);
        if (d < best_d) best_d = d, best = n;
      }
    }
    if (!known)
      return best.empty() ? fmt::format("unknown command '{}' (see moekit --help)", typed)
                          : fmt::format("unknown command '{}' (did you mean '{}'?)", typed, best);
  }
  std::string msg = e.what();
  std::replace(msg.begin(), msg.end(), '\n', ' ');
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  return msg + " (see --help)";
}

// The exit code and one-line message of an exception moekit lets escape.
std::pair<int, std::string> failure_of(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const InputError& x) {
    return {kBadInput, x.what()};
  } catch (const CudaError& x) {
    return {kCudaError, x.what()};
  } catch (const std::bad_alloc&) {
    return {kBadInput, "out of host memory"};
  } catch (const std::exception& x) {
    return {kBadInput, x.what()};
  }
}

// With --format json, a failed run still prints one JSON object (with an
// "error" member) on stdout; the one-line message goes to stderr as always.
int run_family_reporting_errors(Family& f, const CommonOpts& c) {
  try {
    return run_family(f, c);
  } catch (const std::exception&) {
    if (c.format == "json") {
      const auto [code, message] = failure_of(std::current_exception());
      Report r;
      r.op = std::string(f.command());
      r.variant_requested = c.variant;
      r.check_status = "n/a";
      r.error_code = code;
      r.error_message = message;
      print_report(r, Format::json);
    }
    throw;
  }
}

int run(int argc, char** argv);

// The --format a kernel command line asks for (text when absent).
std::string format_of(const std::vector<std::string>& args) {
  std::string f = "text";
  for (std::size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--format" && i + 1 < args.size()) f = args[i + 1];
    else if (args[i].rfind("--format=", 0) == 0) f = args[i].substr(9);
  }
  return f;
}

// One run per cell of a sweep (sweep.hpp). A failed cell is reported like a
// single run and the sweep goes on; the exit code is the first failure's. A
// command line CLI11 rejects is the same for every cell: the sweep stops.
int run_sweep(const std::vector<SweepCell>& cells, bool text) {
  int rc = kOk;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (text && cells.size() > 1) fmt::print("== sweep cell {}/{}: {}\n", i + 1, cells.size(), cells[i].label);
    std::fflush(stdout);
    std::vector<char*> argv;
    for (const auto& a : cells[i].args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    int code = kOk;
    try {
      code = run(static_cast<int>(cells[i].args.size()), argv.data());
      if (code == kBadInput) return code;  // returned, not thrown: a parse error
    } catch (const std::exception&) {
      const auto [c, message] = failure_of(std::current_exception());
      fmt::print(stderr, "moekit: {} ({})\n", message, cells[i].label);
      code = c;
    }
    if (rc == kOk) rc = code;
  }
  return rc;
}

std::string command_list() {
  std::string s;
  for (const auto& f : families()) s += (s.empty() ? "" : ", ") + std::string(f->command());
  return s;
}

int run(int argc, char** argv) {
  CLI::App app{"moekit: a command-line lab for the small GPU kernels around Mixture-of-Experts inference.\n"
               "Runs a kernel variant on a .npy input, checks it against a CPU reference and times it."};
  std::string examples;
  for (const auto& f : families())
    for (const auto& e : f->examples()) examples += "\n  moekit " + e;
  app.footer(std::string(kExitCodes) + "\nExamples:" + examples);
  app.require_subcommand(1);
  app.set_version_flag("--version", "moekit 0.1.0");

  // One subcommand per family, and one `gen` subcommand per family.
  CommonOpts common;
  std::vector<std::pair<CLI::App*, Family*>> kernel_cmds;
  for (const auto& f : families()) {
    auto* sub = app.add_subcommand(std::string(f->command()), std::string(f->summary()));
    for (const auto& a : f->aliases()) sub->alias(a);
    f->add_options(*sub);
    add_common(sub, common);
    sub->footer(f->outputs_help() + " " + kExitCodes);
    kernel_cmds.emplace_back(sub, f.get());
  }

  auto* gen = app.add_subcommand("gen", "write synthetic inputs (.npy)");
  gen->require_subcommand(1);
  std::string out_file;
  std::uint64_t g_seed = 1;
  std::vector<std::pair<CLI::App*, std::function<npy::Array(std::uint64_t)>>> gen_cmds;
  for (const auto& f : families()) {
    auto* g = gen->add_subcommand(std::string(f->command()), "");
    for (const auto& a : f->aliases()) g->alias(a);
    auto make = f->add_gen(*g);
    g->add_option("-o,--output", out_file, "output .npy file")->required();
    g->add_option("--seed", g_seed, "random seed")->check(kSeed)->capture_default_str();
    gen_cmds.emplace_back(g, std::move(make));
  }

  std::vector<std::string> info_files;
  std::string info_format = "text";
  auto* info = app.add_subcommand("info", "the CUDA device (name, SMs, L2, memory, versions, copy bandwidth), "
                                          "or the dtype and shape of .npy files");
  info->add_option("files", info_files, ".npy files to describe");
  info->add_option("--format", info_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string var_op, var_format = "text";
  auto* variants = app.add_subcommand("variants", "list every variant of every op, with its idea and limits");
  variants->add_option("op", var_op, command_list() + " (default: all)");
  variants->add_option("--format", var_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  const std::vector<ToolCommand> tools = add_tool_commands(app);
  require_finite_numbers(app);

  // A kernel command with list-valued options runs once per cell.
  if (argc > 2)
    for (auto& [sub, f] : kernel_cmds)
      if (sub->check_name(argv[1])) {
        const std::vector<std::string> args(argv, argv + argc);
        const auto cells = expand_sweep(*sub, args);
        if (!cells.empty()) return run_sweep(cells, format_of(args) == "text");
      }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    fmt::print(stderr, "moekit: {}\n", parse_error_line(app, e, argc, argv));
    return kBadInput;
  }

  for (auto& [sub, f] : kernel_cmds)
    if (*sub) return run_family_reporting_errors(*f, common);
  if (*info) return run_info(info_files, info_format);
  if (*variants) return run_variants(var_op, var_format);
  for (const auto& t : tools)
    if (*t.sub) return t.run();
  for (auto& [g, make] : gen_cmds) {
    if (!*g) continue;
    npy::Array a = make(g_seed);
    outputs::write_file(out_file, a);
    std::string shape;
    for (auto d : a.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    fmt::print("wrote {}: {} [{}]\n", display_path(out_file), npy::dtype_name(a.dtype), shape);
    return kOk;
  }
  return kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception&) {
    const auto [code, message] = failure_of(std::current_exception());
    fmt::print(stderr, "moekit: {}\n", message);
    return code;
  }
}
