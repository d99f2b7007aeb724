// The status a bench cell gets (cell.hpp's run_cell): n/a with its reason
// (the body never runs), ok, fail (a difference from the reference; timing
// kept), error (the body threw), and a timing error never turned into fail.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "cell.hpp"

using namespace moekit;

namespace {

void timed(bench::Record& rec) { rec.m.stats = TimingStats{2.0, 1.0, 3.0, 5, "graph"}; }

}  // namespace

TEST_CASE("bench cells: n/a, ok, fail, error") {
  bench::Record r;
  r.table = "t";
  r.variant = "v";
  int ran = 0;
  const bench::Record na = bench::run_cell(r, "T > 256", [&](bench::Record&) {
    ++ran;
    return std::string();
  });
  CHECK(ran == 0);
  CHECK(na.m.status == "n/a");
  CHECK(na.m.reason == "T > 256");
  CHECK_FALSE(na.m.stats.has_value());

  const bench::Record ok = bench::run_cell(r, nullptr, [&](bench::Record& rec) {
    timed(rec);
    return std::string();
  });
  CHECK(ok.m.status == "ok");
  CHECK(ok.m.reason.empty());
  REQUIRE(ok.m.stats.has_value());

  const bench::Record fail = bench::run_cell(r, nullptr, [&](bench::Record& rec) {
    timed(rec);
    return std::string("out[3] differs");
  });
  CHECK(fail.m.status == "fail");
  CHECK(fail.m.reason == "out[3] differs");
  REQUIRE(fail.m.stats.has_value());  // a failed cell keeps its timing
  CHECK(fail.m.stats->median_us == 2.0);

  const bench::Record thrown =
      bench::run_cell(r, nullptr, [&](bench::Record&) -> std::string { throw std::runtime_error("launch failed"); });
  CHECK(thrown.m.status == "error");
  CHECK(thrown.m.reason == "launch failed");

  const bench::Record timing = bench::run_cell(r, nullptr, [&](bench::Record& rec) {
    rec.m.status = "error";  // as bench::measure reports a CUDA error while timing
    rec.m.reason = "timing failed";
    return std::string("out[0] differs");
  });
  CHECK(timing.m.status == "error");
  CHECK(timing.m.reason == "timing failed");
}
