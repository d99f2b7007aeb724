// `moekit compare BASE NEW`: per-cell verdicts between two result files, in
// the manner of nvbench's compare script: a change counts only when it is
// larger than the threshold and larger than the noise both runs measured.
#include <fmt/format.h>

#include <cstdio>
#include <map>
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

std::string us(const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : "-"; }

std::string cell_name(const Record& r) {
  std::string p = r.params_text();
  return fmt::format("{} {}{}{}", r.op, r.variant, p.empty() ? "" : " ", p);
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
                              double threshold, bool json) {
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
          "{}{{\"op\":{},\"variant\":{},\"params\":{{{}}},\"device\":{},\"base_us\":{},\"new_us\":{},"
          "\"ratio\":{},\"verdict\":{},\"base_line\":{},\"new_line\":{}}}",
          cells.empty() ? "" : ",", json_quote(r.op), json_quote(r.variant), params, json_quote(r.device),
          time(cell.base), time(cell.next), cell.ratio > 0 ? num(cell.ratio) : "null", json_quote(cell.verdict),
          cell.base ? std::to_string(cell.base->line) : "null", cell.next ? std::to_string(cell.next->line) : "null");
    }
    return fmt::format(
        "{{\"base\":{},\"new\":{},\"threshold\":{},\"cells\":[{}],\"summary\":{{\"regressed\":{},\"faster\":{},"
        "\"same\":{},\"untimed\":{},\"only_base\":{},\"only_new\":{},\"duplicates\":{}}}}}\n",
        json_quote(base_file), json_quote(new_file), num(threshold), cells, c.regressed, c.faster, c.same, c.untimed,
        c.only_base, c.only_new, c.duplicates);
  }
  // Text: one row per cell; the device column only when the files hold several.
  std::map<std::string, int> devices;
  for (const auto& cell : c.cells) devices[(cell.base ? cell.base : cell.next)->device]++;
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"cell", "base us (min..max)", "new us (min..max)", "ratio", "verdict"});
  for (const auto& cell : c.cells) {
    const Record& r = cell.base ? *cell.base : *cell.next;
    std::string name = cell_name(r);
    if (devices.size() > 1) name += " on " + r.device;
    const auto t = [](const Record* x) {
      return x && x->median_us ? fmt::format("{} ({}..{})", us(x->median_us), us(x->min_us), us(x->max_us))
                               : std::string(x ? "untimed" : "-");
    };
    rows.push_back({printable(name), t(cell.base), t(cell.next), cell.ratio > 0 ? fmt::format("{:.3f}", cell.ratio) : "-",
                    cell.verdict == "regressed" ? "REGRESSED" : cell.verdict});
  }
  std::vector<std::size_t> w(5, 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  std::string o = fmt::format("base {} vs new {} (threshold {:.1f}%, and outside both runs' spread)\n",
                              display_path(base_file), display_path(new_file), threshold * 100);
  for (const auto& row : rows)
    o += fmt::format("{:<{}}  {:>{}}  {:>{}}  {:>{}}  {}\n", row[0], w[0], row[1], w[1], row[2], w[2], row[3], w[3],
                     row[4]);
  o += fmt::format("{} cells: {} regressed, {} faster, {} same, {} untimed; {} only in base, {} only in new", c.cells.size(),
                   c.regressed, c.faster, c.same, c.untimed, c.only_base, c.only_new);
  if (c.duplicates) o += fmt::format("; {} repeated records (the last of each was used)", c.duplicates);
  return o + "\n";
}

int run_compare(const std::string& base, const std::string& next, double threshold, const std::string& format) {
  const auto b = records::read_file(base);
  const auto n = records::read_file(next);
  // An empty side compares nothing: "0 regressed" would pass a gate that
  // measured nothing (a failed benchmark run, a wrong path).
  for (const auto& [recs, file, what] : {std::tuple{&b, &base, "baseline"}, std::tuple{&n, &next, "new file"}})
    if (recs->empty())
      throw InputError(fmt::format("{}: no records: the {} is empty, so there is nothing to compare", display_path(*file), what));
  const Comparison c = compare(b, n, threshold);
  std::fputs(render_comparison(c, base, next, threshold, format == "json").c_str(), stdout);
  std::fflush(stdout);
  return c.regressed > 0 ? kMismatch : kOk;
}

}  // namespace moekit::tools
