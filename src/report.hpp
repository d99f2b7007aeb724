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
  std::string op;                 // "align", "dedup", "act-and-mul"
  std::string variant;            // as resolved ("warpscan"); "reference" on the CPU
  std::string variant_requested;  // as typed ("auto")
  std::vector<std::pair<std::string, std::string>> params;  // shape parameters, in order
  std::string dtype;
  std::string device;             // GPU name or "cpu"
  // check: "pass", "fail", "skipped" (--no-check) or "n/a" (CPU reference run)
  std::string check_status = "skipped";
  CheckResult check;
  std::optional<TimingStats> timing;
  double bytes = 0;         // moved per launch: inputs read once + outputs written once
  double peak_gbps = 0;     // measured device copy bandwidth (0 when not measured)
  std::vector<std::string> notes;  // free-form lines ("no CUDA device found: ...")
  std::vector<std::string> outputs;  // files written

  double gbps() const;
  double pct_of_peak() const;
};

std::string render_report(const Report& r, Format f);
void print_report(const Report& r, Format f);

}  // namespace moekit
