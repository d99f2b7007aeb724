// Benchmark results as JSON Lines, one record per cell (docs: bench/render.py).
//
// nvbench style: a bench measures and fills a Measurement; Writer formats it.
// Markdown is the renderer's job (bench/render.py), never a bench program's.
//
//   {"bench":"bench_<f>","family":"<f>","table":"E=8 topk=2 uniform","variant":"tiny",
//    "params":{"E":8,...},"status":"ok","device":{...},"build":"2857308-dirty",
//    "timing":{"median_us":..,"min_us":..,"max_us":..,"samples":25,"mode":"graph","iters":20,
//              "warmup":5,"cold":false,"copies":16,"description":"..."},
//    "derived":{"bytes":..,"gbps":..,"copy_gbps":..,"pct_copy":..},"extra":{...}}
//
// status: "ok"; "fail" (output differs from the CPU reference; timing still
// recorded); "n/a" (the variant does not take the shape; reason says why);
// "error" (a CUDA error while launching or timing; reason holds it).
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
  Fields params;        // shape parameters
  Measurement m;
  Fields extra;         // family-specific facts (auto's pick, ...)
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

inline std::string object(const Fields& fields) {
  std::string o = "{";
  for (const auto& [k, v] : fields) {
    if (o.size() > 1) o += ",";
    o += quote(k) + ":" + value(v);
  }
  return o + "}";
}

}  // namespace detail

// Writes records to FILE (JSON Lines) or stdout. A file is written as
// FILE.partial and renamed by finish(), so a bench that dies half way leaves
// the previous results in place.
// The "device" object of this process's current CUDA device: attributes from
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

class Writer {
 public:
  Writer(std::string bench, std::string family, std::string path, const Fields& device = device_fields(),
         std::string build = MOEKIT_BUILD_DESCRIBE)
      : bench_(std::move(bench)),
        family_(std::move(family)),
        path_(std::move(path)),
        device_(detail::object(device)),
        build_(std::move(build)) {
    out_ = path_.empty() ? stdout : std::fopen((path_ + ".partial").c_str(), "w");
    if (out_ == nullptr) throw std::runtime_error("cannot write " + path_ + ".partial");
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() {
    if (out_ != nullptr && out_ != stdout) std::fclose(out_);  // unfinished: .partial stays
  }

  // Device copy bandwidth (GB/s) the derived "pct_copy" is relative to; 0: none.
  void set_copy_gbps(double gbps) { copy_gbps_ = gbps; }

  void write(const Record& r) {
    std::string line = "{" + q("bench") + ":" + q(bench_) + "," + q("family") + ":" + q(family_) + "," +
                       q("table") + ":" + q(r.table) + "," + q("variant") + ":" + q(r.variant) + "," +
                       q("params") + ":" + detail::object(r.params) + "," + q("status") + ":" + q(r.m.status);
    if (!r.m.reason.empty()) line += "," + q("reason") + ":" + q(r.m.reason);
    line += "," + q("device") + ":" + device_ + "," + q("build") + ":" + q(build_);
    if (r.m.stats) {
      const TimingStats& s = *r.m.stats;
      const TimingOptions& o = r.m.options;
      line += "," + q("timing") + ":" +
              detail::object({{"median_us", s.median_us},
                              {"min_us", s.min_us},
                              {"max_us", s.max_us},
                              {"samples", s.samples},
                              {"mode", o.graph ? "graph" : "events"},
                              {"iters", o.graph && !o.cold ? o.launches_per_graph : 1},
                              {"warmup", o.warmup},
                              {"cold", o.cold},
                              {"copies", r.m.copies},
                              {"description", s.mode}});
      if (r.m.bytes > 0 && s.median_us > 0) {
        const double gbps = r.m.bytes / (s.median_us * 1e-6) / 1e9;
        Fields d{{"bytes", r.m.bytes}, {"gbps", gbps}};
        if (copy_gbps_ > 0) {
          d.emplace_back("copy_gbps", copy_gbps_);
          d.emplace_back("pct_copy", 100.0 * gbps / copy_gbps_);
        }
        line += "," + q("derived") + ":" + detail::object(d);
      }
    }
    if (!r.extra.empty()) line += "," + q("extra") + ":" + detail::object(r.extra);
    line += "}\n";
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
  static std::string q(std::string_view s) { return detail::quote(s); }

  std::string bench_, family_, path_, device_, build_;
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
