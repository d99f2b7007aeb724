// `moekit plot`: plain SVG charts of result records (no plotting library).
// Every element a reader (or a test) needs is marked: <g class="panel">,
// <polyline class="series" data-variant=...>, <circle class="point" data-x
// data-y>, <text class="title|xlabel|ylabel|legend">.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "display.hpp"
#include "errors.hpp"
#include "outputs.hpp"
#include "tools.hpp"

namespace moekit::tools {

using records::Record;

namespace {

constexpr double kPanelW = 720, kPanelH = 380;
constexpr double kLeft = 80, kRight = 250, kTop = 46, kBottom = 56;  // panel margins
constexpr std::size_t kLegendChars = 30;  // longer variant names are cut (the full name is in data-variant)
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string xml(std::string_view s) {
  std::string o;
  for (const char c : printable(s)) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c;
    }
  }
  return o;
}

struct Point {
  double x, y, lo, hi;  // lo/hi: the measured spread (time only), else y
};

// What a record is grouped by: op, device, and the chosen parameters.
std::string group_key(const Record& r, const std::vector<std::string>& params) {
  std::string k = r.op + '\x1f' + r.device;
  for (const auto& p : params) {
    const auto it = r.params.find(p);
    k += '\x1f' + p + '=' + (it == r.params.end() ? "-" : it->second);
  }
  return k;
}

// The parameters that tell panels apart: all but x, less those that follow
// from x and the rest (a flat slot count and a padded size grow with the token
// count), which would otherwise make every point its own panel. A parameter is
// dropped when, without it, no panel would hold two points of one variant at
// one x that differ in it. Candidates are tried most-distinct-values first, so
// a derived parameter goes before the independent one it would shield (a
// padded size that encodes E is dropped, E stays).
std::vector<std::string> group_params(const std::vector<const Record*>& recs, const std::string& x) {
  const auto value = [](const Record& r, const std::string& p) {
    const auto it = r.params.find(p);
    return it == r.params.end() ? std::string("-") : it->second;
  };
  std::map<std::string, std::set<std::string>> distinct;
  for (const Record* r : recs)
    for (const auto& [k, v] : r->params)
      if (k != x) distinct[k];
  for (auto& [k, vals] : distinct)
    for (const Record* r : recs) vals.insert(value(*r, k));
  std::vector<std::string> g, order;
  for (const auto& [k, vals] : distinct) {
    g.push_back(k);
    if (vals.size() > 1) order.push_back(k);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& a, const auto& b) { return distinct[a].size() > distinct[b].size(); });
  for (const auto& p : order) {
    std::vector<std::string> rest;
    for (const auto& k : g)
      if (k != p) rest.push_back(k);
    std::map<std::string, std::string> seen;  // (group, variant, x) -> value of p
    bool collides = false;
    for (const Record* r : recs) {
      const auto [it, fresh] =
          seen.emplace(group_key(*r, rest) + '\x1e' + r->variant + '\x1e' + value(*r, x), value(*r, p));
      if (!fresh && it->second != value(*r, p)) {
        collides = true;
        break;
      }
    }
    if (!collides) g = rest;
  }
  // A dropped parameter that is one constant per panel (topk = 2 beside E = 8)
  // comes back: it splits nothing and belongs in the title.
  for (const auto& p : order) {
    if (std::find(g.begin(), g.end(), p) != g.end()) continue;
    std::map<std::string, std::string> per_panel;
    bool constant = true;
    for (const Record* r : recs) {
      const auto [it, fresh] = per_panel.emplace(group_key(*r, g), value(*r, p));
      constant = constant && (fresh || it->second == value(*r, p));
    }
    if (constant) g.insert(std::upper_bound(g.begin(), g.end(), p), p);
  }
  return g;
}

// Log axis: whole decades around [lo, hi], ticks at 1 (and 2, 5 when the
// range spans at most two decades; every few decades when it spans many).
struct LogAxis {
  double lo, hi;
  std::vector<double> ticks;
  LogAxis(double mn, double mx) {
    lo = std::pow(10.0, std::floor(std::log10(mn)));
    hi = std::pow(10.0, std::ceil(std::log10(mx)));
    if (hi <= lo) hi = lo * 10;
    const double decades = std::log10(hi / lo);
    const bool fine = decades <= 2.01;
    const double step = std::pow(10.0, std::max(1.0, std::ceil(decades / 10)));  // at most ~10 labels
    for (double d = lo; d <= hi * 1.0001; d *= step)
      for (const double m : {1.0, 2.0, 5.0})
        if ((m == 1.0 || fine) && d * m <= hi * 1.0001) ticks.push_back(d * m);
  }
  double frac(double v) const { return std::log10(v / lo) / std::log10(hi / lo); }
};

std::string tick_label(double v) { return v >= 1e6 ? fmt::format("{:.0e}", v) : fmt::format("{:g}", v); }

}  // namespace

std::string render_svg(const std::vector<Record>& recs, const PlotOptions& o, const std::string& source) {
  const bool time = o.metric != "gbps";
  // The x parameter: as given, else the first of tokens, numel, batch, bs any record has.
  std::string x = o.x;
  if (x.empty())
    for (const char* c : {"tokens", "numel", "batch", "bs"})
      if (std::any_of(recs.begin(), recs.end(), [&](const Record& r) { return r.number(c).has_value(); })) {
        x = c;
        break;
      }
  if (x.empty())
    throw InputError(fmt::format("{}: no record has a tokens, numel, batch or bs parameter; pick --x", source));

  std::vector<const Record*> use;
  int left_out = 0;
  for (const Record& r : recs) {
    const auto xv = r.number(x);
    const auto y = time ? r.median_us : r.gbps;
    if (xv && *xv > 0 && y && *y > 0) use.push_back(&r);
    else ++left_out;
  }
  if (use.empty())
    throw InputError(fmt::format("{}: no record has a positive {} and a {}", source, x,
                                 time ? "time (run with --bench)" : "gbps (run with --bench)"));

  const auto gparams = group_params(use, x);
  // Panels in first-seen order; series per variant in first-seen order; the last record of a point wins.
  std::vector<std::string> panel_order;
  std::map<std::string, std::vector<std::string>> variants;
  std::map<std::string, std::map<std::string, std::map<double, Point>>> data;
  std::map<std::string, const Record*> sample;
  for (const Record* r : use) {
    const std::string g = group_key(*r, gparams);
    if (!data.count(g)) panel_order.push_back(g), sample[g] = r;
    auto& vs = variants[g];
    if (std::find(vs.begin(), vs.end(), r->variant) == vs.end()) vs.push_back(r->variant);
    const double xv = *r->number(x);
    const double y = time ? *r->median_us : *r->gbps;
    data[g][r->variant][xv] = time ? Point{xv, y, *r->min_us, *r->max_us} : Point{xv, y, y, y};
  }
  std::set<std::string> devices, ops;
  for (const Record* r : use) devices.insert(r->device), ops.insert(r->op);

  const std::string metric = time ? "median time per launch (us)" : "throughput (GB/s)";
  std::string title = o.title;
  if (title.empty()) {
    std::string op_list;
    for (const auto& op : ops) op_list += (op_list.empty() ? "" : ", ") + op;
    title = fmt::format("{}: {} vs {}{}", op_list, time ? "time" : "GB/s", x,
                        devices.size() == 1 ? " on " + *devices.begin() : "");
  }
  const double width = kPanelW, title_h = 40, foot_h = 24;
  const double height = title_h + kPanelH * double(panel_order.size()) + foot_h;
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text class=\"title\" x=\"{2}\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{3}</text>\n",
      width, height, width / 2, xml(title));

  for (std::size_t pi = 0; pi < panel_order.size(); ++pi) {
    const std::string& g = panel_order[pi];
    const Record& head = *sample[g];
    std::string label = head.params_text([&] {
      std::vector<std::string> skip{x};
      for (const auto& [k, v] : head.params)
        if (std::find(gparams.begin(), gparams.end(), k) == gparams.end()) skip.push_back(k);
      return skip;
    }());
    if (ops.size() > 1) label = head.op + (label.empty() ? "" : " ") + label;
    if (devices.size() > 1) label += " on " + head.device;
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
    for (const auto& [v, pts] : data[g])
      for (const auto& [xv, p] : pts) {
        xmin = std::min(xmin, xv), xmax = std::max(xmax, xv);
        ymin = std::min(ymin, p.lo), ymax = std::max(ymax, p.hi);
      }
    const LogAxis ax(xmin, xmax), ay(ymin, ymax);
    const double top = title_h + kPanelH * double(pi);
    const double px0 = kLeft, px1 = width - kRight, py0 = top + kTop, py1 = top + kPanelH - kBottom;
    const auto X = [&](double v) { return px0 + ax.frac(v) * (px1 - px0); };
    const auto Y = [&](double v) { return py1 - ay.frac(v) * (py1 - py0); };
    s += fmt::format("<g class=\"panel\" data-group=\"{}\">\n", xml(label));
    s += fmt::format("<text class=\"panel-title\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
                     (px0 + px1) / 2, top + 28, xml(label.empty() ? "all records" : label));
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", px0, py0,
                     px1 - px0, py1 - py0);
    for (const double t : ax.ticks)
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                       X(t), py0, py1, py1 + 16, tick_label(t));
    for (const double t : ay.ticks)
      s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                       px0, Y(t), px1, px0 - 6, Y(t) + 4, tick_label(t));
    s += fmt::format("<text class=\"xlabel\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{} (log scale)</text>\n",
                     (px0 + px1) / 2, py1 + 38, xml(x));
    s += fmt::format("<text class=\"ylabel\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" "
                     "transform=\"rotate(-90 {0} {1})\">{2} (log scale)</text>\n",
                     px0 - 56, (py0 + py1) / 2, xml(metric));
    std::size_t vi = 0;
    for (const auto& v : variants[g]) {
      const char* color = kColors[vi % std::size(kColors)];
      // Past ten variants the colours repeat: a dash pattern tells them apart.
      const char* dash = (vi / std::size(kColors)) % 3 == 0 ? "none" : (vi / std::size(kColors)) % 3 == 1 ? "6 3" : "2 2";
      const auto& pts = data[g][v];
      std::string line;
      for (const auto& [xv, p] : pts) line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", X(xv), Y(p.y));
      s += fmt::format("<polyline class=\"series\" data-variant=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\" "
                       "stroke-width=\"2\" stroke-dasharray=\"{}\"/>\n",
                       xml(v), line, color, dash);
      for (const auto& [xv, p] : pts) {
        if (p.hi > p.lo)  // the measured min..max
          s += fmt::format("<line class=\"spread\" x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" "
                           "stroke=\"{3}\"/>\n",
                           X(xv), Y(p.lo), Y(p.hi), color);
        s += fmt::format("<circle class=\"point\" data-variant=\"{}\" data-x=\"{}\" data-y=\"{}\" cx=\"{:.1f}\" "
                         "cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n",
                         xml(v), xv, p.y, X(xv), Y(p.y), color);
      }
      const double ly = py0 + 14 + 18 * double(vi);
      s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"{3}\" stroke-width=\"2\" "
                       "stroke-dasharray=\"{7}\"/><text class=\"legend\" x=\"{4}\" y=\"{5}\">{6}</text>\n",
                       px1 + 12, ly, px1 + 36, color, px1 + 42, ly + 4,
                       xml(v.size() > kLegendChars ? v.substr(0, kLegendChars - 3) + "..." : v), dash);
      ++vi;
    }
    s += "</g>\n";
  }
  s += fmt::format("<text class=\"footer\" x=\"8\" y=\"{}\" font-size=\"10\" fill=\"#555\">{}{}</text>\n", height - 8,
                   xml(source), left_out ? fmt::format(" ({} record(s) without a positive {} or {} left out)", left_out,
                                                       x, time ? "time" : "GB/s")
                                         : "");
  return s + "</svg>\n";
}

int run_plot(const std::vector<std::string>& files, const std::string& out, const PlotOptions& o) {
  outputs::refuse_inputs_as_targets({out}, files);  // `plot r.jsonl -o r.jsonl` must not replace the records
  std::vector<Record> recs;
  std::string source;
  for (const auto& f : files) {
    auto r = records::read_file(f);
    recs.insert(recs.end(), std::make_move_iterator(r.begin()), std::make_move_iterator(r.end()));
    source += (source.empty() ? "" : ", ") + f;
  }
  const std::string svg = render_svg(recs, o, source);
  outputs::write_text_file(out, svg);
  fmt::print("wrote {}\n", display_path(out));
  return kOk;
}

}  // namespace moekit::tools
