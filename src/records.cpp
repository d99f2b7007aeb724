#include "records.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include "display.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "json_read.hpp"

namespace moekit::records {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& path, std::string_view what) {
  throw InputError(fmt::format("{}: {}", display_path(path), what));
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
// without the bracketed id and the line (always 1: one line is parsed at a time).
std::string parse_message(const std::string& what) {
  std::string m = what;
  if (const auto b = m.find("] "); m.rfind("[json.exception", 0) == 0 && b != std::string::npos) m = m.substr(b + 2);
  if (const auto l = m.find("line 1, "); l != std::string::npos) m.erase(l, 8);
  return printable(m);  // nlohmann quotes the input it stopped at ("last read: '...'"): raw bytes
}

std::optional<double> number_at(const json& o, const char* key) {
  if (!o.is_object()) return std::nullopt;
  const auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

void append_line(const std::string& path, const std::string& line) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail(path, "cannot append the record: not a regular file");
  // O_NONBLOCK: a FIFO put there since must be refused, not waited on.
  Fd f{::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644)};
  if (f.fd < 0) fail(path, fmt::format("cannot append the record: {}", std::strerror(errno)));
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    fail(path, "cannot append the record: not a regular file");
  const ssize_t n = ::write(f.fd, line.data(), line.size());
  if (n == static_cast<ssize_t>(line.size())) return;
  const int e = n < 0 ? errno : ENOSPC;
  if (n > 0) {
    // Cut our partial line off again, unless another writer appended since.
    const off_t end = ::lseek(f.fd, 0, SEEK_CUR);
    if (end >= n && ::fstat(f.fd, &st) == 0 && st.st_size == end) (void)!::ftruncate(f.fd, end - n);
  }
  fail(path, fmt::format("cannot append the record: {}", std::strerror(e)));
}

std::string read_regular_file(const std::string& path, double bytes_per_byte) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) fail(path, fmt::format("cannot read: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) fail(path, "not a regular file");
  require_host_memory(double(st.st_size) * (1 + bytes_per_byte), fmt::format("reading {}", display_path(path)));
  std::string text;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n == 0) return text;
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, fmt::format("cannot read: {}", std::strerror(errno)));
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
}

std::string Record::key() const {
  std::string k = op + '\x1f' + variant + '\x1f' + device;
  for (const auto& [name, v] : params) k += '\x1f' + name + '=' + v;
  return k;
}

std::string Record::params_text(const std::vector<std::string>& skip) const {
  std::string s;
  for (const auto& [name, v] : params) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    std::string val = v;
    if (val.size() >= 2 && val.front() == '"') val = json::parse(val).get<std::string>();
    s += (s.empty() ? "" : " ") + name + "=" + val;
  }
  return s;
}

std::optional<double> Record::number(const std::string& name) const {
  const auto it = params.find(name);
  if (it == params.end()) return std::nullopt;
  const json v = json::parse(it->second);
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}

std::vector<Record> read_file(const std::string& path) {
  std::istringstream in(read_regular_file(path, 2));
  std::vector<Record> out;
  std::string text;
  int lineno = 0;
  while (std::getline(in, text)) {
    ++lineno;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, lineno);
    json o;
    try {
      o = parse_json(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range.406 ("number overflow parsing '1e400'")
      fail(where, parse_message(e.what()));
    } catch (const JsonTooDeep&) {
      fail(where, fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    }
    if (!o.is_object()) fail(where, "not a JSON object");
    Record r;
    r.file = path;
    r.line = lineno;
    // The report's "op", or a bench record's "family".
    const json* op = o.contains("op") ? &o["op"] : o.contains("family") ? &o["family"] : nullptr;
    if (!op || !op->is_string() || !o.contains("variant") || !o["variant"].is_string())
      fail(where, "not a moekit record: it needs a string \"op\" (or \"family\") and \"variant\"");
    r.op = op->get<std::string>();
    r.variant = o["variant"].get<std::string>();
    if (o.contains("device")) {
      const json& d = o["device"];
      if (d.is_string()) r.device = d.get<std::string>();
      else if (d.is_object() && d.contains("name") && d["name"].is_string()) r.device = d["name"].get<std::string>();
    }
    if (o.contains("params")) {
      if (!o["params"].is_object()) fail(where, "\"params\" must be an object");
      for (const auto& [k, v] : o["params"].items()) r.params[k] = v.dump();
    }
    // A report's "pdl": a run with PDL is its own cell (key, plot panel). Only
    // "on" is kept as a parameter, so records with PDL off match those taken
    // before --pdl existed (which ran without it) and CPU records ("n/a").
    if (o.contains("pdl") && o["pdl"] == "on" && !r.params.count("pdl")) r.params["pdl"] = "\"on\"";
    const bool failed = (o.contains("error") && !o["error"].is_null()) ||
                        (o.contains("status") && o["status"] != "ok");
    // Report: time_us {median, min, max, samples}; bench: timing {median_us, ...}.
    const json* t = nullptr;
    std::string suffix;
    if (o.contains("time_us") && o["time_us"].is_object()) t = &o["time_us"];
    else if (o.contains("timing") && o["timing"].is_object() && o["timing"].contains("median_us"))
      t = &o["timing"], suffix = "_us";
    if (t && !failed) {
      r.median_us = number_at(*t, ("median" + suffix).c_str());
      r.min_us = number_at(*t, ("min" + suffix).c_str());
      r.max_us = number_at(*t, ("max" + suffix).c_str());
      if (const auto s = number_at(*t, "samples")) {
        // A count: 1e300 cast to int is undefined behaviour (found by fuzz_readers).
        if (!(*s >= 0 && *s <= 2147483647.0 && *s == std::floor(*s)))
          fail(where, fmt::format("\"samples\" must be a whole count in [0, 2147483647], got {}", *s));
        r.samples = static_cast<int>(*s);
      }
      if (!r.median_us || !r.min_us || !r.max_us || !(*r.min_us > 0) || *r.min_us > *r.median_us ||
          *r.median_us > *r.max_us)
        fail(where, "the time needs numbers with 0 < min <= median <= max");
    }
    if (!failed) {
      if (auto g = number_at(o, "gbps")) r.gbps = g;
      else if (o.contains("derived")) r.gbps = number_at(o["derived"], "gbps");
    }
    if (o.contains("timing") && o["timing"].is_object()) {
      const json& m = o["timing"].contains("method") ? o["timing"]["method"] : o["timing"].value("mode", json());
      if (m.is_string()) r.timing_method = m.get<std::string>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace moekit::records
