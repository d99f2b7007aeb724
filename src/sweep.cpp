#include "sweep.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "display.hpp"
#include "errors.hpp"

namespace moekit {
namespace {

// Options whose values never contain a comma: numbers, variant names and
// the PDL mode (`--pdl on,off`).
bool list_valued(const CLI::Option& o) {
  if (o.check_name("--variant") || o.check_name("--pdl")) return true;
  const std::string t = o.get_type_name();
  return t.rfind("INT", 0) == 0 || t.rfind("UINT", 0) == 0 || t.rfind("FLOAT", 0) == 0;
}

struct Axis {
  std::size_t index;   // args[index] holds the value
  std::string prefix;  // "--tokens=" for the joined spelling, else ""
  std::string name;    // label name: the option as typed, without dashes
  std::vector<std::string> values;
};

std::vector<std::string> split_list(const std::string& opt, const std::string& v) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = v.find(',', start);
    std::string item = v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InputError(fmt::format("{}: empty item in the list '{}'", opt, printable(v)));
    items.push_back(std::move(item));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

}  // namespace

std::vector<SweepCell> expand_sweep(const CLI::App& sub, const std::vector<std::string>& args) {
  std::vector<Axis> axes;
  std::size_t out_index = 0, variant_index = 0;
  std::string out_prefix, variant_prefix;
  for (std::size_t i = 2; i < args.size(); ++i) {
    const std::string& tok = args[i];
    if (tok == "--") break;
    if (tok.size() < 2 || tok[0] != '-') continue;
    std::string name = tok, prefix;
    std::size_t vi = i + 1;
    if (const auto eq = tok.find('='); tok.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = tok.substr(0, eq);
      prefix = tok.substr(0, eq + 1);
      vi = i;
    } else if (tok[1] != '-' && tok.size() > 2) {
      // A short option with its value attached (-E8,16), as CLI11 reads it.
      const CLI::Option* s = sub.get_option_no_throw(tok.substr(0, 2));
      if (s && s->get_expected_max() != 0) name = prefix = tok.substr(0, 2), vi = i;
    }
    const CLI::Option* o = sub.get_option_no_throw(name);
    if (!o || o->get_expected_max() == 0) continue;  // unknown (CLI11 reports it) or a flag
    if (vi >= args.size()) break;
    if (vi != i) ++i;  // the value token is consumed
    const std::string value = args[vi].substr(prefix.size());
    if (o->check_name("--out")) out_index = vi, out_prefix = prefix;
    if (o->check_name("--variant")) variant_index = vi, variant_prefix = prefix;
    if (!list_valued(*o) || value.find(',') == std::string::npos) continue;
    std::string label = name.substr(name.find_first_not_of('-'));
    axes.push_back({vi, prefix, label, split_list(name, value)});
  }
  if (axes.empty()) return {};
  // --help shows the command's help once: one cell, the first of each list.
  if (std::find(args.begin(), args.end(), "--help") != args.end() || std::find(args.begin(), args.end(), "-h") != args.end())
    for (auto& a : axes) a.values.resize(1);

  std::size_t total = 1;
  for (const auto& a : axes) {
    total *= a.values.size();
    if (total > kMaxSweepCells)
      throw InputError(fmt::format("the sweep has more than {} cells; split it", kMaxSweepCells));
  }
  std::vector<SweepCell> cells;
  for (std::size_t n = 0; n < total; ++n) {
    SweepCell c{args, "", ""};
    std::string folder;
    std::size_t rest = n;  // mixed radix, the last axis fastest
    std::vector<std::size_t> pick(axes.size());
    for (std::size_t k = axes.size(); k-- > 0;) {
      pick[k] = rest % axes[k].values.size();
      rest /= axes[k].values.size();
    }
    for (std::size_t k = 0; k < axes.size(); ++k) {
      const std::string& v = axes[k].values[pick[k]];
      c.args[axes[k].index] = axes[k].prefix + v;
      // Values are the user's text: the label (stdout, stderr) shows them printable.
      c.label += (c.label.empty() ? "" : " ") + axes[k].name + "=" + printable(v);
      folder += (folder.empty() ? "" : "_") + axes[k].name + "=" + v;
    }
    if (variant_index) c.variant = c.args[variant_index].substr(variant_prefix.size());
    if (out_index) {
      const std::string dir = args[out_index].substr(out_prefix.size());
      c.args[out_index] = out_prefix + (std::filesystem::path(dir) / folder).string();
    }
    cells.push_back(std::move(c));
  }
  return cells;
}

}  // namespace moekit
