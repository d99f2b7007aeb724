// Benchmark results as JSON Lines, one record per cell (docs: bench/render.py).
//
// nvbench style: a bench measures and fills a Measurement; Writer formats it.
// Markdown is the renderer's job (bench/render.py), never a bench program's.
//
// A record is the one record schema of moekit: the JSON report that
// `moekit <op> --results` appends (src/report.cpp writes both), with a bench
// program's own facts added ("bench", "table", "gpu", "extra", and "launches",
// "warmup", "copies" in "timing"); docs/regression.md "Records" lists every
// field. So `moekit compare` and `moekit plot` read bench and CLI records alike.
//
//   {"op":"<f>","variant":"tiny","variant_requested":"tiny","params":{"E":8,...},"dtype":"int32",
//    "device":"NVIDIA H100 80GB HBM3","check":{"result":"pass",...},"time_us":{"median":..,"min":..,
//    "max":..,"samples":25},...,"timing":{"method":"graph","cache":"warm","launches":20,"warmup":5,
//    "copies":16},...,"pdl":"off",...,"error":null,"bench":"bench_<f>","table":"E=8 topk=2 uniform",
//    "gpu":{"cc":"9.0","sms":132,...},"extra":{...}}
//
// Measurement::status maps onto the CLI's fields: "ok" is check "pass"; "fail"
// (output differs from the CPU reference; timing still recorded) is check
// "fail" with the reason as first_difference; "n/a" (the variant does not take
// the shape) is the error the CLI gives such a cell (exit_code 2, "<op> variant
// '<v>' does not apply to this input: <reason>"); "error" (a CUDA error while
// launching or timing) is an error with exit_code 3.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "build_info.hpp"
#include "common/device.hpp"
#include "cuda_util.hpp"
#include "json.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace moekit::bench {

// A JSON scalar: any integer, floating point number, text or bool.
struct Value {
  std::variant<std::int64_t, double, std::string, bool> v;
  template <class T>
    requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
  Value(T x) : v(static_cast<std::int64_t>(x)) {}
  Value(double x) : v(x) {}
  Value(bool x) : v(x) {}
  Value(std::string x) : v(std::move(x)) {}
  Value(std::string_view x) : v(std::string(x)) {}
  Value(const char* x) : v(std::string(x)) {}
};
using Fields = std::vector<std::pair<std::string, Value>>;

// What one cell measured. No formatting here.
struct Measurement {
  std::string status = "ok";  // ok | fail | n/a | error
  std::string reason;         // why n/a / error
  std::optional<TimingStats> stats;
  TimingOptions options;      // how it was timed
  int copies = 1;             // input copies rotated
  double bytes = 0;           // bytes moved per launch; 0: no bandwidth fields
};

struct Record {
  std::string table;    // which table of docs/bench/<family>.md the cell belongs to
  std::string variant;  // registry name (or a tuning configuration's name)
  Fields params;        // shape parameters (a bool is written "yes"/"no", as the CLI writes one)
  Measurement m;
  Fields extra;         // family-specific facts (auto's pick, ...)
  // The record's "variant_requested" ("": the variant itself), "dtype" (the
  // element type in the CLI report's words, "bfloat16", "int32"; "": null) and
  // "pdl" (whether the launch had it: the record's field, never a parameter,
  // so cells match the records of --pdl runs).
  std::string variant_requested{};  // {}: aggregate initializers that stop before it stay warning-free
  std::string dtype{};
  std::string pdl = "off";
  // Each stage of a launch made of stages timed alone, in order: the
  // record's "stage_us" (as a CLI run of such a launch with --bench reports it).
  std::vector<std::pair<std::string, TimingStats>> stages{};
};

// Times `launch` like time_launches and returns the Measurement; a CUDA error
// (thrown by the harness) becomes status "error".
template <class Launch>
Measurement measure(const Launch& launch, int copies, const TimingOptions& opt, double bytes = 0) {
  Measurement m;
  m.options = opt;
  m.copies = copies;
  m.bytes = bytes;
  try {
    m.stats = time_launches(launch, copies, opt);
  } catch (const std::exception& e) {
    m.status = "error";
    m.reason = e.what();
  }
  return m;
}

namespace detail {

// One JSON string escaper for the whole project (src/json.hpp).
inline std::string quote(std::string_view s) { return json_quote(s); }

// 7 significant digits: below the run-to-run noise of any timing, and short.
inline std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 9e15) return fmt::format("{}", static_cast<std::int64_t>(v));
  return fmt::format("{:.7g}", v);
}

inline std::string value(const Value& x) {
  const auto& v = x.v;
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) return number(*d);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  return quote(std::get<std::string>(v));
}

// A parameter as Report::params holds it: the text of a number, string as is,
// a bool as "yes"/"no" (the CLI's words), a non-finite number as null.
inline std::optional<std::string> param_text(const Value& x) {
  const auto& v = x.v;
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "yes" : "no";
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* d = std::get_if<double>(&v); d && !std::isfinite(*d)) return std::nullopt;
  return value(x);
}

// A CUDA version as the CLI writes it: 13000 -> "13.0"; text stays as it is.
inline std::string version(const Value& x) {
  if (const auto* i = std::get_if<std::int64_t>(&x.v)) return fmt::format("{}.{}", *i / 1000, (*i % 1000) / 10);
  return param_text(x).value_or("");
}

inline std::string object(const Fields& fields) {
  std::string o = "{";
  for (const auto& [k, v] : fields) {
    if (o.size() > 1) o += ",";
    o += quote(k) + ":" + value(v);
  }
  return o + "}";
}

}  // namespace detail

// The device facts of this process's current CUDA device: attributes from
// device_caps(), the driver / runtime versions (not device attributes) from
// device_props().
inline Fields device_fields() {
  const DeviceCaps& c = device_caps();
  const DeviceProps v = device_props();
  return {{"name", c.name},
          {"cc", fmt::format("{}.{}", c.cc_major, c.cc_minor)},
          {"sms", c.sm_count},
          {"l2_mib", c.l2_bytes >> 20},
          {"driver", v.driver_version},
          {"runtime", v.runtime_version}};
}

// Writes records to FILE (JSON Lines) or stdout. A file is written as
// FILE.partial and renamed by finish(), so a bench that dies half way leaves
// the previous results in place. `device`: "name" becomes the records'
// "device", "driver" their "driver", the other facts their "gpu" object.
class Writer {
 public:
  Writer(std::string bench, std::string family, std::string path, const Fields& device = device_fields(),
         std::string build = MOEKIT_BUILD_DESCRIBE)
      : bench_(std::move(bench)),
        family_(std::move(family)),
        path_(std::move(path)),
        build_(std::move(build)) {
    // "name" is the record's "device", "driver" its "driver"; the rest is "gpu".
    Fields gpu;
    for (const auto& [k, v] : device) {
      if (k == "name") device_name_ = detail::param_text(v).value_or("");
      else if (k == "driver") driver_ = detail::version(v);
      else if (k == "runtime") gpu.emplace_back(k, detail::version(v));
      else gpu.emplace_back(k, v);
    }
    if (!gpu.empty()) gpu_ = detail::object(gpu);
    out_ = path_.empty() ? stdout : std::fopen((path_ + ".partial").c_str(), "w");
    if (out_ == nullptr) throw std::runtime_error("cannot write " + path_ + ".partial");
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() {
    if (out_ != nullptr && out_ != stdout) std::fclose(out_);  // unfinished: .partial stays
  }

  // Device copy bandwidth (GB/s): the records' "peak_gbps", which "pct_of_peak" is relative to; 0: none.
  void set_copy_gbps(double gbps) { copy_gbps_ = gbps; }

  // The record of one cell: a Report, rendered as --results renders one.
  void write(const Record& r) {
    Report rep;
    rep.op = family_;
    rep.variant = r.variant;
    rep.variant_requested = r.variant_requested.empty() ? r.variant : r.variant_requested;
    for (const auto& [k, v] : r.params) rep.params.emplace_back(k, detail::param_text(v));
    rep.dtype = r.dtype;
    rep.device = device_name_;
    rep.driver = driver_;
    rep.build = build_;
    rep.pdl = r.pdl;
    rep.check.max_error = NAN;  // a bench records whether the output matched, not by how much
    rep.check.error_unit.clear();
    const std::string& st = r.m.status;
    if (st == "ok") {
      rep.check_status = "pass";
    } else if (st == "fail") {
      rep.check_status = "fail";
      rep.check.ok = false;
      rep.check.first_difference = r.m.reason.empty() ? "differs from the CPU reference" : r.m.reason;
    } else if (st == "n/a") {
      rep.error_code = 2;  // what `moekit <op> --variant <v>` exits with on this shape
      rep.error_message = fmt::format("{} variant '{}' does not apply to this input: {}", family_, r.variant,
                                      r.m.reason);
    } else {
      rep.error_code = 3;  // a CUDA error
      rep.error_message = r.m.reason.empty() ? st : r.m.reason;
    }
    if (r.m.stats) {
      const TimingOptions& o = r.m.options;
      rep.timing = *r.m.stats;
      rep.timing->method = o.graph ? "graph" : "events";
      rep.timing->cold = o.cold;
      rep.timing_setup = Report::TimingSetup{o.graph && !o.cold ? o.launches_per_graph : 1, o.warmup, r.m.copies};
      rep.bytes = r.m.bytes;
      if (r.m.bytes > 0) rep.peak_gbps = copy_gbps_;
    }
    rep.stage_timings = r.stages;
    rep.bench = bench_;
    rep.table = r.table;
    rep.gpu_json = gpu_;
    if (!r.extra.empty()) rep.extra_json = detail::object(r.extra);
    const std::string line = render_report(rep, Format::json);
    std::fputs(line.c_str(), out_);
    std::fflush(out_);
    ++count_;
  }

  // Closes and renames FILE.partial to FILE; returns the records written.
  int finish() {
    if (out_ != stdout) {
      std::fclose(out_);
      out_ = nullptr;
      if (std::rename((path_ + ".partial").c_str(), path_.c_str()) != 0)
        throw std::runtime_error("cannot rename " + path_ + ".partial");
      std::fprintf(stderr, "%s: %d records -> %s\n", bench_.c_str(), count_, path_.c_str());
    }
    return count_;
  }

 private:
  std::string bench_, family_, path_, build_, device_name_, driver_, gpu_;
  std::FILE* out_ = nullptr;
  double copy_gbps_ = 0;
  int count_ = 0;
};

// `--json FILE` from argv (removed from it); "" when absent (stdout).
inline std::string take_json_arg(int& argc, char** argv) {
  std::string path;
  int w = 1;
  for (int r = 1; r < argc; ++r) {
    const std::string_view a = argv[r];
    if (a == "--json" && r + 1 < argc) {
      path = argv[++r];
    } else if (a.starts_with("--json=")) {
      path = std::string(a.substr(7));
    } else {
      argv[w++] = argv[r];
    }
  }
  argc = w;
  return path;
}

}  // namespace moekit::bench
