// Unit tests of the host pieces behind the CLI: option values, report
// rendering. (Each family tests its generator in tests/<family>/cpu_gen.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include "common/auto_rule.hpp"
#include "common/problem_error.hpp"
#include "common/registry.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "planned.hpp"
#include "report.hpp"

using namespace moekit;

TEST_CASE("parse_format") {
  CHECK(parse_format("json") == Format::json);
  CHECK(parse_format("csv") == Format::csv);
  CHECK(parse_format("text") == Format::text);
  CHECK_THROWS_AS(parse_format("xml"), InputError);
}

TEST_CASE("planned: the kernel layer's ProblemError becomes an InputError with its message") {
  CHECK_THROWS_WITH_AS(planned([]() -> int { throw ProblemError("f: --size must be in [1, 8] (got 9)"); }),
                       "f: --size must be in [1, 8] (got 9)", InputError);
  CHECK(planned([] { return 42; }) == 42);
  // Anything else passes through as it was.
  CHECK_THROWS_AS(planned([]() -> int { throw CudaError("x"); }), CudaError);
  CHECK_THROWS_AS(planned([]() -> int { throw std::out_of_range("x"); }), std::out_of_range);
}

TEST_CASE("report renderings carry the stable fields") {
  Report r;
  r.op = "demo";
  r.variant = "fast";
  r.variant_requested = "auto";
  r.params = {{"batch", "115"}, {"max_index", std::nullopt}};
  r.dtype = "int32";
  r.device = "NVIDIA \"quoted\" GPU";
  r.check_status = "fail";
  r.check.ok = false;
  r.check.first_difference = "batch 3, column 7: expected 5, got 6";
  TimingStats t;
  t.median_us = 2.0;
  t.min_us = 1.5;
  t.max_us = 3.0;
  t.samples = 10;
  t.mode = "graph replay";
  r.timing = t;
  r.bytes = 4000;
  r.peak_gbps = 4;
  std::string j = render_report(r, Format::json);
  CHECK(j.find("\"op\":\"demo\"") != std::string::npos);
  CHECK(j.find("\"batch\":115") != std::string::npos);        // integers stay numbers
  CHECK(j.find("\"max_index\":null") != std::string::npos);  // no value: null, never a string
  CHECK(j.find("NVIDIA \\\"quoted\\\" GPU") != std::string::npos);  // escaped
  CHECK(j.find("\"median\":2,") != std::string::npos);
  CHECK(j.find("\"gbps\":2,") != std::string::npos);          // 4000 B / 2 us = 2 GB/s
  CHECK(j.find("\"pct_of_peak\":50") != std::string::npos);
  CHECK(j.find("\"result\":\"fail\"") != std::string::npos);
  CHECK(j.back() == '\n');
  std::string c = render_report(r, Format::csv);
  auto nl = c.find('\n');
  auto commas = [](std::string s) { return std::count(s.begin(), s.end(), ','); };
  CHECK(commas(c.substr(0, nl)) == commas(c.substr(nl + 1)));
  std::string x = render_report(r, Format::text);
  CHECK(x.find("FAIL: batch 3, column 7") != std::string::npos);
  CHECK(x.find("median 2.00 us") != std::string::npos);
}

// ---- programmatic dependent launch: decided once per run, handed to every launch ----

TEST_CASE("the run's one PDL decision: --pdl on and a device with PDL") {
  CommonOpts on, off;
  off.pdl = "off";
  CHECK(on.pdl == "on");  // the default, as serving engines run
  DeviceCaps sm90, sm80;
  sm90.ordinal = sm80.ordinal = 0;
  sm90.cc_major = 9;
  sm90.pdl = true;
  sm80.cc_major = 8;
  CHECK(launch_pdl(on, sm90));
  CHECK_FALSE(launch_pdl(on, sm80));
  CHECK_FALSE(launch_pdl(off, sm90));
  CHECK_FALSE(launch_pdl(off, sm80));
  CHECK_FALSE(launch_pdl(on, DeviceCaps{}));  // no device
}

namespace {

// A registry of three variants: "plain" launches as asked, "always" with PDL
// whatever it is asked (Variant::always_pdl), "synced" waits on the device
// from the host inside its launch (Variant::host_sync); auto takes "always"
// only for launches with PDL (a pdl_only row), else "plain".
struct FakeProblem {};
struct FakeBuffers {};
using FakeVariant = Variant<FakeProblem, FakeBuffers>;
std::string any_limits(const DeviceCaps&) { return "any"; }
const char* applies(const FakeProblem&, const DeviceCaps&) { return nullptr; }
std::size_t no_ws(const FakeProblem&, const DeviceCaps&) { return 0; }
LaunchStatus no_launch(const FakeProblem&, const FakeBuffers&, Stream, bool) { return 0; }
const FakeVariant kFake[] = {
    {{"plain", "launches as asked", ""}, true, any_limits, applies, no_ws, no_launch},
    {{"always", "launches with PDL whatever it is asked", ""}, false, any_limits, applies, no_ws, no_launch, nullptr, true},
    {{"synced", "copies sizes to the host inside its launch", ""}, false, any_limits, applies, no_ws, no_launch, nullptr,
     false, /*host_sync=*/true},
};
const AutoRow<FakeProblem> kFakeRows[] = {
    {"always", "PDL", nullptr, /*pdl_only=*/true},
    {"plain", "", nullptr},
};
const Registry<FakeProblem, FakeBuffers> kFakeRegistry{kFake, kFakeRows};

}  // namespace

TEST_CASE("PDL in a resolve: auto's pdl_only rows hold only with pdl; the report's pdl is what the launches do") {
  DeviceCaps sm90, sm80;
  sm90.ordinal = sm80.ordinal = 0;
  sm90.cc_major = 9;
  sm90.pdl = true;
  sm80.cc_major = 8;
  CHECK(kFakeRegistry.auto_reads_pdl());
  // {requested, caps, pdl} -> {name, exact order, report's pdl}, by hand.
  struct Case {
    const char* requested;
    const DeviceCaps* caps;
    bool pdl;
    const char* name;
    bool exact, report_pdl;
  };
  const Case cases[] = {
      {"auto", &sm90, true, "always", false, true},    {"auto", &sm90, false, "plain", true, false},
      {"auto", &sm80, false, "plain", true, false},    {"plain", &sm90, true, "plain", true, true},
      {"plain", &sm90, false, "plain", true, false},   {"always", &sm90, false, "always", false, true},
      {"always", &sm90, true, "always", false, true},  {"always", &sm80, false, "always", false, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.requested);
    CAPTURE(c.pdl);
    ResolvedVariant<FakeVariant> rv;
    const Resolved r = rv.resolve("fake", c.requested, FakeProblem{}, *c.caps, c.pdl, kFakeRegistry);
    CHECK(r.name == c.name);
    CHECK(r.exact_order == c.exact);
    CHECK(r.pdl == c.report_pdl);
  }
}

// ---- a variant that waits on the host: timed with events, never a graph capture ----

TEST_CASE("timing mode: a host_sync variant is timed with events whatever --graph says, and the report says why") {
  DeviceCaps sm90;
  sm90.ordinal = 0;
  sm90.cc_major = 9;
  sm90.pdl = true;
  // {variant, --graph} -> graph replays?, a note?  (by hand: only a variant
  // without host_sync follows --graph; the note only where the run differs
  // from what --graph asked).
  struct Case {
    const char* requested;
    bool graph_option;
    bool graph, note;
  };
  const Case cases[] = {
      {"plain", true, true, false},   {"plain", false, false, false},  {"always", true, true, false},
      {"synced", true, false, true},  {"synced", false, false, false}, {"auto", true, true, false},
  };
  for (const Case& k : cases) {
    CAPTURE(k.requested);
    CAPTURE(k.graph_option);
    CommonOpts c;
    c.bench = true;
    c.graph = k.graph_option;
    c.warmup = 3;
    c.iters = 7;
    c.cold = true;
    ResolvedVariant<FakeVariant> rv;
    const Resolved r = rv.resolve("fake", k.requested, FakeProblem{}, sm90, false, kFakeRegistry);
    CHECK(r.host_sync == (std::string(k.requested) == "synced"));
    const TimingOptions t = timing_options(c, r.host_sync);
    CHECK(t.graph == k.graph);
    // The other options pass through unchanged.
    CHECK(t.warmup == 3);
    CHECK(t.samples == 7);
    CHECK(t.cold);
    const std::string note = timing_note(c, r.host_sync);
    CHECK(note.empty() == !k.note);
    if (k.note) CHECK(note.find("events") != std::string::npos);
    // Without --bench nothing is timed: no note.
    c.bench = false;
    CHECK(timing_note(c, r.host_sync).empty());
  }
}
