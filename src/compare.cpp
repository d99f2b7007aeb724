// `moekit compare BASE NEW`: per-cell verdicts between two result files, in
// the manner of nvbench's compare script: a change counts only when it is
// larger than the threshold and larger than the noise both runs measured.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>

#include "display.hpp"
#include "errors.hpp"
#include "json.hpp"
#include "tools.hpp"

namespace moekit::tools {

using records::Record;

namespace {

// The last record of each key, in first-seen order; counts the repeats.
std::vector<const Record*> last_of_each(const std::vector<Record>& recs, int& duplicates) {
  std::map<std::string, std::size_t> at;
  std::vector<const Record*> out;
  for (const auto& r : recs) {
    auto [it, fresh] = at.emplace(r.key(), out.size());
    if (fresh) out.push_back(&r);
    else out[it->second] = &r, ++duplicates;
  }
  return out;
}

// Microseconds with 3 decimals; far outside 0.001..1e6 (a hand-made record) in
// 4 significant digits, so a row never holds hundreds of digits.
std::string us(const std::optional<double>& v) {
  if (!v) return "-";
  return (*v >= 1e-3 && *v < 1e6) || *v == 0 ? fmt::format("{:.3f}", *v) : fmt::format("{:.4g}", *v);
}

// Columns are aligned by characters, not bytes (a µ or an é is one column).
std::size_t width(std::string_view s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

std::string pad(const std::string& s, std::size_t w, bool right) {
  const std::string fill(w > width(s) ? w - width(s) : 0, ' ');
  return right ? fill + s : s + fill;
}

// The parameter columns of the text table: `chosen` ("all", or names), or by
// default those whose value is not the same in every cell. Throws InputError
// on a name no cell has.
std::vector<std::string> param_columns(const std::vector<const Record*>& cells, const std::vector<std::string>& chosen) {
  std::map<std::string, std::set<std::string>> values;  // name -> values ("-" where a cell lacks it)
  for (const Record* r : cells)
    for (const auto& [k, v] : r->params) values[k];
  for (auto& [k, vals] : values)
    for (const Record* r : cells) vals.insert(r->param_text(k));
  std::vector<std::string> cols;
  if (chosen.size() == 1 && chosen[0] == "all") {
    for (const auto& [k, vals] : values) cols.push_back(k);
  } else if (!chosen.empty()) {
    for (const auto& c : chosen) {
      if (!values.count(c)) {
        std::string names;
        for (const auto& [k, vals] : values) names += (names.empty() ? "" : ", ") + printable(k);
        throw InputError(fmt::format("compare --columns: no cell has a parameter '{}' (they have: {})", printable(c),
                                     names.empty() ? "none" : names));
      }
      if (std::find(cols.begin(), cols.end(), c) == cols.end()) cols.push_back(c);
    }
  } else {
    for (const auto& [k, vals] : values)
      if (vals.size() > 1) cols.push_back(k);
  }
  return cols;
}

std::string num(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : "null"; }
std::string num(const std::optional<double>& v) { return v ? num(*v) : "null"; }

}  // namespace

Comparison compare(const std::vector<Record>& base, const std::vector<Record>& next, double threshold) {
  Comparison c;
  const auto b = last_of_each(base, c.duplicates);
  const auto n = last_of_each(next, c.duplicates);
  std::map<std::string, const Record*> in_new;
  for (const Record* r : n) in_new[r->key()] = r;
  std::map<std::string, bool> matched;
  for (const Record* r : b) {
    Cell cell;
    cell.base = r;
    const auto it = in_new.find(r->key());
    if (it == in_new.end()) {
      cell.verdict = "only-base";
      ++c.only_base;
      c.cells.push_back(cell);
      continue;
    }
    matched[it->first] = true;
    cell.next = it->second;
    const Record& o = *r;
    const Record& x = *it->second;
    if (!o.median_us || !x.median_us) {
      cell.verdict = "untimed";
      ++c.untimed;
    } else {
      cell.ratio = *x.median_us / *o.median_us;
      // Outside both spreads: the new median above everything the base measured,
      // and the base median below everything the new run measured.
      if (cell.ratio > 1 + threshold && *x.median_us > *o.max_us && *o.median_us < *x.min_us) {
        cell.verdict = "regressed";
        ++c.regressed;
      } else if (cell.ratio < 1 / (1 + threshold) && *x.median_us < *o.min_us && *o.median_us > *x.max_us) {
        cell.verdict = "faster";
        ++c.faster;
      } else {
        cell.verdict = "same";
        ++c.same;
      }
    }
    c.cells.push_back(cell);
  }
  for (const Record* r : n) {
    if (matched.count(r->key())) continue;
    Cell cell;
    cell.next = r;
    cell.verdict = "only-new";
    ++c.only_new;
    c.cells.push_back(cell);
  }
  return c;
}

std::string render_comparison(const Comparison& c, const std::string& base_file, const std::string& new_file,
                              double threshold, bool json, const std::vector<std::string>& columns) {
  if (json) {
    std::string cells;
    for (const auto& cell : c.cells) {
      const Record& r = cell.base ? *cell.base : *cell.next;
      std::string params;
      for (const auto& [k, v] : r.params) params += fmt::format("{}{}:{}", params.empty() ? "" : ",", json_quote(k), v);
      const auto time = [](const Record* x) {
        return x && x->median_us ? fmt::format("{{\"median\":{},\"min\":{},\"max\":{}}}", num(x->median_us),
                                               num(x->min_us), num(x->max_us))
                                 : std::string("null");
      };
      cells += fmt::format(
          "{}{{\"op\":{},\"variant\":{},\"variant_requested\":{},\"params\":{{{}}},\"device\":{},\"base_us\":{},"
          "\"new_us\":{},\"ratio\":{},\"verdict\":{},\"base_line\":{},\"new_line\":{}}}",
          cells.empty() ? "" : ",", json_quote(r.op), json_quote(r.variant),
          r.requested.empty() ? std::string("null") : json_quote(r.requested), params, json_quote(r.device),
          time(cell.base), time(cell.next), cell.ratio > 0 ? num(cell.ratio) : "null", json_quote(cell.verdict),
          cell.base ? std::to_string(cell.base->line) : "null", cell.next ? std::to_string(cell.next->line) : "null");
    }
    return fmt::format(
        "{{\"base\":{},\"new\":{},\"threshold\":{},\"cells\":[{}],\"summary\":{{\"regressed\":{},\"faster\":{},"
        "\"same\":{},\"untimed\":{},\"only_base\":{},\"only_new\":{},\"duplicates\":{}}}}}\n",
        json_quote(base_file), json_quote(new_file), num(threshold), cells, c.regressed, c.faster, c.same, c.untimed,
        c.only_base, c.only_new, c.duplicates);
  }
  // Text: one row per cell. Columns for what tells cells apart: the op and the
  // device only when the files hold several, the parameters that differ (or
  // --columns); what every cell shares is said once above the table.
  std::vector<const Record*> recs;
  std::map<std::string, int> devices, ops;
  std::map<std::string, std::set<std::string>> labels_of;  // variant that ran -> its labels
  for (const auto& cell : c.cells) {
    const Record* r = cell.base ? cell.base : cell.next;
    recs.push_back(r);
    devices[r->device]++, ops[r->op]++;
    for (const Record* x : {cell.base, cell.next})
      if (x) labels_of[x->variant].insert(x->variant_label());
  }
  const std::vector<std::string> cols = param_columns(recs, columns);
  std::vector<std::string> shared;  // "name=value" of what every cell has alike
  if (ops.size() == 1) shared.push_back("op=" + printable(ops.begin()->first));
  if (devices.size() == 1 && !devices.begin()->first.empty())
    shared.push_back("device=" + printable(devices.begin()->first));
  if (!recs.empty())
    for (const auto& param : recs.front()->params) {
      const std::string& k = param.first;  // a named reference: clang 14 cannot capture a structured binding
      if (std::find(cols.begin(), cols.end(), k) != cols.end()) continue;
      const std::string t = recs.front()->param_text(k);
      if (std::all_of(recs.begin(), recs.end(), [&](const Record* r) { return r->param_text(k) == t; }))
        shared.push_back(printable(k) + "=" + printable(t));
    }
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head;
  if (ops.size() > 1) head.push_back("op");
  head.push_back("variant");
  for (const auto& k : cols) head.push_back(printable(k));
  if (devices.size() > 1) head.push_back("device");
  const std::size_t fixed = head.size();  // the cell's columns; then the times, ratio and verdict
  for (const char* h : {"base us (min..max)", "new us (min..max)", "ratio", "verdict"}) head.push_back(h);
  rows.push_back(head);
  for (const auto& cell : c.cells) {
    const Record& r = cell.base ? *cell.base : *cell.next;
    std::vector<std::string> row;
    if (ops.size() > 1) row.push_back(printable(r.op));
    row.push_back(printable(r.variant_label()));
    for (const auto& k : cols) row.push_back(printable(r.param_text(k)));
    if (devices.size() > 1) row.push_back(printable(r.device));
    const auto t = [](const Record* x) {
      return x && x->median_us ? fmt::format("{} ({}..{})", us(x->median_us), us(x->min_us), us(x->max_us))
                               : std::string(x ? "untimed" : "-");
    };
    row.push_back(t(cell.base));
    row.push_back(t(cell.next));
    row.push_back(cell.ratio > 0 ? fmt::format("{:.3f}", cell.ratio) : "-");
    row.push_back(cell.verdict == "regressed" ? "REGRESSED" : cell.verdict);
    rows.push_back(std::move(row));
  }
  std::vector<std::size_t> w(head.size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], width(row[i]));
  std::string o = fmt::format("base {} vs new {} (threshold {:.1f}%, and outside both runs' spread)\n",
                              display_path(base_file), display_path(new_file), threshold * 100);
  // Wrapped at ~100 columns, continuation lines indented under the first item.
  std::string line = "every cell:";
  for (const auto& item : shared) {
    if (width(line) + 1 + width(item) > 100 && line.size() > 12) o += line + "\n", line = std::string(11, ' ');
    line += " " + item;
  }
  if (!shared.empty()) o += line + "\n";
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool last = i + 1 == row.size();
      // Cell columns left-aligned, numbers right-aligned, the verdict as it is.
      line += last ? row[i] : pad(row[i], w[i], i >= fixed) + "  ";
    }
    o += line + "\n";
  }
  o += fmt::format("{} cells: {} regressed, {} faster, {} same, {} untimed; {} only in base, {} only in new", c.cells.size(),
                   c.regressed, c.faster, c.same, c.untimed, c.only_base, c.only_new);
  if (c.duplicates) o += fmt::format("; {} repeated records (the last of each was used)", c.duplicates);
  o += "\n";
  // Records that ran one variant under several requested names: a --variant
  // sweep without a GPU (each cell ran the CPU reference), or auto picking a
  // variant the sweep also lists. Their cells stay apart by the requested name.
  for (const auto& [ran, labels] : labels_of)
    if (labels.size() > 1)
      o += fmt::format("note: {} requested variants ran '{}'{}: their cells are kept apart by the requested name\n",
                       labels.size(), printable(ran),
                       ran == "reference" ? " (no GPU: the CPU reference ran for each)" : "");
  return o;
}

int run_compare(const std::string& base, const std::string& next, double threshold, const std::string& format,
                const std::vector<std::string>& columns) {
  const auto b = records::read_file(base);
  const auto n = records::read_file(next);
  // An empty side compares nothing: "0 regressed" would pass a gate that
  // measured nothing (a failed benchmark run, a wrong path).
  for (const auto& [recs, file, what] : {std::tuple{&b, &base, "baseline"}, std::tuple{&n, &next, "new file"}})
    if (recs->empty())
      throw InputError(fmt::format("{}: no records: the {} is empty, so there is nothing to compare", display_path(*file), what));
  const Comparison c = compare(b, n, threshold);
  std::fputs(render_comparison(c, base, next, threshold, format == "json", columns).c_str(), stdout);
  std::fflush(stdout);
  return c.regressed > 0 ? kMismatch : kOk;
}

}  // namespace moekit::tools
