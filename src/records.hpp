// Benchmark records: the JSON lines `--results FILE` appends, read back by
// `moekit compare` and `moekit plot`. One schema: the kernel commands' report
// (`--format json`, src/report.cpp), which the bench programs write too
// (bench/common/record.hpp), so bench/results/*.jsonl compare and plot alike.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moekit::records {

// `--results PATH` is a promise made before the run, checked before any input
// is read: PATH must be a regular file moekit may write (a 0444 file is
// refused even for root, as outputs are) or a new file in an existing folder;
// never a .npy (by name or by content), the same file as one of `inputs`
// ((option, value) of the command's other text options), or the `out` folder
// or a folder above it. Throws InputError "PATH: --results: problem" (exit 2).
void check_results_target(const std::string& path, const std::vector<std::pair<std::string, std::string>>& inputs,
                          const std::string& out);

// Appends `line` (one JSON object ending in '\n') to `path` with a single
// write() on an O_APPEND descriptor, so concurrent runs never interleave
// inside a line. A file whose last line was cut (no final '\n') gets one
// first, in the same write, so the new record keeps a line of its own. Throws
// InputError "PATH: problem" (exit 2): a target that is not a regular file, or
// a short write (the partial line is cut off again).
void append_line(const std::string& path, const std::string& line);

// The whole of a regular file (opened non-blocking: a FIFO is refused, never
// waited on). Throws InputError "PATH: problem". `bytes_per_byte`: the host
// memory the caller needs per file byte, checked before reading.
std::string read_regular_file(const std::string& path, double bytes_per_byte = 1);

struct Record {
  std::string file;  // where it was read, and its 1-based line
  int line = 0;
  // Strings as they were written: a \udcXX escape (json_quote's surrogate
  // escape of a byte that is not UTF-8) is that byte again.
  std::string op, variant, device;
  // The report's variant_requested ("auto", or the name typed; a bench record
  // names its variant again); empty when absent. Part of the key when it differs from `variant`: without a
  // GPU every cell of a --variant sweep runs "reference", and auto may pick
  // a variant the sweep also lists; their records stay apart.
  std::string requested;
  // Parameter values as compact JSON text ("4096", "\"silu\"", "null"), by name;
  // a report with "pdl": "on" has the parameter pdl "on" too (records.cpp).
  std::map<std::string, std::string> params;
  // Per-launch microseconds; nullopt for a record without a time (an error
  // record, a run without --bench, a record whose check failed).
  std::optional<double> median_us, min_us, max_us;
  int samples = 0;
  std::optional<double> gbps;
  std::string timing_method;  // "graph", "events", "host" or "" when unknown

  // "warpscan", or "reference (from warpscan)" when another variant was requested.
  std::string variant_label() const;
  // (op, variant_label, params, device): what compare matches on.
  std::string key() const;
  // "E=64 tokens=16" (strings unquoted), in name order, without `skip`.
  std::string params_text(const std::vector<std::string>& skip = {}) const;
  // One parameter's value as params_text shows it ("-" when absent).
  std::string param_text(const std::string& name) const;
  // A parameter as a number; nullopt when absent or not a number.
  std::optional<double> number(const std::string& name) const;
};

// Every record of a JSON-lines file, in order; blank lines are skipped. Throws
// InputError "FILE:LINE: problem" on a line that is not a JSON object with an
// op and a variant (null only in an error record), and "FILE: ..."
// when the file cannot be read. A time needs finite 0 <= min <= median <= max;
// a zero median reads as no time (nothing was measured).
std::vector<Record> read_file(const std::string& path);

}  // namespace moekit::records
