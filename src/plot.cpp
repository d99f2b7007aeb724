// `moekit plot`: plain SVG charts of result records (no plotting library).
// Every element a reader (or a test) needs is marked: <g class="panel">,
// <polyline class="series" data-variant=...>, <circle class="point" data-x
// data-y>, <text class="title|xlabel|ylabel|legend">.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
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

// XML text of `s`, already printable(): the five entities escaped.
std::string xml_text(std::string_view s) {
  std::string o;
  for (const char c : s) {
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

// XML text of any string: printable (no control character, noncharacter or
// invalid UTF-8 reaches the file: all are \xNN), then the entities.
std::string xml(std::string_view s) { return xml_text(printable(s)); }

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
          seen.emplace(group_key(*r, rest) + '\x1e' + r->variant_label() + '\x1e' + value(*r, x), value(*r, p));
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

// Log axis over the data's own range (a small margin each side, at least half
// a decade), computed in log10 space so that no value from the smallest
// subnormal to the double maximum makes an infinite or NaN coordinate. Ticks
// are m * 10^e for m in 1, 2, 5 (or finer on a short axis: at least two ticks),
// every few decades on a long one (at most ~12 labels).
struct LogAxis {
  double lo, hi;  // log10 of the axis ends
  std::vector<std::pair<double, std::string>> ticks;  // log10 of the tick, its label
  LogAxis(double mn, double mx) {
    lo = std::log10(mn), hi = std::log10(mx);
    const double margin = std::max(0.04 * (hi - lo), (0.5 - (hi - lo)) / 2);
    lo -= std::max(margin, 0.0), hi += std::max(margin, 0.0);
    const double decades = hi - lo;
    const int step = std::max(1, static_cast<int>(std::ceil(decades / 12)));
    static const std::vector<double> coarse{1}, mid{1, 2, 5}, fine{1, 1.5, 2, 3, 4, 5, 6, 7, 8, 9};
    for (const auto* ms : {&coarse, &mid, &fine}) {
      if (ms != &coarse && step > 1) break;
      ticks.clear();
      const int e0 = static_cast<int>(std::floor(lo)), e1 = static_cast<int>(std::ceil(hi));
      for (int e = e0 - ((e0 % step) + step) % step; e <= e1; e += step)
        for (const double m : *ms) {
          const double l = e + std::log10(m);
          if (l >= lo && l <= hi) ticks.emplace_back(l, label(m, e));
        }
      if (ticks.size() >= 3 || (ms == &fine && !ticks.empty())) break;
    }
  }
  double frac(double v) const { return (std::log10(v) - lo) / (hi - lo); }
  // "200", "0.05", "2e+09", "1e-300": the tick's own digits, not a rounded product.
  static std::string label(double m, int e) {
    if (e >= -4 && e <= 5) return fmt::format("{:g}", m * std::pow(10.0, e));
    return fmt::format("{:g}e{}{:02}", m, e < 0 ? '-' : '+', std::abs(e));
  }
};

// The bytes of the first `n` characters of `s` (whole UTF-8 characters; an
// invalid byte counts as one character).
std::size_t prefix_bytes(std::string_view s, std::size_t n) {
  std::size_t i = 0;
  for (std::size_t count = 0; i < s.size() && count < n; ++count) {
    char32_t cp = 0;
    const std::size_t len = utf8::decode(s, i, cp);
    i += len ? len : 1;
  }
  return i;
}

// `s` cut to at most `n` characters, the last three "..." when cut.
std::string cut_chars(std::string_view s, std::size_t n) {
  if (prefix_bytes(s, n) >= s.size()) return std::string(s);
  return std::string(s.substr(0, prefix_bytes(s, n > 3 ? n - 3 : 0))) + "...";
}

// Lines of at most `n` characters, broken at spaces (a longer word is cut):
// a title never runs off the canvas.
std::vector<std::string> wrap(std::string_view s, std::size_t n) {
  std::vector<std::string> lines;
  std::string line;
  const auto chars = [](std::string_view t) {
    std::size_t c = 0;
    for (const char b : t) c += (static_cast<unsigned char>(b) & 0xc0) != 0x80;
    return c;
  };
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t sp = s.find(' ', start);
    if (sp == std::string_view::npos) sp = s.size();
    std::string word(s.substr(start, sp - start));
    start = sp + 1;
    if (word.empty()) continue;
    while (chars(word) > n) {  // a word longer than a line: whole lines of it
      if (!line.empty()) lines.push_back(std::move(line)), line.clear();
      const std::size_t b = prefix_bytes(word, n);
      lines.push_back(word.substr(0, b));
      word.erase(0, b);
    }
    if (!line.empty() && chars(line) + 1 + chars(word) > n) lines.push_back(std::move(line)), line.clear();
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty() || lines.empty()) lines.push_back(std::move(line));
  return lines;
}

// A <text> of one or more lines (tspans), centred on x, its first baseline at y.
std::string text_lines(const char* cls, double x, double y, double size, const char* extra,
                       const std::vector<std::string>& lines) {
  std::string t = fmt::format("<text class=\"{}\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{}\"{}>", cls,
                              x, y, size, extra);
  if (lines.size() == 1) return t + xml_text(lines[0]) + "</text>\n";
  for (std::size_t i = 0; i < lines.size(); ++i)
    t += fmt::format("<tspan x=\"{}\" dy=\"{}\">{}</tspan>", x, i == 0 ? 0.0 : size * 1.25, xml_text(lines[i]));
  return t + "</text>\n";
}

}  // namespace

std::string render_svg(const std::vector<Record>& recs, const PlotOptions& o, const std::string& source,
                       std::string* note) {
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
    throw InputError(fmt::format("{}: no record has a tokens, numel, batch or bs parameter; pick --x",
                                 display_path(source)));

  std::vector<const Record*> use;
  int left_out = 0;
  const auto positive = [](const std::optional<double>& v) { return v && std::isfinite(*v) && *v > 0; };
  for (const Record& r : recs) {
    if (positive(r.number(x)) && positive(time ? r.median_us : r.gbps)) use.push_back(&r);
    else ++left_out;
  }
  if (use.empty())
    throw InputError(fmt::format("{}: no record has a positive {} and a {}", display_path(source), printable(x),
                                 time ? "time (run with --bench)" : "gbps (run with --bench)"));

  const auto gparams = group_params(use, x);
  // Panels in first-seen order; series per variant in first-seen order; the last record of a point wins.
  std::vector<std::string> panel_order;
  std::map<std::string, std::vector<std::string>> variants;
  std::map<std::string, std::map<std::string, std::map<double, Point>>> data;
  std::map<std::string, const Record*> sample;
  std::map<std::string, std::set<std::string>> labels_of;  // variant that ran -> its series names
  for (const Record* r : use) {
    const std::string g = group_key(*r, gparams);
    const std::string v = r->variant_label();
    labels_of[r->variant].insert(v);
    if (!data.count(g)) panel_order.push_back(g), sample[g] = r;
    auto& vs = variants[g];
    if (std::find(vs.begin(), vs.end(), v) == vs.end()) vs.push_back(v);
    const double xv = *r->number(x);
    const double y = time ? *r->median_us : *r->gbps;
    // A minimum of 0 (a clock too coarse) has no place on a log axis: no spread below the median.
    data[g][v][xv] = time ? Point{xv, y, *r->min_us > 0 ? *r->min_us : y, *r->max_us} : Point{xv, y, y, y};
  }
  std::set<std::string> devices, ops;
  for (const Record* r : use) devices.insert(r->device), ops.insert(r->op);
  if (note)
    for (const auto& [ran, labels] : labels_of)
      if (labels.size() > 1)
        *note += fmt::format("note: {} requested variants ran '{}'{}: one line each, named by the requested variant\n",
                             labels.size(), printable(ran),
                             ran == "reference" ? " (no GPU: the CPU reference ran for each)" : "");

  const std::string metric = time ? "median time per launch (us)" : "throughput (GB/s)";
  std::string title = o.title;
  if (title.empty()) {
    std::string op_list;
    for (const auto& op : ops) op_list += (op_list.empty() ? "" : ", ") + op;
    title = fmt::format("{}: {} vs {}{}", op_list, time ? "time" : "GB/s", x,
                        devices.size() == 1 ? " on " + *devices.begin() : "");
  }
  // Text is wrapped to the canvas (about 0.6 em a character), never clipped.
  const double width = kPanelW;
  const auto fits = [&](double font) { return static_cast<std::size_t>((width - 24) / (0.6 * font)); };
  const std::vector<std::string> title_lines = wrap(printable(title), fits(16));
  const double title_h = 40 + 20 * double(title_lines.size() - 1);
  std::string footer = printable(source);
  if (left_out)
    footer += fmt::format(" ({} record(s) without a positive {} or {} left out)", left_out, printable(x),
                          time ? "time" : "GB/s");
  const std::vector<std::string> foot_lines = wrap(footer, fits(10));
  const double foot_h = 24 + 12.5 * double(foot_lines.size() - 1);

  // Each panel is as tall as its title lines and its legend need.
  struct Layout {
    std::string label;
    std::vector<std::string> title;
    double top, height, plot_top, plot_bottom;
  };
  std::vector<Layout> layout;
  double y = title_h;
  for (const auto& g : panel_order) {
    const Record& head = *sample[g];
    std::string label = head.params_text([&] {
      std::vector<std::string> skip{x};
      for (const auto& [k, v] : head.params)
        if (std::find(gparams.begin(), gparams.end(), k) == gparams.end()) skip.push_back(k);
      return skip;
    }());
    if (ops.size() > 1) label = head.op + (label.empty() ? "" : " ") + label;
    if (devices.size() > 1) label += " on " + head.device;
    Layout l{label, wrap(printable(label.empty() ? "all records" : label), fits(13)), y, 0, 0, 0};
    const double head_h = kTop + 16 * double(l.title.size() - 1);
    const double plot_h = std::max(kPanelH - kTop - kBottom, 14 + 18 * double(variants[g].size()));
    l.plot_top = y + head_h;
    l.plot_bottom = l.plot_top + plot_h;
    l.height = head_h + plot_h + kBottom;
    y += l.height;
    layout.push_back(std::move(l));
  }
  const double height = y + foot_h;
  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  s += text_lines("title", width / 2, 26, 16, " font-weight=\"bold\"", title_lines);

  for (std::size_t pi = 0; pi < panel_order.size(); ++pi) {
    const std::string& g = panel_order[pi];
    const Layout& l = layout[pi];
    double xmin = INFINITY, xmax = 0, ymin = INFINITY, ymax = 0;
    for (const auto& [v, pts] : data[g])
      for (const auto& [xv, p] : pts) {
        xmin = std::min(xmin, xv), xmax = std::max(xmax, xv);
        ymin = std::min(ymin, p.lo), ymax = std::max(ymax, p.hi);
      }
    const LogAxis ax(xmin, xmax), ay(ymin, ymax);
    const double px0 = kLeft, px1 = width - kRight, py0 = l.plot_top, py1 = l.plot_bottom;
    const auto X = [&](double v) { return px0 + ax.frac(v) * (px1 - px0); };
    const auto Y = [&](double v) { return py1 - ay.frac(v) * (py1 - py0); };
    s += fmt::format("<g class=\"panel\" data-group=\"{}\">\n", xml(l.label));
    s += text_lines("panel-title", width / 2, l.top + 28, 13, "", l.title);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", px0, py0,
                     px1 - px0, py1 - py0);
    for (const auto& [t, text] : ax.ticks) {
      const double tx = px0 + (t - ax.lo) / (ax.hi - ax.lo) * (px1 - px0);
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                       "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
                       tx, py0, py1, py1 + 16, text);
    }
    for (const auto& [t, text] : ay.ticks) {
      const double ty = py1 - (t - ay.lo) / (ay.hi - ay.lo) * (py1 - py0);
      s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                       px0, ty, px1, px0 - 6, ty + 4, text);
    }
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
                       xml_text(cut_chars(printable(v), kLegendChars)), dash);
      ++vi;
    }
    s += "</g>\n";
  }
  std::string foot = fmt::format("<text class=\"footer\" x=\"8\" y=\"{}\" font-size=\"10\" fill=\"#555\">",
                                 height - foot_h + 16);
  for (std::size_t i = 0; i < foot_lines.size(); ++i)
    foot += foot_lines.size() == 1 ? xml_text(foot_lines[i])
                                   : fmt::format("<tspan x=\"8\" dy=\"{}\">{}</tspan>", i == 0 ? 0.0 : 12.5,
                                                 xml_text(foot_lines[i]));
  s += foot + "</text>\n";
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
  std::string note;
  const std::string svg = render_svg(recs, o, source, &note);
  outputs::write_text_file(out, svg);
  fmt::print("wrote {}\n{}", display_path(out), note);
  return kOk;
}

}  // namespace moekit::tools
