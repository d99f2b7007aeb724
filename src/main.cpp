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
#include <map>
#include <new>
#include <string>
#include <utility>

#include "build_describe.hpp"
#include "commands.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "outputs.hpp"
#include "records.hpp"
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
  sub->add_flag_callback("--graph", [&c] { c.graph = true; },
                         "time replays of a CUDA graph of 20 launches (default; a variant that waits on the host "
                         "inside its launch is timed with events)");
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

// The one-line error for a command line CLI11 rejected. The user's words in
// it are shown the way every message shows them (display.hpp).
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
      return best.empty() ? fmt::format("unknown command '{}' (see moekit --help)", printable(typed))
                          : fmt::format("unknown command '{}' (did you mean '{}'?)", printable(typed), best);
  }
  // CLI11 quotes the arguments it refuses as typed: each one that is not
  // printable as it is gets its printable form before CLI11's own line breaks
  // become spaces (so a newline typed by the user reads \x0a, not a space).
  std::string msg = e.what();
  for (int i = 1; i < argc; ++i) {
    const std::string raw = argv[i], shown = printable(raw);
    if (raw.empty() || raw == shown) continue;
    for (std::size_t at = msg.find(raw); at != std::string::npos; at = msg.find(raw, at + shown.size()))
      msg.replace(at, raw.size(), shown);
  }
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

// The files a parsed command line may read: (option, path) for the value of
// every text option but the outputs (numbers cannot be files), and each
// ':'-separated part of it (`--dist load:FILE:LAYER`). Only existing files
// ever match an output (outputs::same_file), so extra candidates are harmless.
std::vector<std::pair<std::string, std::string>> input_candidates(const CLI::App& sub) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const CLI::Option* o : sub.get_options()) {
    if (o->check_name("--results") || o->check_name("--out") || o->check_name("--output") ||
        o->get_type_name() != "TEXT")
      continue;
    for (const auto& v : o->results()) {
      out.emplace_back(o->get_name(), v);
      std::vector<std::size_t> cuts{0};
      for (std::size_t i = 0; i < v.size(); ++i)
        if (v[i] == ':') cuts.push_back(i + 1);
      cuts.push_back(v.size() + 1);
      for (std::size_t a = 0; a + 1 < cuts.size(); ++a)
        for (std::size_t b = a + 1; b < cuts.size(); ++b)
          if (a != 0 || b + 1 != cuts.size()) out.emplace_back(o->get_name(), v.substr(cuts[a], cuts[b] - 1 - cuts[a]));
    }
  }
  return out;
}

std::vector<std::string> paths_of(const std::vector<std::pair<std::string, std::string>>& v) {
  std::vector<std::string> p;
  for (const auto& [opt, path] : v) p.push_back(path);
  return p;
}

// --results is a promise made before the run (docs/regression.md): checked
// once the command line is parsed, before any input is read, any --out is
// written or any report is printed.
void check_results_option(const CLI::App& sub, const CommonOpts& c) {
  if (c.results.empty()) return;
  records::check_results_target(c.results, input_candidates(sub), c.out);
}

// The JSON object of a run that failed before its report was filled: what is
// not known (variant, params, dtype, device) is null (report.cpp).
void print_error_report(const std::string& op, const std::string& variant_requested, int code,
                        const std::string& message) {
  Report r;
  r.op = op;
  r.variant_requested = variant_requested;
  r.build = build_describe();
  r.check_status = "n/a";
  r.error_code = code;
  r.error_message = message;
  print_report(r, Format::json);
}

// With --format json, a failed run still prints one JSON object (with an
// "error" member) on stdout; the one-line message goes to stderr as always.
// `check_only`: only the checks made before any cell of a sweep runs.
int run_family_reporting_errors(Family& f, const CLI::App& sub, const CommonOpts& c, std::string* ran_variant,
                                bool check_only = false) {
  try {
    check_results_option(sub, c);
    return check_only ? kOk : run_family(f, c, ran_variant);
  } catch (const std::exception&) {
    if (c.format == "json") {
      const auto [code, message] = failure_of(std::current_exception());
      print_error_report(std::string(f.command()), c.variant, code, one_line(message));
    }
    throw;
  }
}

// How run() treats a command line: run it, or (for a sweep, before any cell
// runs) only parse it, handing a parse error back instead of printing it.
enum class Mode { run, parse_only };
// Set while a sweep runs its cells: each cell's resolved variant.
std::string* g_ran_variant = nullptr;

int run(int argc, char** argv, Mode mode = Mode::run, std::string* parse_error = nullptr);

// The --format a kernel command line asks for (text when absent).
std::string format_of(const std::vector<std::string>& args) {
  std::string f = "text";
  for (std::size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--format" && i + 1 < args.size()) f = args[i + 1];
    else if (args[i].rfind("--format=", 0) == 0) f = args[i].substr(9);
  }
  return f;
}

// One run per cell of a sweep (sweep.hpp). Every cell's command line is
// parsed first: when none parses, and all for the same reason (an unknown
// option), the command is refused once before anything runs. Otherwise a cell
// that fails, a list item the option refuses (--tokens 1,x) included, is
// reported like a single run (a stderr line naming the cell, a JSON error
// object) and the sweep goes on; the exit code is the first failure's.
int run_sweep(const std::vector<SweepCell>& cells, const std::string& op, const std::string& format) {
  const auto argv_of = [](const SweepCell& c) {
    std::vector<char*> argv;
    for (const auto& a : c.args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    return argv;
  };
  std::vector<std::string> parse_errors(cells.size());
  std::size_t unparsed = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    auto argv = argv_of(cells[i]);
    if (run(static_cast<int>(cells[i].args.size()), argv.data(), Mode::parse_only, &parse_errors[i]) != kOk)
      ++unparsed;
  }
  if (unparsed == cells.size() &&
      std::all_of(parse_errors.begin(), parse_errors.end(), [&](const auto& e) { return e == parse_errors[0]; })) {
    fmt::print(stderr, "moekit: {}\n", one_line(parse_errors[0]));
    return kBadInput;
  }
  const bool text = format == "text";
  int rc = kOk;
  std::map<std::string, std::vector<std::string>> requested_of;  // variant that ran -> the cells' --variant
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (text && cells.size() > 1) fmt::print("== sweep cell {}/{}: {}\n", i + 1, cells.size(), cells[i].label);
    std::fflush(stdout);
    int code = kOk;
    if (!parse_errors[i].empty()) {
      fmt::print(stderr, "moekit: {} ({})\n", one_line(parse_errors[i]), cells[i].label);
      if (format == "json") print_error_report(op, "", kBadInput, one_line(parse_errors[i]));
      code = kBadInput;
    } else {
      auto argv = argv_of(cells[i]);
      std::string ran;
      g_ran_variant = &ran;
      try {
        code = run(static_cast<int>(cells[i].args.size()), argv.data());
      } catch (const std::exception&) {
        const auto [c, message] = failure_of(std::current_exception());
        fmt::print(stderr, "moekit: {} ({})\n", one_line(message), cells[i].label);
        code = c;
      }
      g_ran_variant = nullptr;
      if (!ran.empty()) {
        auto& names = requested_of[ran];
        const std::string req = cells[i].variant.empty() ? "auto" : cells[i].variant;
        if (std::find(names.begin(), names.end(), req) == names.end()) names.push_back(req);
      }
    }
    if (rc == kOk) rc = code;
  }
  // A --variant list whose cells ran one variant (no GPU: the CPU reference
  // ran for each; or auto picked a listed one): the records keep the
  // requested variant apart (variant_requested), but say so.
  for (const auto& [ran, names] : requested_of) {
    if (names.size() < 2) continue;
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + printable(n);
    fmt::print(stderr, "moekit: note: --variant {} all ran '{}'{}; their reports and records tell them apart by "
               "variant_requested\n", list, printable(ran),
               ran == "reference" ? " (no kernel ran: the CPU reference made each cell's outputs)" : "");
  }
  return rc;
}

std::string command_list() {
  std::string s;
  for (const auto& f : families()) s += (s.empty() ? "" : ", ") + std::string(f->command());
  return s;
}

int run(int argc, char** argv, Mode mode, std::string* parse_error) {
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
  auto add_gen_output = [&](CLI::App* g, std::function<npy::Array(std::uint64_t)> make) {
    g->add_option("-o,--output", out_file, "output .npy file")->required();
    g->add_option("--seed", g_seed, "random seed")->check(kSeed)->capture_default_str();
    gen_cmds.emplace_back(g, std::move(make));
  };
  for (const auto& f : families()) {
    auto* g = gen->add_subcommand(std::string(f->command()), "");
    for (const auto& a : f->aliases()) g->alias(a);
    add_gen_output(g, f->add_gen(*g));
  }
  // The families' other inputs, after the main ones in `moekit gen --help`.
  for (const auto& f : families())
    for (auto& extra : f->extra_gens()) {
      auto* g = gen->add_subcommand(extra.name, "");
      add_gen_output(g, extra.add(*g));
    }

  std::vector<std::string> info_files;
  std::string info_format = "text";
  auto* info = app.add_subcommand("info", "the CUDA device (name, SMs, L2, memory, versions, copy bandwidth), "
                                          "or the dtype and shape of .npy files");
  info->add_option("files", info_files, ".npy files to describe");
  info->add_option("--format", info_format, "text or json")->check(CLI::IsMember({"text", "json"}));

  std::string var_op, var_format = "text";
  bool var_resources = false;
  auto* variants = app.add_subcommand("variants", "list every variant of every op, with its idea and limits");
  variants->add_option("op", var_op, command_list() + " (default: all)");
  variants->add_option("--format", var_format, "text or json (csv with --resources)")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  variants->add_flag("--resources", var_resources,
                     "per kernel of each variant: registers, local memory (spills), shared memory, block size, the "
                     "cubin's architecture (recorded at build time); on a GPU runtime attributes and occupancy "
                     "(docs/resources.md)");

  std::string sass_op, sass_variant, sass_kernel;
  auto* sass = app.add_subcommand("sass", "the SASS of a variant's kernels, from this binary's own fatbin "
                                          "(cuobjdump from the CUDA toolkit on PATH)");
  sass->add_option("op", sass_op, command_list())->required();
  sass->add_option("--variant", sass_variant, "a registered variant (see `moekit variants OP`)")->required();
  sass->add_option("--kernel", sass_kernel,
                   "only kernels whose name contains this (e.g. micro_kernel, or a mangled symbol)");

  const std::vector<ToolCommand> tools = add_tool_commands(app);
  require_finite_numbers(app);

  // A kernel command with list-valued options runs once per cell.
  if (argc > 2 && mode == Mode::run)
    for (auto& [sub, f] : kernel_cmds)
      if (sub->check_name(argv[1])) {
        const std::vector<std::string> args(argv, argv + argc);
        const auto cells = expand_sweep(*sub, args);
        if (cells.empty()) break;
        // Every cell appends to the same --results: a bad one is refused once,
        // before the first cell runs (the check throws, as in a single run).
        // (A command line CLI11 rejects is left to the sweep to report.)
        std::vector<char*> first;
        for (const auto& a : cells[0].args) first.push_back(const_cast<char*>(a.c_str()));
        first.push_back(nullptr);
        bool parsed = true;
        try {
          app.parse(static_cast<int>(cells[0].args.size()), first.data());
        } catch (const CLI::ParseError&) {
          parsed = false;
        }
        if (parsed && *sub) run_family_reporting_errors(*f, *sub, common, nullptr, true);
        return run_sweep(cells, std::string(f->command()), format_of(args));
      }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return mode == Mode::parse_only ? kOk : app.exit(e);  // --help, --version
    const std::string line = parse_error_line(app, e, argc, argv);
    if (parse_error) *parse_error = line;
    else fmt::print(stderr, "moekit: {}\n", one_line(line));
    return kBadInput;
  }
  if (mode == Mode::parse_only) return kOk;

  for (auto& [sub, f] : kernel_cmds)
    if (*sub) {
      common.inputs = paths_of(input_candidates(*sub));
      return run_family_reporting_errors(*f, *sub, common, g_ran_variant);
    }
  if (*info) return run_info(info_files, info_format);
  if (*variants) return run_variants(var_op, var_format, var_resources);
  if (*sass) return run_sass(sass_op, sass_variant, sass_kernel, argv[0]);
  for (const auto& t : tools)
    if (*t.sub) return t.run();
  for (auto& [g, make] : gen_cmds) {
    if (!*g) continue;
    outputs::refuse_inputs_as_targets({out_file}, paths_of(input_candidates(*g)));  // `--dist load:F -o F`
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
    fmt::print(stderr, "moekit: {}\n", one_line(message));
    return code;
  }
}
