#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "display.hpp"
#include "json.hpp"

namespace moekit {

double Report::gbps() const {
  if (!timing || timing->median_us <= 0) return 0;
  return bytes / (timing->median_us * 1e-6) / 1e9;
}

double Report::pct_of_peak() const {
  return peak_gbps > 0 ? 100.0 * gbps() / peak_gbps : 0;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o(1, '"');
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  o += '"';
  return o;
}

namespace {

std::string q(const std::string& s) { return json_quote(s); }

// Appends `item` to a comma-separated list.
void append_item(std::string& list, const std::string& item) {
  if (!list.empty()) list += ',';
  list += item;
}

// JSON numbers must be finite.
std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }

bool is_integer_text(const std::string& s) {
  if (s.empty()) return false;
  std::size_t i = (s[0] == '-') ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// Text that is a JSON number as it is ("16", "2.5", "1e+20"; not "007", "inf").
bool is_number_text(const std::string& s) {
  std::size_t i = 0;
  const auto digits = [&] {
    const std::size_t from = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - from;
  };
  if (i < s.size() && s[i] == '-') ++i;
  const std::size_t lead = i;
  if (digits() == 0 || (s[lead] == '0' && i - lead > 1)) return false;
  if (i < s.size() && s[i] == '.' && (++i, digits() == 0)) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
  }
  return i == s.size();
}

// A string field that may be unknown (a run that failed before it was set): null then.
std::string q_or_null(const std::string& s) { return s.empty() ? std::string("null") : json_quote(s); }

// The sum of the stages' times: medians, minima and maxima added up.
TimingStats stage_sum(const Report& r) {
  TimingStats sum;
  sum.samples = r.stage_timings.empty() ? 0 : r.stage_timings.front().second.samples;
  for (const auto& [name, t] : r.stage_timings) {
    sum.median_us += t.median_us;
    sum.min_us += t.min_us;
    sum.max_us += t.max_us;
    sum.samples = std::min(sum.samples, t.samples);
  }
  return sum;
}

// The text of a parameter value (nullopt reads "none").
std::string param_text(const std::optional<std::string>& v) { return v ? *v : std::string("none"); }

std::string render_text(const Report& r) {
  std::string out;
  std::string params;
  for (auto& [k, v] : r.params) params += fmt::format(" {}={}", k, param_text(v));
  std::string var = r.variant;
  if (!r.variant_requested.empty() && r.variant_requested != r.variant)
    var = fmt::format("{} (from {})", r.variant, r.variant_requested);
  out += fmt::format("{} [{}]{} dtype={} on {}, pdl={}\n", r.op, var, params, r.dtype, r.device, r.pdl);
  for (auto& n : r.notes) out += fmt::format("  note: {}\n", n);
  if (!r.summary.empty()) {
    std::string line;
    for (auto& [k, v] : r.summary) line += fmt::format(" {}={}", k, v);
    out += fmt::format("  result:{}\n", line);
  }
  if (r.check_status == "pass" && r.variant == "reference") {
    // No kernel ran: only the written files were compared with the reference.
    out += "  check: pass (no kernel ran: the CPU reference made the outputs; the written files read back "
           "match it)\n";
  } else if (r.check_status == "n/a") {
    out += "  check: n/a (no kernel ran: the CPU reference made the outputs)\n";
  } else if (r.check_status == "pass") {
    if (r.check.error_unit == "exact")
      out += fmt::format("  check: pass (matches the CPU reference exactly)\n");
    else
      out += fmt::format("  check: pass (max error {:.3g} {})\n", r.check.max_error, r.check.error_unit);
  } else if (r.check_status == "fail") {
    out += fmt::format("  check: FAIL: {}\n", r.check.first_difference);
  } else if (r.check_status == "skipped") {
    out += fmt::format("  check: skipped (--no-check)\n");
  }
  if (r.timing) {
    auto& t = *r.timing;
    out += fmt::format("  time: median {:.2f} us, min {:.2f}, max {:.2f} over {} samples ({})\n",
               t.median_us, t.min_us, t.max_us, t.samples, t.mode);
    if (r.bytes > 0) {
      if (r.peak_gbps > 0)
        out += fmt::format("  traffic: {:.0f} bytes, {:.1f} GB/s = {:.1f}% of measured copy bandwidth "
                   "({:.0f} GB/s)\n",
                   r.bytes, r.gbps(), r.pct_of_peak(), r.peak_gbps);
      else
        out += fmt::format("  traffic: {:.0f} bytes, {:.3f} GB/s\n", r.bytes, r.gbps());
    }
  }
  for (auto& [name, t] : r.stage_timings)
    out += fmt::format("  stage_us {}: median {:.2f}, min {:.2f}, max {:.2f}\n", name, t.median_us, t.min_us,
                       t.max_us);
  if (!r.stage_timings.empty())
    out += fmt::format("  stage_us sum: median {:.2f}, min {:.2f}, max {:.2f} (each stage timed alone, as the "
                       "whole launch is: {})\n",
                       stage_sum(r).median_us, stage_sum(r).min_us, stage_sum(r).max_us,
                       r.stage_timings.front().second.mode);
  for (auto& o : r.outputs) out += fmt::format("  wrote {}\n", display_path(o));
  return out;
}

std::string render_json(const Report& r) {
  // Numeric text is a number (scaling 1 and 2.5 alike), so a key's type never
  // depends on its value; a run that failed before its parameters were known has null.
  std::string p;
  for (auto& [k, v] : r.params)
    append_item(p, fmt::format("{}:{}", q(k), !v ? std::string("null") : is_number_text(*v) ? *v : q(*v)));
  p = r.params.empty() ? std::string("null") : "{" + p + "}";
  std::string sum;
  for (auto& [k, v] : r.summary) append_item(sum, fmt::format("{}:{}", q(k), is_integer_text(v) ? v : q(v)));
  std::string check = fmt::format("{{\"result\":{},\"max_error\":{},\"error_unit\":{}", q(r.check_status),
                                  num(r.check.max_error), q_or_null(r.check.error_unit));
  check += fmt::format(",\"first_difference\":{}}}",
                       r.check.first_difference.empty() ? std::string("null") : q(r.check.first_difference));
  auto time_of = [](const TimingStats& t) {
    return fmt::format("{{\"median\":{},\"min\":{},\"max\":{},\"samples\":{}}}", num(t.median_us),
                       num(t.min_us), num(t.max_us), t.samples);
  };
  const std::string time = r.timing ? time_of(*r.timing) : std::string("null");
  // Each stage like time_us, then their "sum"; null without stage timings.
  std::string stages;
  for (auto& [name, t] : r.stage_timings) append_item(stages, fmt::format("{}:{}", q(name), time_of(t)));
  if (!stages.empty()) append_item(stages, fmt::format("\"sum\":{}", time_of(stage_sum(r))));
  stages = stages.empty() ? std::string("null") : "{" + stages + "}";
  // How the time was taken, as fields a script can match on (timing_mode is the prose).
  std::string how = "null";
  if (r.timing) {
    how = fmt::format("{{\"method\":{},\"cache\":{}", q(r.timing->method), q(r.timing->cold ? "cold" : "warm"));
    if (const auto& u = r.timing_setup)
      how += fmt::format(",\"launches\":{},\"warmup\":{},\"copies\":{}", u->launches, u->warmup, u->copies);
    how += "}";
  }
  // A bench record's own facts, each only when set (a CLI report has none).
  std::string bench;
  if (!r.bench.empty()) bench += fmt::format(",\"bench\":{}", q(r.bench));
  if (!r.table.empty()) bench += fmt::format(",\"table\":{}", q(r.table));
  if (!r.gpu_json.empty()) bench += fmt::format(",\"gpu\":{}", r.gpu_json);
  if (!r.extra_json.empty()) bench += fmt::format(",\"extra\":{}", r.extra_json);
  std::string notes, outs;
  for (auto& n : r.notes) append_item(notes, q(n));
  for (auto& o : r.outputs) append_item(outs, q(o));
  return fmt::format(
      "{{\"op\":{},\"variant\":{},\"variant_requested\":{},\"params\":{},\"dtype\":{},"
      "\"device\":{},\"check\":{},\"time_us\":{},\"stage_us\":{},\"timing_mode\":{},\"bytes\":{},\"gbps\":{},"
      "\"timing\":{},\"peak_gbps\":{},\"pct_of_peak\":{},\"outputs\":[{}],\"notes\":[{}],\"summary\":{{{}}},"
      "\"driver\":{},\"build\":{},\"pdl\":{},\"resources\":{},\"error\":{}{}}}\n",
      q(r.op), q_or_null(r.variant), q_or_null(r.variant_requested), p, q_or_null(r.dtype), q_or_null(r.device),
      check, time, stages, r.timing ? q(r.timing->mode) : "null", num(r.bytes),
      // Not measured is null, never 0: no traffic without a kernel (a CPU run), no copy bandwidth unless timed on a GPU.
      r.timing && r.bytes > 0 ? num(r.gbps()) : "null", how, r.peak_gbps > 0 ? num(r.peak_gbps) : "null",
      r.timing && r.peak_gbps > 0 ? num(r.pct_of_peak()) : "null", outs, notes, sum, q_or_null(r.driver),
      q_or_null(r.build), q(r.pdl), r.resources_json.empty() ? std::string("null") : r.resources_json,
      r.error_code == 0 ? std::string("null")
                        : fmt::format("{{\"exit_code\":{},\"message\":{}}}", r.error_code, q(r.error_message)),
      bench);
}

std::string render_csv(const Report& r) {
  std::string head = "op,variant,variant_requested";
  std::string row = fmt::format("{},{},{}", csv_field(r.op), csv_field(r.variant), csv_field(r.variant_requested));
  for (auto& [k, v] : r.params) {
    head += fmt::format(",{}", csv_field(k));
    row += fmt::format(",{}", csv_field(param_text(v)));
  }
  head += ",dtype,device,pdl,check,max_error,median_us,min_us,max_us,samples,bytes,gbps,pct_of_peak";
  row += fmt::format(",{},{},{},{},{}", csv_field(r.dtype), csv_field(r.device), csv_field(r.pdl), r.check_status,
                     num(r.check.max_error));
  if (r.timing) {
    auto& t = *r.timing;
    row += fmt::format(",{},{},{},{},{},{},{}", num(t.median_us), num(t.min_us), num(t.max_us), t.samples,
                       num(r.bytes), r.bytes > 0 ? num(r.gbps()) : "", r.peak_gbps > 0 ? num(r.pct_of_peak()) : "");
  } else {
    row += fmt::format(",,,,,{},,", num(r.bytes));
  }
  if (!r.stage_timings.empty()) {
    for (auto& [name, t] : r.stage_timings) {
      head += fmt::format(",{}", csv_field(fmt::format("stage_{}_us", name)));
      row += fmt::format(",{}", num(t.median_us));
    }
    head += ",stage_sum_us";
    row += fmt::format(",{}", num(stage_sum(r).median_us));
  }
  return fmt::format("{}\n{}\n", head, row);
}

}  // namespace

std::string render_report(const Report& r, Format f) {
  switch (f) {
    case Format::json: return render_json(r);
    case Format::csv: return render_csv(r);
    case Format::text: break;
  }
  return render_text(r);
}

void print_report(const Report& r, Format f) {
  std::string text = render_report(r, f);
  if (f == Format::csv) {
    // A sweep prints one table: a header equal to the last one printed is left out.
    static std::string last_header;
    const std::string header = text.substr(0, text.find('\n') + 1);
    if (header == last_header) text.erase(0, header.size());
    else last_header = header;
  }
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace moekit
