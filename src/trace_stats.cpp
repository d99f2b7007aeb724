// `moekit trace stats`: how a router trace loads its experts.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "display.hpp"
#include "errors.hpp"
#include "host_memory.hpp"
#include "json.hpp"
#include "tools.hpp"

namespace moekit::tools {

std::int64_t TraceStats::max_load() const {
  return counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end());
}

double TraceStats::mean_load() const { return num_experts > 0 ? double(valid()) / double(num_experts) : 0; }

namespace {

template <class T>
void tally(std::span<const T> ids, TraceStats& s) {
  // Rows of no ids have nothing to count: a [2^40, 0] file must not loop 2^40 times.
  if (s.topk == 0) return;
  std::vector<std::int64_t> row;
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    row.assign(ids.begin() + t * s.topk, ids.begin() + (t + 1) * s.topk);
    for (const std::int64_t e : row) {
      if (e < 0) ++s.negative;
      else if (e >= s.num_experts) ++s.too_large;
      else ++s.counts[static_cast<std::size_t>(e)];
    }
    std::sort(row.begin(), row.end());
    s.repeated_rows += std::adjacent_find(row.begin(), row.end()) != row.end();
  }
}

// The `top` experts with the most slots, ties by id.
std::vector<std::int64_t> hottest(const TraceStats& s, int top) {
  std::vector<std::int64_t> order(s.counts.size());
  std::iota(order.begin(), order.end(), 0);
  const std::size_t n = std::min<std::size_t>(order.size(), std::max(top, 0));
  std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](std::int64_t a, std::int64_t b) {
    return s.counts[a] != s.counts[b] ? s.counts[a] > s.counts[b] : a < b;
  });
  order.resize(n);
  return order;
}

}  // namespace

TraceStats trace_stats(const npy::Array& ids, std::int64_t num_experts, const std::string& label) {
  if (ids.dtype != npy::DType::i4 && ids.dtype != npy::DType::i8)
    throw InputError(fmt::format("{}: topk_ids must be int32 or int64, got {}", label, npy::dtype_name(ids.dtype)));
  if (ids.shape.size() != 2)
    throw InputError(fmt::format("{}: topk_ids must be 2-D [tokens, topk], got shape {}", label,
                                 npy::format_shape(ids.shape)));
  TraceStats s;
  s.tokens = ids.shape[0];
  s.topk = ids.shape[1];
  s.num_experts = num_experts;
  s.counts.assign(static_cast<std::size_t>(num_experts), 0);
  if (ids.dtype == npy::DType::i4) tally(ids.as<std::int32_t>(), s);
  else tally(ids.as<std::int64_t>(), s);
  return s;
}

std::string render_trace_stats(const TraceStats& s, const std::string& file, bool json, int top) {
  const double mean = s.mean_load();
  const std::int64_t used = std::count_if(s.counts.begin(), s.counts.end(), [](std::int64_t c) { return c > 0; });
  const std::int64_t min = s.counts.empty() ? 0 : *std::min_element(s.counts.begin(), s.counts.end());
  const auto hot = hottest(s, top);
  const std::string ratio = mean > 0 ? fmt::format("{:.6g}", double(s.max_load()) / mean) : "null";
  if (json) {
    std::string h, c;
    for (auto e : hot) h += fmt::format("{}{{\"expert\":{},\"count\":{}}}", h.empty() ? "" : ",", e, s.counts[e]);
    for (auto n : s.counts) c += fmt::format("{}{}", c.empty() ? "" : ",", n);
    return fmt::format(
        "{{\"file\":{},\"tokens\":{},\"topk\":{},\"num_experts\":{},\"slots\":{},"
        "\"invalid\":{{\"total\":{},\"negative\":{},\"too_large\":{}}},\"repeated_rows\":{},"
        "\"load\":{{\"max\":{},\"mean\":{:.6g},\"max_over_mean\":{},\"min\":{},\"experts_used\":{}}},"
        "\"hottest\":[{}],\"counts\":[{}]}}\n",
        json_quote(file), s.tokens, s.topk, s.num_experts, s.tokens * s.topk, s.negative + s.too_large, s.negative,
        s.too_large, s.repeated_rows, s.max_load(), mean, ratio, min, used, h, c);
  }
  std::string o = fmt::format("{}: {} tokens x top-{}, E = {}\n", display_path(file), s.tokens, s.topk,
                              s.num_experts);
  o += fmt::format("  slots {}, invalid {} ({} negative, {} >= E), tokens naming an expert twice {}\n",
                   s.tokens * s.topk, s.negative + s.too_large, s.negative, s.too_large, s.repeated_rows);
  o += fmt::format("  load per expert: max {}, mean {:.2f}, max/mean {}, min {}, experts used {}/{}\n", s.max_load(),
                   mean, mean > 0 ? fmt::format("{:.2f}", double(s.max_load()) / mean) : "n/a", min, used,
                   s.num_experts);
  std::string h;
  for (auto e : hot) h += fmt::format(" {}:{}", e, s.counts[e]);
  o += fmt::format("  hottest (expert:count):{}\n", h.empty() ? " none" : h);
  o += "  counts per expert:\n";
  for (std::size_t e = 0; e < s.counts.size(); e += 16) {
    std::string line;
    for (std::size_t j = e; j < std::min(e + 16, s.counts.size()); ++j) line += fmt::format(" {:>6}", s.counts[j]);
    o += fmt::format("  {:>6} |{}\n", e, line);
  }
  return o;
}

int run_trace_stats(const std::string& file, std::int64_t num_experts, const std::string& format, int top) {
  if (num_experts < 1 || num_experts > (std::int64_t(1) << 24))
    throw InputError(fmt::format("--num-experts must be in [1, {}]", std::int64_t(1) << 24));
  const npy::Info info = npy::inspect(file);  // shape and dtype before reading the data
  std::int64_t numel = 1;
  for (auto d : info.shape) numel *= d;
  require_host_memory(double(numel) * 16 + double(num_experts) * 16, "trace stats");
  const TraceStats s = trace_stats(npy::read(file), num_experts, display_path(file));
  std::fputs(render_trace_stats(s, file, format == "json", top).c_str(), stdout);
  std::fflush(stdout);
  return kOk;
}

}  // namespace moekit::tools
