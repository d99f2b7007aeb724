// `moekit trace import`: engines' routing dumps -> OUTDIR/layer<L>.npy, int32
// [tokens, topk] per MoE layer. The formats and where they come from are in
// docs/trace.md.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>

#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "json_read.hpp"
#include "outputs.hpp"
#include "tools.hpp"

namespace moekit::tools {

using nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& where, std::string_view what) {
  throw InputError(fmt::format("{}: {}", where, what));
}

// A parsed JSON document takes several times its text in memory.
std::string read_all(const std::string& path) { return records::read_regular_file(path, 24); }

// "parse error at line 3, column 5: syntax error ..." -> (3, "column 5: syntax error ...").
std::pair<int, std::string> parse_error_parts(const std::string& what) {
  std::string m = what;
  if (const auto b = m.find("] "); m.rfind("[json.exception", 0) == 0 && b != std::string::npos) m = m.substr(b + 2);
  int line = 0;
  if (const auto l = m.find("at line "); l != std::string::npos) {
    line = std::atoi(m.c_str() + l + 8);
    if (const auto comma = m.find(", ", l); comma != std::string::npos) m = m.substr(0, l) + "at " + m.substr(comma + 2);
  }
  return {line, m};
}

// The 1-based line of nlohmann's quoted token ("number overflow parsing '1e400'",
// which carries no position) in `text`; 0 when not found.
int line_of_quoted_token(std::string_view text, const std::string& msg) {
  const auto a = msg.find('\''), b = msg.rfind('\'');
  if (a == std::string::npos || b <= a + 1) return 0;
  const auto at = text.find(std::string_view(msg).substr(a + 1, b - a - 1));
  return at == std::string_view::npos ? 0 : 1 + int(std::count(text.begin(), text.begin() + at, '\n'));
}

// Parses one JSON text at `name` (line `line` of it, or the whole file when
// 0). Every problem, nlohmann's own exceptions included, becomes an InputError
// "NAME:LINE: problem" without the library's "[json.exception...]" tag.
json parse_at(std::string_view text, const std::string& name, int line) {
  try {
    return parse_json(text);
  } catch (const JsonTooDeep&) {
    fail(line > 0 ? fmt::format("{}:{}", name, line) : name, fmt::format("nested deeper than {} levels", kMaxJsonDepth));
  } catch (const json::exception& e) {
    auto [at, msg] = parse_error_parts(e.what());
    if (line > 0) at = line;  // one line was parsed: nlohmann's line is 1
    else if (at == 0) at = line_of_quoted_token(text, msg);
    // nlohmann quotes the input it stopped at ("last read: '...'"): raw bytes.
    fail(at > 0 ? fmt::format("{}:{}", name, at) : name, printable(msg));
  }
}

// An id or layer that nlohmann read as unsigned 64-bit (>= 2^63 does not fit
// int64: get<int64_t>() would wrap it to a negative number).
bool beyond_int64(const json& x) {
  return x.is_number_unsigned() && x.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max());
}

// Collects tokens per layer, checking widths and ranges.
class Sink {
 public:
  explicit Sink(const ImportOptions& o) : o_(o) {}

  // One token's experts at one layer; `where` locates it for errors.
  template <class Ids>
  void add(std::int64_t layer, const Ids& ids, const std::function<std::string()>& where) {
    if (layer < 0 || layer > 1000000) fail(where(), fmt::format("layer {} is outside [0, 1000000]", layer));
    LayerIds& l = layers_[layer];
    const auto k = static_cast<std::int64_t>(ids.size());
    if (k == 0) fail(where(), "an empty expert list");
    if (l.topk < 0) l.topk = k, l.first = where();
    else if (k != l.topk)
      fail(where(), fmt::format("{} experts, but layer {} had {} per token so far (from {}): ragged records", k,
                                layer, l.topk, l.first));
    for (const std::int64_t e : ids) {
      if (o_.num_experts > 0 && (e < 0 || e >= o_.num_experts))
        fail(where(), fmt::format("expert id {} at layer {} is outside [0, {}) (-E)", e, layer, o_.num_experts));
      if (e < std::numeric_limits<std::int32_t>::min() || e > std::numeric_limits<std::int32_t>::max())
        fail(where(), fmt::format("expert id {} does not fit int32", e));
      l.ids.push_back(static_cast<std::int32_t>(e));
    }
  }
  std::map<std::int64_t, LayerIds> take() { return std::move(layers_); }

 private:
  const ImportOptions& o_;
  std::map<std::int64_t, LayerIds> layers_;
};

std::vector<std::int64_t> int_list(const json& v, const std::function<std::string()>& where, const char* what) {
  if (!v.is_array()) fail(where(), fmt::format("{} must be a list of integers", what));
  std::vector<std::int64_t> out;
  out.reserve(v.size());
  for (const auto& x : v) {
    if (!x.is_number_integer()) fail(where(), fmt::format("{} holds {}, not an integer", what, x.dump()));
    if (beyond_int64(x)) fail(where(), fmt::format("expert id {} does not fit int32", x.dump()));
    out.push_back(x.get<std::int64_t>());
  }
  return out;
}

// ---- json: [token][layer][topk] per request --------------------------------

std::vector<std::int32_t> base64_int32(const std::string& s, const std::function<std::string()>& where) {
  static const std::string abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t i = 0;
  for (; i < s.size() && s[i] != '='; ++i) {
    const auto p = abc.find(s[i]);
    if (p == std::string::npos) fail(where(), fmt::format("a string that is not base64 (character {})", i));
    acc = (acc << 6) | std::uint32_t(p);
    bits += 6;
    if (bits >= 8) bits -= 8, bytes += char((acc >> bits) & 0xff);
  }
  if (bytes.size() % 4) fail(where(), fmt::format("base64 of {} bytes, not whole int32 values", bytes.size()));
  std::vector<std::int32_t> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), bytes.size());  // little-endian, as SGLang writes it (x86/ARM hosts)
  return v;
}

class JsonImport {
 public:
  JsonImport(const ImportOptions& o, Sink& sink) : o_(o), sink_(sink) {}

  // One parsed value: `where` is "file" or "file:line".
  void value(const json& v, const std::string& where) {
    where_ = where;
    if (v.is_object()) return object(v);
    if (!v.is_array()) fail(where, "expected a list of requests, a request ([token][layer][topk] lists) or an object");
    const int d = depth(v);
    if (d == 4) {
      for (const auto& r : v) request(r);
    } else if (d == 3) {
      request(v);
    } else if (!v.empty()) {
      fail(where, fmt::format("lists nested {} deep: expected [token][layer][topk] (3) or a list of such requests (4)",
                              d));
    }
  }
  std::int64_t requests() const { return requests_; }

 private:
  // Depth of nested lists down to the first element that is not a non-empty
  // list: [[["3"]]] is 3 deep, and its "3" is then refused as "not an integer"
  // where it stands.
  static int depth(const json& v) {
    int d = 0;
    const json* p = &v;
    while (p->is_array() && !p->empty()) ++d, p = &(*p)[0];
    return d;
  }

  void object(const json& o) {
    for (const auto& f : o_.fields)
      if (const auto it = o.find(f); it != o.end()) {
        if (it->is_string()) base64(it->get<std::string>(), f);
        else if (it->is_array()) request(*it);
        else if (!it->is_null()) fail(where_, fmt::format("\"{}\" is neither a list nor a base64 string", printable(f)));
      }
    // The fields can sit deeper (vLLM: choices[i].routed_experts; SGLang:
    // meta_info.routed_experts, choices[i].sgl_ext.routed_experts).
    for (const auto& [k, v] : o.items()) {
      if (std::find(o_.fields.begin(), o_.fields.end(), k) != o_.fields.end()) continue;
      if (v.is_object()) object(v);
      else if (v.is_array())
        for (const auto& x : v)
          if (x.is_object()) object(x);
    }
  }

  void request(const json& r) {
    ++requests_;
    if (!r.is_array()) fail(where_, fmt::format("request {}: not a [token][layer][topk] list", requests_));
    for (std::size_t t = 0; t < r.size(); ++t) {
      const auto where = [&] { return fmt::format("{}: request {}, token {}", where_, requests_, t); };
      if (!r[t].is_array()) fail(where(), "not a [layer][topk] list");
      if (layers_ < 0) layers_ = static_cast<std::int64_t>(r[t].size());
      if (static_cast<std::int64_t>(r[t].size()) != layers_)
        fail(where(), fmt::format("{} layers, but earlier tokens have {}: ragged records", r[t].size(), layers_));
      for (std::size_t l = 0; l < r[t].size(); ++l) {
        const auto at = [&] { return fmt::format("{}, layer {}", where(), l); };
        sink_.add(static_cast<std::int64_t>(l), int_list(r[t][l], at, "a layer's entry"), at);
      }
    }
  }

  void base64(const std::string& s, const std::string& field) {
    ++requests_;
    const auto where = [&] { return fmt::format("{}: request {} (\"{}\")", where_, requests_, printable(field)); };
    if (o_.layers < 1 || o_.topk < 1)
      fail(where(), "a base64 int32 array (SGLang): give --layers and --topk to shape it [tokens, layers, topk]");
    const auto v = base64_int32(s, where);
    // --layers and --topk come from the command line: their product may overflow.
    std::int64_t per_token = 0;
    if (__builtin_mul_overflow(o_.layers, o_.topk, &per_token) || std::int64_t(v.size()) % per_token)
      fail(where(), fmt::format("{} ids are not whole tokens of {} layers x top-{}", v.size(), o_.layers, o_.topk));
    if (layers_ >= 0 && layers_ != o_.layers) fail(where(), "a different layer count than earlier requests");
    layers_ = o_.layers;
    for (std::int64_t t = 0; t < std::int64_t(v.size()) / per_token; ++t)
      for (std::int64_t l = 0; l < o_.layers; ++l) {
        const auto at = [&] { return fmt::format("{}, token {}, layer {}", where(), t, l); };
        const auto* p = v.data() + (t * o_.layers + l) * o_.topk;
        sink_.add(l, std::vector<std::int64_t>(p, p + o_.topk), at);
      }
  }

  const ImportOptions& o_;
  Sink& sink_;
  std::string where_;
  std::int64_t requests_ = 0;
  std::int64_t layers_ = -1;
};

void import_json(const std::string& path, JsonImport& imp) {
  const std::string text = read_all(path);
  const std::string name = display_path(path);
  // One line holding the whole document: its values are at NAME:1.
  const auto nl = text.find('\n');
  const bool one_line = nl == std::string::npos || text.find_first_not_of(" \t\r\n", nl) == std::string::npos;
  json whole;
  bool parsed = false;
  try {
    whole = parse_json(text);
    parsed = true;
  } catch (const JsonTooDeep&) {
  } catch (const json::exception&) {
  }
  if (parsed) return imp.value(whole, one_line ? name + ":1" : name);
  // Several values: JSON lines (one request, or one response, per line),
  // when the first line is a value of its own; else the whole file's error.
  if (nl == std::string::npos || !json::accept(text.substr(0, nl))) (void)parse_at(text, name, 0);
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    imp.value(parse_at(line, name, n), fmt::format("{}:{}", name, n));
  }
}

// ---- jsonl: {"layer": L, "experts": [...] or [[...], ...]} per line ---------

void import_jsonl(const std::string& path, const ImportOptions& o, Sink& sink) {
  const std::string text = read_all(path);
  const std::string name = display_path(path);
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto where = [&] { return fmt::format("{}:{}", name, n); };
    const json v = parse_at(line, name, n);
    if (!v.is_object()) fail(where(), "not a JSON object");
    const auto l = v.find(o.layer_field);
    if (l == v.end() || !l->is_number_integer())
      fail(where(), fmt::format("no integer \"{}\" field (--layer-field)", printable(o.layer_field)));
    const auto e = v.find(o.experts_field);
    if (e == v.end() || !e->is_array())
      fail(where(), fmt::format("no \"{}\" list (--experts-field)", printable(o.experts_field)));
    if (beyond_int64(*l)) fail(where(), fmt::format("layer {} is outside [0, 1000000]", l->dump()));
    const std::int64_t layer = l->get<std::int64_t>();
    if (!e->empty() && (*e)[0].is_array()) {  // several tokens of one layer
      for (std::size_t t = 0; t < e->size(); ++t) {
        const auto at = [&] { return fmt::format("{}:{}: token {}", name, n, t); };
        sink.add(layer, int_list((*e)[t], at, "a token's experts"), at);
      }
    } else {
      sink.add(layer, int_list(*e, where, "the expert list"), where);
    }
  }
}

// ---- csv: header, a layer column and a "[3, 17]" experts column ---------------

// Splits one CSV line: "quoted, fields" and unquoted [bracketed, lists] stay whole.
std::vector<std::string> csv_fields(const std::string& line, const std::function<std::string()>& where) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (true) {
    std::string f;
    if (i < line.size() && line[i] == '"') {
      for (++i;; ++i) {
        if (i >= line.size()) fail(where(), "an unterminated quoted field");
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') f += '"', ++i;
          else break;
        } else {
          f += line[i];
        }
      }
      ++i;
    } else if (i < line.size() && line[i] == '[') {
      const auto close = line.find(']', i);
      if (close == std::string::npos) fail(where(), "an unterminated [ list");
      f = line.substr(i, close + 1 - i);
      i = close + 1;
    }
    while (i < line.size() && line[i] != ',') f += line[i++];
    out.push_back(f);
    if (i >= line.size()) return out;
    ++i;  // the comma
  }
}

std::string trim(std::string s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") + 1 - a);
}

std::int64_t parse_int(const std::string& s, const std::function<std::string()>& where, const char* what) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range && end == s.data() + s.size())
    fail(where(), fmt::format("{} {} is out of range (it does not fit int64)", what, printable(s, 40)));
  if (s.empty() || ec != std::errc() || end != s.data() + s.size())
    fail(where(), fmt::format("{} '{}' is not an integer", what, printable(s, 40)));
  return v;
}

void import_csv(const std::string& path, const ImportOptions& o, Sink& sink) {
  std::string text = read_all(path);
  // A UTF-8 byte-order mark (Excel's "CSV UTF-8") is no part of the first column's name.
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  const std::string name = display_path(path);
  std::istringstream in(text);
  std::string line;
  int n = 0;
  std::size_t layer_col = 0, experts_col = 0, width = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++n;
    const auto where = [&] { return fmt::format("{}:{}", name, n); };
    if (trim(line).empty()) continue;
    const auto f = csv_fields(line, where);
    if (!header) {
      std::vector<std::string> names;
      for (const auto& x : f) names.push_back(trim(x));
      const auto find = [&](const std::string& want, const char* opt) {
        const auto it = std::find(names.begin(), names.end(), want);
        if (it == names.end())
          fail(where(), fmt::format("the header has no \"{}\" column ({})", printable(want), opt));
        return static_cast<std::size_t>(it - names.begin());
      };
      layer_col = find(o.layer_field, "--layer-field");
      experts_col = find(o.experts_field, "--experts-field");
      width = f.size();
      header = true;
      continue;
    }
    if (f.size() != width)
      fail(where(), fmt::format("{} fields, the header has {} (quote an experts list that holds commas, or write "
                                "it in [brackets])",
                                f.size(), width));
    const std::int64_t layer = parse_int(trim(f[layer_col]), where, "the layer");
    std::string list = trim(f[experts_col]);
    if (list.size() >= 2 && list.front() == '[' && list.back() == ']') list = list.substr(1, list.size() - 2);
    std::vector<std::int64_t> ids;
    std::string item;
    for (std::size_t i = 0; i <= list.size(); ++i) {
      if (i == list.size() || list[i] == ',' || list[i] == ' ' || list[i] == '\t') {
        if (!item.empty()) ids.push_back(parse_int(item, where, "an expert id"));
        else if (i < list.size() && list[i] == ',') fail(where(), "an empty item in the expert list");
        item.clear();
      } else {
        item += list[i];
      }
    }
    sink.add(layer, ids, where);
  }
  if (!header) fail(name, "empty: a CSV needs a header line naming its columns");
}

}  // namespace

std::map<std::int64_t, LayerIds> import_trace(const ImportOptions& o) {
  Sink sink(o);
  JsonImport json_imp(o, sink);
  for (const auto& in : o.inputs) {
    if (o.format == "json") import_json(in, json_imp);
    else if (o.format == "jsonl") import_jsonl(in, o, sink);
    else if (o.format == "csv") import_csv(in, o, sink);
    else throw InputError(fmt::format("trace import: unknown format '{}' (json, jsonl or csv)", printable(o.format)));
  }
  auto layers = sink.take();
  if (layers.empty())
    throw InputError(fmt::format("{}: no routed experts found{}", display_path(o.inputs.empty() ? "" : o.inputs[0]),
                                 o.format == "json" ? " (see --field)" : ""));
  return layers;
}

int run_trace_import(const ImportOptions& o) {
  const auto layers = import_trace(o);
  std::vector<npy::Array> arrays;
  std::vector<std::pair<std::string, const npy::Array*>> files;
  arrays.reserve(layers.size());
  for (const auto& [l, ids] : layers) {
    const std::int64_t tokens = std::int64_t(ids.ids.size()) / ids.topk;
    arrays.push_back(make_array(npy::DType::i4, {tokens, ids.topk}, ids.ids));
    files.emplace_back(fmt::format("layer{}.npy", l), &arrays.back());
  }
  std::vector<std::string> targets;
  for (const auto& f : files) targets.push_back((std::filesystem::path(o.out) / f.first).string());
  outputs::refuse_inputs_as_targets(targets, o.inputs);  // a dump named layer3.npy in the folder stays
  const auto paths = outputs::write_folder(o.out, files);  // all layers or none
  std::size_t i = 0;
  for (const auto& [l, ids] : layers)
    fmt::print("wrote {}: int32 [{}, {}]\n", display_path(paths[i++]), ids.ids.size() / ids.topk, ids.topk);
  std::fflush(stdout);
  return kOk;
}

}  // namespace moekit::tools
