#include "records.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "display.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "json.hpp"
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

// json_quote() writes a byte that is not UTF-8 as a lone \udc80-\udcff
// (surrogateescape), which JSON parsers refuse. Before parsing, each lone one
// becomes the private-use character U+F780-U+F7FF; restore_bytes() turns those
// back into the bytes in the strings a record is read for. (A record holding
// U+F780-U+F7FF itself would read as bytes: moekit never writes them.)
constexpr char32_t kByteBase = 0xf700;

bool hex4(std::string_view s, std::size_t at, unsigned& v) {
  if (s.size() < at + 4) return false;
  v = 0;
  for (std::size_t k = at; k < at + 4; ++k) {
    const char c = s[k];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return false;
    v = v * 16 + unsigned(d);
  }
  return true;
}

std::string unescape_lone_surrogates(const std::string& line) {
  std::string o;
  o.reserve(line.size());
  bool after_high = false;  // the previous escape was \ud800-\udbff: a pair, left alone
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != '\\' || i + 1 == line.size()) {
      o += line[i];
      after_high = false;
      continue;
    }
    unsigned v = 0;
    if (line[i + 1] == 'u' && hex4(line, i + 2, v)) {
      if (!after_high && v >= 0xdc80 && v <= 0xdcff)
        o += fmt::format("\\u{:04x}", static_cast<unsigned>(kByteBase + (v & 0xff)));
      else
        o.append(line, i, 6);
      after_high = v >= 0xd800 && v <= 0xdbff;
      i += 5;
    } else {
      o.append(line, i, 2);  // \\, \", \n, ...: the escaped character is not an escape
      after_high = false;
      ++i;
    }
  }
  return o;
}

// U+F780-U+F7FF (EF 9E 80 - EF 9F BF) back to the bytes 0x80-0xff.
std::string restore_bytes(const std::string& s) {
  std::string o;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    if (b(i) == 0xef && i + 2 < s.size() && (b(i + 1) == 0x9e || b(i + 1) == 0x9f) && (b(i + 2) & 0xc0) == 0x80) {
      const char32_t cp = 0xf000 | char32_t(b(i + 1) & 0x3f) << 6 | (b(i + 2) & 0x3f);
      o += static_cast<char>(cp - kByteBase);
      i += 2;
    } else {
      o += s[i];
    }
  }
  return o;
}

std::string string_of(const json& v) { return restore_bytes(v.get<std::string>()); }

// A parameter's value as stored in Record::params: compact JSON, a string
// with its bytes restored (json_quote escapes them again).
std::string param_json(const json& v) { return v.is_string() ? json_quote(string_of(v)) : v.dump(); }

// A stored parameter value as params_text shows it: strings unquoted.
std::string param_value_text(const std::string& v) {
  if (v.size() < 2 || v.front() != '"') return v;
  return restore_bytes(json::parse(unescape_lone_surrogates(v)).get<std::string>());
}

}  // namespace

void check_results_target(const std::string& path, const std::vector<std::pair<std::string, std::string>>& inputs,
                          const std::string& out) {
  const auto refuse = [&](std::string_view what) { fail(path, fmt::format("--results: {}", what)); };
  namespace fs = std::filesystem;
  fs::path name = fs::path(path).filename();
  std::string ext = name.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (ext == ".npy") refuse("a .npy name; records are JSON lines (name the file .jsonl)");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse("it is a directory, not a regular file");
    if (S_ISFIFO(st.st_mode)) refuse("it is a FIFO, not a regular file");
    if (!S_ISREG(st.st_mode)) refuse("not a regular file");
    // As outputs: a file with no write bit says "keep me", to root too.
    if ((st.st_mode & 0222) == 0 || ::access(path.c_str(), W_OK) != 0)
      refuse(fmt::format("the file is read-only (mode {:04o}); remove it or make it writable", st.st_mode & 07777));
    for (const auto& [opt, in] : inputs) {
      struct stat is {};
      if (::stat(in.c_str(), &is) == 0 && is.st_dev == st.st_dev && is.st_ino == st.st_ino)
        refuse(fmt::format("it is this run's input {} (given to {})", display_path(in), opt));
    }
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    char magic[6] = {};
    if (f.fd >= 0 && ::read(f.fd, magic, sizeof magic) == 6 && std::memcmp(magic, "\x93NUMPY", 6) == 0)
      refuse("the file is a .npy array, not JSON lines");
  } else if (errno == ENOENT) {
    const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
    struct stat ds {};
    if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
      refuse(fmt::format("the folder {} does not exist", display_path(dir.string())));
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
      refuse(fmt::format("cannot create it in {}: {}", display_path(dir.string()), std::strerror(errno)));
  } else {
    refuse(std::strerror(errno));
  }
  if (!out.empty()) {
    // --out DIR must stay a folder the run can create: not PATH, nor below it.
    std::error_code e1, e2;
    const fs::path r = fs::weakly_canonical(fs::absolute(path), e1), o = fs::weakly_canonical(fs::absolute(out), e2);
    if (!e1 && !e2) {
      auto ri = r.begin(), oi = o.begin();
      while (ri != r.end() && oi != o.end() && *ri == *oi) ++ri, ++oi;
      if (ri == r.end()) refuse("it is the --out folder (or a folder above it)");
    }
  }
}

void append_line(const std::string& path, const std::string& line) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    fail(path, "cannot append the record: not a regular file");
  // O_NONBLOCK: a FIFO put there since must be refused, not waited on.
  // O_RDWR: the last byte is read for the newline guard.
  Fd f{::open(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644)};
  if (f.fd < 0 && errno == EACCES) f.fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) fail(path, fmt::format("cannot append the record: {}", std::strerror(errno)));
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    fail(path, "cannot append the record: not a regular file");
  // A cut last line (a killed editor, a full disk) must not swallow this
  // record: it starts on a line of its own. Racing appenders may both add the
  // '\n': a blank line, which readers skip.
  char last = '\n';
  if (st.st_size > 0 && ::pread(f.fd, &last, 1, st.st_size - 1) != 1) last = '\n';
  const std::string text = last == '\n' ? line : "\n" + line;
  const ssize_t n = ::write(f.fd, text.data(), text.size());
  if (n == static_cast<ssize_t>(text.size())) return;
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

std::string Record::variant_label() const {
  return requested.empty() || requested == variant ? variant : variant + " (from " + requested + ")";
}

std::string Record::key() const {
  std::string k = op + '\x1f' + variant_label() + '\x1f' + device;
  for (const auto& [name, v] : params) k += '\x1f' + name + '=' + v;
  return k;
}

std::string Record::params_text(const std::vector<std::string>& skip) const {
  std::string s;
  for (const auto& [name, v] : params) {
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    s += (s.empty() ? "" : " ") + name + "=" + param_value_text(v);
  }
  return s;
}

std::string Record::param_text(const std::string& name) const {
  const auto it = params.find(name);
  return it == params.end() ? std::string("-") : param_value_text(it->second);
}

std::optional<double> Record::number(const std::string& name) const {
  const auto it = params.find(name);
  if (it == params.end() || it->second.empty() || it->second.front() == '"') return std::nullopt;
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
      o = parse_json(unescape_lone_surrogates(text));
    } catch (const json::exception& e) {  // parse_error, and out_of_range.406 ("number overflow parsing '1e400'")
      fail(where, parse_message(e.what()));
    } catch (const JsonTooDeep&) {
      fail(where, fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    }
    if (!o.is_object()) fail(where, "not a JSON object");
    Record r;
    r.file = path;
    r.line = lineno;
    // A record whose check failed (a bench program records those, timed) or
    // that holds an error has no time to compare.
    const bool failed = (o.contains("error") && !o["error"].is_null()) ||
                        (o.contains("check") && o["check"].is_object() && o["check"].value("result", json()) == "fail");
    const json* op = o.contains("op") ? &o["op"] : nullptr;
    // An error record's variant is null when the run failed before choosing one.
    const bool variant_ok = o.contains("variant") && (o["variant"].is_string() || (failed && o["variant"].is_null()));
    if (!op && o.contains("family"))
      fail(where, "a bench record of the old schema (\"family\", \"timing\": {\"median_us\"}, ...); bench "
                  "programs now write the --results record: run the bench program again");
    if (!op || !op->is_string() || !variant_ok)
      fail(where, "not a moekit record: it needs a string \"op\" and \"variant\"");
    r.op = string_of(*op);
    if (o["variant"].is_string()) r.variant = string_of(o["variant"]);
    if (o.contains("variant_requested") && o["variant_requested"].is_string())
      r.requested = string_of(o["variant_requested"]);
    if (o.contains("device") && o["device"].is_string()) r.device = string_of(o["device"]);
    if (o.contains("params") && !(failed && o["params"].is_null())) {
      if (!o["params"].is_object()) fail(where, "\"params\" must be an object");
      for (const auto& [k, v] : o["params"].items()) r.params[restore_bytes(k)] = param_json(v);
    }
    // A report's "pdl": a run with PDL is its own cell (key, plot panel). Only
    // "on" is kept as a parameter, so records with PDL off match those taken
    // before --pdl existed (which ran without it) and CPU records ("n/a").
    if (o.contains("pdl") && o["pdl"] == "on" && !r.params.count("pdl")) r.params["pdl"] = "\"on\"";
    const json* t = o.contains("time_us") && o["time_us"].is_object() ? &o["time_us"] : nullptr;
    if (t && !failed) {
      r.median_us = number_at(*t, "median");
      r.min_us = number_at(*t, "min");
      r.max_us = number_at(*t, "max");
      if (const auto s = number_at(*t, "samples")) {
        // A count: 1e300 cast to int is undefined behaviour (found by fuzz_readers).
        if (!(*s >= 0 && *s <= 2147483647.0 && *s == std::floor(*s)))
          fail(where, fmt::format("\"samples\" must be a whole count in [0, 2147483647], got {}", *s));
        r.samples = static_cast<int>(*s);
      }
      if (!r.median_us || !r.min_us || !r.max_us || !std::isfinite(*r.max_us) || !(*r.min_us >= 0) ||
          *r.min_us > *r.median_us || *r.median_us > *r.max_us)
        fail(where, "the time needs finite numbers with 0 <= min <= median <= max");
      // Nothing measurable (a clock too coarse for the run): no time, like an
      // untimed run, so compare calls it untimed and plot leaves it out.
      if (*r.median_us == 0) r.median_us = r.min_us = r.max_us = std::nullopt;
    }
    if (!failed) {
      r.gbps = number_at(o, "gbps");
      if (r.gbps && !std::isfinite(*r.gbps)) r.gbps = std::nullopt;
    }
    if (o.contains("timing") && o["timing"].is_object()) {
      const json m = o["timing"].value("method", json());
      if (m.is_string()) r.timing_method = m.get<std::string>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace moekit::records
