// CPU reference and exact checker for per-batch top-k de-duplication.
#include "dedup/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>

#include "errors.hpp"

namespace moekit::dedup {

namespace {

std::size_t out_elems(const Problem& p) {
  return static_cast<std::size_t>(p.batch) * static_cast<std::size_t>(p.row_len());
}

}  // namespace

std::vector<std::int32_t> reference(const Problem& p, std::span<const std::int32_t> indices) {
  if (p.batch < 0 || p.mtp_step < 1 || p.k < 1) {
    throw InputError(fmt::format("dedup reference: bad shape batch={} mtp_step={} k={}", p.batch,
                                 p.mtp_step, p.k));
  }
  const std::size_t n = static_cast<std::size_t>(p.row_len());
  if (indices.size() != out_elems(p)) {
    throw InputError(fmt::format("dedup reference: {} input values, expected batch*mtp_step*k = {}",
                                 indices.size(), out_elems(p)));
  }
  std::vector<std::int32_t> out(out_elems(p), -1);
  std::vector<std::int32_t> row;
  if (p.batch > 0) row.reserve(n);  // a [0, 2^30] input holds no row to sort: no 4 GB scratch for it
  for (std::int32_t b = 0; b < p.batch; ++b) {
    // The M rows of batch b are contiguous, so the batch is one span of M*k values.
    auto in = indices.subspan(static_cast<std::size_t>(b) * n, n);
    row.clear();
    for (std::int32_t v : in) {
      if (v >= 0) row.push_back(v);  // negatives mean "no index"
    }
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    std::copy(row.begin(), row.end(), out.begin() + static_cast<std::ptrdiff_t>(b * n));
  }
  return out;
}

CheckResult check(const Problem& p, std::span<const std::int32_t> ref,
                  std::span<const std::int32_t> got) {
  CheckResult r;
  r.error_unit = "exact";
  const std::size_t expect = out_elems(p);
  if (ref.size() != expect || got.size() != expect) {
    r.ok = false;
    r.max_error = 1.0;
    r.first_difference = fmt::format(
        "size mismatch: expected {} values ([{}, {}]), reference has {}, output has {}", expect,
        p.batch, p.row_len(), ref.size(), got.size());
    return r;
  }
  const std::size_t n = static_cast<std::size_t>(p.row_len());
  for (std::size_t i = 0; i < expect; ++i) {
    if (ref[i] != got[i]) {
      r.ok = false;
      r.max_error = 1.0;
      r.first_difference = fmt::format("batch {}, column {}: expected {}, got {}", i / n, i % n,
                                       ref[i], got[i]);
      return r;
    }
  }
  return r;
}

}  // namespace moekit::dedup
