// Unit tests of the commands around the kernels: sweep expansion, the
// compare rule, trace statistics, the plot's grouping. (End-to-end cases are
// in tools_cases.py.)
#include <doctest/doctest.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "errors.hpp"
#include "records.hpp"
#include "sweep.hpp"
#include "temp_dir.hpp"
#include "tools.hpp"

using namespace moekit;
using moekit::testing::TempDir;

namespace {

struct Cmd {
  CLI::App app;
  CLI::App* sub;
  std::int64_t tokens = 0;
  int experts = 0;
  double overlap = 0;
  std::string dist, out, variant, pdl;
  bool flag = false;
  Cmd() {
    sub = app.add_subcommand("k", "");
    sub->add_option("--tokens", tokens);
    sub->add_option("-E,--num-experts", experts);
    sub->add_option("--overlap", overlap);
    sub->add_option("--dist", dist);
    sub->add_option("--out", out);
    sub->add_option("--variant", variant);
    sub->add_option("--pdl", pdl);
    sub->add_flag("--flag", flag);
  }
};

records::Record rec(std::string variant, double median, double lo, double hi, std::string tokens = "16") {
  records::Record r;
  r.op = "demo";
  r.variant = std::move(variant);
  r.device = "H100";
  r.params = {{"tokens", tokens}};
  r.median_us = median;
  r.min_us = lo;
  r.max_us = hi;
  return r;
}

}  // namespace

TEST_CASE("sweep: numeric options and --variant expand, text options never do") {
  Cmd c;
  const auto cells = expand_sweep(*c.sub, {"moekit", "k", "--tokens", "1,16,256", "-E", "64,256", "--dist",
                                           "zipf:1,2", "--flag", "--variant=a,b"});
  REQUIRE(cells.size() == 12);
  CHECK(cells[0].label == "tokens=1 E=64 variant=a");
  CHECK(cells[1].label == "tokens=1 E=64 variant=b");
  CHECK(cells[11].label == "tokens=256 E=256 variant=b");
  CHECK(cells[11].args[3] == "256");
  CHECK(cells[11].args[5] == "256");
  CHECK(cells[11].args[7] == "zipf:1,2");  // --dist is text: left alone
  CHECK(cells[11].args[9] == "--variant=b");
  CHECK(expand_sweep(*c.sub, {"moekit", "k", "--tokens", "4", "--overlap", "0.5"}).empty());
  // --pdl is text but list-valued, like --variant
  const auto pd = expand_sweep(*c.sub, {"moekit", "k", "--pdl", "on,off", "--tokens", "4"});
  REQUIRE(pd.size() == 2);
  CHECK(pd[0].label == "pdl=on");
  CHECK(pd[1].args[3] == "off");
  // floats sweep; --out gets a folder per cell
  const auto f = expand_sweep(*c.sub, {"moekit", "k", "--overlap", "0.1,0.9", "--out", "res"});
  REQUIRE(f.size() == 2);
  CHECK(f[1].args[5] == (std::filesystem::path("res") / "overlap=0.9").string());
  CHECK_THROWS_AS(expand_sweep(*c.sub, {"moekit", "k", "--tokens", "1,"}), InputError);
  // --help: one cell (the help is shown once)
  const auto h = expand_sweep(*c.sub, {"moekit", "k", "--tokens", "1,2", "--help"});
  REQUIRE(h.size() == 1);
  CHECK(h[0].args[3] == "1");
  // a short option with its list attached sweeps like the spaced spelling
  const auto e = expand_sweep(*c.sub, {"moekit", "k", "-E8,16", "--tokens", "4"});
  REQUIRE(e.size() == 2);
  CHECK(e[0].args[2] == "-E8");
  CHECK(e[1].args[2] == "-E16");
  CHECK(e[1].label == "E=16");
  CHECK(expand_sweep(*c.sub, {"moekit", "k", "-E8", "--tokens", "4"}).empty());
  // items are not parsed here (a refused one is a failing cell); labels show them printable
  const auto x = expand_sweep(*c.sub, {"moekit", "k", "--tokens", "1,x\n\x1b", "--variant", "a,b"});
  REQUIRE(x.size() == 4);
  CHECK(x[2].label == "tokens=x\\x0a\\x1b variant=a");
  CHECK(x[2].args[3] == "x\n\x1b");
  CHECK(x[3].variant == "b");
  CHECK(expand_sweep(*c.sub, {"moekit", "k", "--tokens", "1,2"})[0].variant.empty());
  CHECK_THROWS_AS(expand_sweep(*c.sub, {"moekit", "k", "--tokens", "1,2,3,4,5,6,7,8,9,10", "-E",
                                        "1,2,3,4,5,6,7,8,9,10", "--overlap", "1,2,3,4,5,6,7,8,9,10", "--variant",
                                        "1,2,3,4,5,6,7,8,9,10,11"}),
                  InputError);
}

TEST_CASE("compare: slower beyond the threshold and outside both spreads") {
  using tools::compare;
  const std::vector<records::Record> base{rec("a", 10, 9.8, 10.2)};
  CHECK(compare(base, base, 0.05).same == 1);
  CHECK(compare(base, {rec("a", 20, 19.6, 20.4)}, 0.05).regressed == 1);                // 2x
  CHECK(compare(base, {rec("a", 10.4, 10.3, 10.5)}, 0.05).same == 1);                   // under the threshold
  CHECK(compare({rec("a", 10, 8, 12)}, {rec("a", 11, 10.5, 11.5)}, 0.05).same == 1);    // inside base's spread
  CHECK(compare(base, {rec("a", 11, 9.9, 15)}, 0.05).same == 1);                        // base median in new's spread
  CHECK(compare(base, {rec("a", 11, 10.5, 11.5)}, 0.05).regressed == 1);
  CHECK(compare(base, {rec("a", 5, 4.9, 5.1)}, 0.05).faster == 1);
  const auto c = compare({rec("a", 10, 9, 11), rec("gone", 1, 1, 1)}, {rec("a", 10, 9, 11), rec("new", 1, 1, 1)}, 0.05);
  CHECK(c.only_base == 1);
  CHECK(c.only_new == 1);
  REQUIRE(c.cells.size() == 3);
  CHECK(c.cells[2].verdict == "only-new");
  // repeated keys: the last record counts
  const auto d = compare(base, {rec("a", 20, 19, 21), rec("a", 10, 9.9, 10.1)}, 0.05);
  CHECK(d.regressed == 0);
  CHECK(d.duplicates == 1);
  // different params or devices never match
  CHECK(compare(base, {rec("a", 10, 9, 11, "32")}, 0.05).only_new == 1);
}

TEST_CASE("trace stats: counts, invalid ids, repeated experts") {
  npy::Array a;
  a.dtype = npy::DType::i4;
  a.shape = {3, 2};
  const std::int32_t v[] = {0, 0, 3, -2, 1, 7};
  a.data.resize(sizeof v);
  std::memcpy(a.data.data(), v, sizeof v);
  const auto s = tools::trace_stats(a, 4, "x");
  CHECK(s.counts == std::vector<std::int64_t>{2, 1, 0, 1});
  CHECK(s.negative == 1);
  CHECK(s.too_large == 1);
  CHECK(s.repeated_rows == 1);
  CHECK(s.max_load() == 2);
  CHECK(s.mean_load() == doctest::Approx(1.0));
  a.shape = {6};
  CHECK_THROWS_AS(tools::trace_stats(a, 4, "x"), InputError);
}

TEST_CASE("records: append one line, read it; the old bench record shape is named and refused") {
  TempDir dir;
  const std::string p = (dir.path / "r.jsonl").string();
  records::append_line(p, "{\"op\":\"demo\",\"variant\":\"v\",\"params\":{\"tokens\":4},\"device\":\"G\","
                          "\"time_us\":{\"median\":2,\"min\":1,\"max\":3,\"samples\":5},\"error\":null}\n");
  auto r = records::read_file(p);
  REQUIRE(r.size() == 1);
  CHECK(*r[0].median_us == 2);
  CHECK(r[0].number("tokens") == 4);
  // bench programs write the record above (bench/common/record_test.cpp); their old shape:
  records::append_line(p, "{\"family\":\"demo\",\"variant\":\"v\",\"params\":{\"tokens\":4},\"device\":{\"name\":"
                          "\"G\"},\"status\":\"ok\",\"timing\":{\"median_us\":2,\"min_us\":1,\"max_us\":3}}\n");
  CHECK_THROWS_WITH_AS(records::read_file(p), doctest::Contains("r.jsonl:2: a bench record of the old schema"),
                       InputError);
  CHECK_THROWS_AS(records::append_line(dir.path.string(), "{}\n"), InputError);  // a folder
}

TEST_CASE("records: a run with PDL on is its own cell; off matches runs from before --pdl") {
  TempDir dir;
  const std::string p = (dir.path / "r.jsonl").string();
  const std::string head = "{\"op\":\"demo\",\"variant\":\"v\",\"params\":{\"tokens\":4},\"device\":\"G\"";
  records::append_line(p, head + ",\"pdl\":\"on\"}\n");
  records::append_line(p, head + ",\"pdl\":\"off\"}\n");
  records::append_line(p, head + ",\"pdl\":\"n/a\"}\n");
  records::append_line(p, head + "}\n");
  const auto r = records::read_file(p);
  REQUIRE(r.size() == 4);
  CHECK(r[0].key() != r[1].key());
  CHECK(r[1].key() == r[2].key());
  CHECK(r[1].key() == r[3].key());
  CHECK(r[0].params_text() == "pdl=on tokens=4");
  CHECK(r[1].params_text() == "tokens=4");
}

TEST_CASE("records: the requested variant keeps cells apart when the same variant ran") {
  TempDir dir;
  const std::string p = (dir.path / "r.jsonl").string();
  const std::string tail = ",\"params\":{\"tokens\":4},\"device\":\"cpu\"}\n";
  records::append_line(p, "{\"op\":\"demo\",\"variant\":\"reference\",\"variant_requested\":\"auto\"" + tail);
  records::append_line(p, "{\"op\":\"demo\",\"variant\":\"reference\",\"variant_requested\":\"fast\"" + tail);
  records::append_line(p, "{\"op\":\"demo\",\"variant\":\"fast\",\"variant_requested\":\"fast\"" + tail);
  records::append_line(p, "{\"op\":\"demo\",\"variant\":\"fast\"" + tail);  // none requested
  const auto r = records::read_file(p);
  REQUIRE(r.size() == 4);
  CHECK(r[0].key() != r[1].key());
  CHECK(r[1].variant_label() == "reference (from fast)");
  CHECK(r[2].variant_label() == "fast");
  CHECK(r[2].key() == r[3].key());
  // on a GPU, auto picking a variant the sweep also lists: two cells, and compare says why
  auto a = rec("warpscan", 10, 9, 11), b = rec("warpscan", 10, 9, 11);
  a.requested = "auto";
  b.requested = "warpscan";
  const std::vector<records::Record> both{a, b};  // compare() points into it
  const auto c = tools::compare(both, both, 0.05);
  CHECK(c.cells.size() == 2);
  CHECK(c.duplicates == 0);
  const std::string text = tools::render_comparison(c, "b", "n", 0.05, false);
  CHECK(text.find("warpscan (from auto)") != std::string::npos);
  CHECK(text.find("note: 2 requested variants ran 'warpscan':") != std::string::npos);
}

TEST_CASE("records: lone \\udcXX escapes are the bytes json_quote wrote; zero times read as untimed") {
  TempDir dir;
  const std::string p = (dir.path / "r.jsonl").string();
  // a lone low surrogate (a byte), an escaped backslash before "udcff" (text), a real pair (a character)
  records::append_line(p, "{\"op\":\"demo\",\"variant\":\"v\\udcff\",\"params\":{\"p\":\"\\\\udcff\","
                          "\"q\":\"\\ud83d\\ude00\\udc80\"},\"device\":\"G\",\"outputs\":[\"o\\udc80\"],"
                          "\"time_us\":{\"median\":0,\"min\":0,\"max\":0,\"samples\":1}}\n");
  const auto r = records::read_file(p);
  REQUIRE(r.size() == 1);
  CHECK(r[0].variant == "v\xff");
  CHECK(r[0].param_text("p") == "\\udcff");
  CHECK(r[0].param_text("q") == "\xf0\x9f\x98\x80\x80");
  CHECK(!r[0].median_us);
  // a negative or infinite time is still refused
  records::append_line(p, "{\"op\":\"demo\",\"variant\":\"v\",\"time_us\":{\"median\":1,\"min\":-1,\"max\":2}}\n");
  CHECK_THROWS_AS(records::read_file(p), InputError);
}
