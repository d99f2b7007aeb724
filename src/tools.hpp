// The commands around the kernels: `trace stats`, `trace import`, `compare`,
// `plot`. Each is a pure function from its inputs to text (tested in
// tests/cli/tools_cases.py) and a thin run_* that reads files, writes outputs and prints.
// Errors throw InputError naming the file (and line): exit 2.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "npy.hpp"
#include "records.hpp"

namespace moekit::tools {

// ---- trace stats -----------------------------------------------------------
struct TraceStats {
  std::int64_t tokens = 0, topk = 0, num_experts = 0;
  std::int64_t negative = 0, too_large = 0;  // ids < 0, ids >= E
  std::int64_t repeated_rows = 0;            // tokens naming one expert twice
  std::vector<std::int64_t> counts;          // per expert, valid ids only

  std::int64_t valid() const { return tokens * topk - negative - too_large; }
  std::int64_t max_load() const;
  double mean_load() const;  // valid slots / E
};
// `ids`: int32 or int64 [T, K]; `label` names it in errors.
TraceStats trace_stats(const npy::Array& ids, std::int64_t num_experts, const std::string& label);
std::string render_trace_stats(const TraceStats& s, const std::string& file, bool json, int top);
int run_trace_stats(const std::string& file, std::int64_t num_experts, const std::string& format, int top);

// ---- trace import ------------------------------------------------------------
struct ImportOptions {
  std::string format;               // "json", "jsonl" or "csv"
  std::vector<std::string> inputs;  // read in order; tokens concatenate
  std::string out;                  // folder for layer<L>.npy
  std::int64_t num_experts = 0;     // > 0: ids must be in [0, E)
  // json: the fields holding [tokens][layers][topk] in an object, in the order
  // their tokens are taken (vLLM returns the prompt's and the generation's apart).
  std::vector<std::string> fields = {"prompt_routed_experts", "routed_experts"};
  // json, base64 (SGLang): the flat int32 array's layers and topk.
  std::int64_t layers = 0, topk = 0;
  // jsonl and csv: the record fields.
  std::string layer_field = "layer", experts_field = "experts";
};
struct LayerIds {
  std::int64_t topk = -1;
  std::vector<std::int32_t> ids;  // tokens * topk
  std::string first;              // where its first token came from ("file:line")
};
// Every layer's [tokens, topk] ids, by layer number.
std::map<std::int64_t, LayerIds> import_trace(const ImportOptions& o);
int run_trace_import(const ImportOptions& o);

// ---- compare -----------------------------------------------------------------
struct Cell {
  const records::Record* base = nullptr;
  const records::Record* next = nullptr;
  double ratio = 0;     // new median / base median (when both are timed)
  std::string verdict;  // regressed, faster, same, untimed, only-base, only-new
};
struct Comparison {
  std::vector<Cell> cells;  // matched cells in base order, then those only in new
  int regressed = 0, faster = 0, same = 0, untimed = 0, only_base = 0, only_new = 0, duplicates = 0;
};
// Regressed: slower by more than `threshold` (a fraction) and the new median
// above the base's max while the base median is below the new's min (outside
// both runs' spread). Faster mirrors it. Duplicate keys in a file: the last wins.
Comparison compare(const std::vector<records::Record>& base, const std::vector<records::Record>& next,
                   double threshold);
// Text: the parameter columns are `columns` (names, or {"all"}), by default
// those whose value differs between cells; what all cells share is one line.
std::string render_comparison(const Comparison& c, const std::string& base_file, const std::string& new_file,
                              double threshold, bool json, const std::vector<std::string>& columns = {});
int run_compare(const std::string& base, const std::string& next, double threshold, const std::string& format,
                const std::vector<std::string>& columns = {});

// ---- plot --------------------------------------------------------------------
struct PlotOptions {
  std::string metric = "time";  // time (median us per launch) or gbps
  std::string x;                // the x parameter; empty = tokens, else numel, batch, bs
  std::string title;            // empty = made from the records
};
// One panel per group (op, device and the parameters other than x that are
// not derived from x), one line per variant; log-log axes.
// `note`, when given, gets lines for the terminal (a variant axis that collapsed).
std::string render_svg(const std::vector<records::Record>& recs, const PlotOptions& o, const std::string& source,
                       std::string* note = nullptr);
int run_plot(const std::vector<std::string>& files, const std::string& out, const PlotOptions& o);

}  // namespace moekit::tools
