// One run's result and its three renderings (text, json, csv). Measurement is
// done elsewhere (timing.hpp); this file only reports.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "check.hpp"
#include "timing.hpp"

namespace moekit {

enum class Format { text, json, csv };

struct Report {
  std::string op;                 // the family's command name
  std::string variant;            // as resolved ("warpscan"); "reference" on the CPU
  std::string variant_requested;  // as typed ("auto")
  // Shape parameters, in order. JSON renders integer text as a number, other
  // text as a string, and nullopt as null (text and csv print "none"), so a
  // key's JSON type never depends on the input.
  std::vector<std::pair<std::string, std::optional<std::string>>> params;
  // What the run produced, one line in the text report ("num_tokens_post_pad=..."),
  // an object in JSON; filled on the CPU and the GPU alike.
  std::vector<std::pair<std::string, std::string>> summary;
  // Set when the run failed: its exit code and one-line message (JSON reports
  // then carry an "error" member, so scripts reading stdout see the failure).
  int error_code = 0;
  std::string error_message;
  std::string dtype;
  std::string device;             // GPU name or "cpu"
  std::string driver;             // CUDA driver version ("13.0") on a GPU run, else empty (JSON null)
  std::string build;              // `git describe` of the build (build_info.hpp)
  std::string pdl = "n/a";        // programmatic dependent launch mode (run.cpp sets it)
  // check: "pass", "fail", "skipped" (--no-check) or "n/a" (CPU reference run)
  std::string check_status = "skipped";
  CheckResult check;
  std::optional<TimingStats> timing;
  // Times of the launch's stages, each timed alone (Job::stages), in order;
  // empty when the run has none or was not timed. Reports add their medians.
  std::vector<std::pair<std::string, TimingStats>> stage_timings;
  double bytes = 0;         // moved per launch: inputs read once + outputs written once
  double peak_gbps = 0;     // measured device copy bandwidth (0 when not measured)
  std::vector<std::string> notes;  // free-form lines ("no CUDA device found: ...")
  std::vector<std::string> outputs;  // files written
  // The JSON array of the run's kernels and their resources (resources_view.hpp):
  // on a GPU each kernel the run launched, with its block size, dynamic shared
  // memory, runtime attributes and occupancy; on the CPU the named variant's
  // build records. Empty: null.
  std::string resources_json;

  // What only a bench program's record says (bench/common/record.hpp). Each is
  // written only when set, so a CLI report has none of them; the one list of
  // the record's fields is docs/regression.md "Records".
  std::string bench;       // "bench": the program that measured ("bench_align")
  std::string table;       // "table": the table of docs/bench/<f>.md the cell is in
  std::string gpu_json;    // "gpu": JSON object of device facts ({"cc","sms","l2_mib","runtime"})
  std::string extra_json;  // "extra": JSON object of family facts ({"auto_pick": ...})
  // How the time was taken beyond method and cache: "timing" then also holds
  // "launches" (per sample), "warmup" and "copies" (input copies rotated).
  struct TimingSetup {
    int launches = 1, warmup = 0, copies = 1;
  };
  std::optional<TimingSetup> timing_setup;

  double gbps() const;
  double pct_of_peak() const;
};

std::string render_report(const Report& r, Format f);
void print_report(const Report& r, Format f);
// One CSV field as every CSV moekit writes quotes it: as is, or in double
// quotes (inner quotes doubled) when it holds a comma, a quote or a newline.
std::string csv_field(const std::string& s);

}  // namespace moekit
