// The JSON Lines the bench programs write (record.hpp), on a fake device: the
// one record schema `--results` writes (src/report.cpp), field by field; the
// .partial rename; and `moekit compare` / `moekit plot` reading a bench file
// and a CLI --results file of the same cells as the same cells.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "record.hpp"
#include "records.hpp"
#include "tools.hpp"

using namespace moekit;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Named per process: other test runs may share the temp folder.
std::string temp(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::to_string(::getpid()) + "_" + name)).string();
}

bench::Record timed(std::string variant, bench::Fields params, double median) {
  bench::Record r;
  r.table = "t";
  r.variant = std::move(variant);
  r.params = std::move(params);
  r.m.stats = TimingStats{median, median * 0.95, median * 1.05, 25, "graph replay x20"};
  r.m.options.warmup = 5;
  return r;
}

}  // namespace

TEST_CASE("bench records: the --results record, with the bench's own fields; every status") {
  const std::string path = temp("moekit_record_test.jsonl");
  std::remove(path.c_str());
  bench::Writer w("bench_x", "x", path,
                  {{"name", "GPU \"9\""}, {"cc", "9.0"}, {"sms", 132}, {"driver", 13000}, {"runtime", 12080}},
                  "abc-dirty");
  w.set_copy_gbps(3000.0);

  bench::Record ok;
  ok.table = "t1";
  ok.variant = "fast";
  ok.params = {{"tokens", 16}, {"dtype", "bf16"}, {"zipf", false}};
  ok.m.stats = TimingStats{2.5, 2.0, 4.123456789, 25, "graph replay x20"};
  ok.m.options.warmup = 5;
  ok.m.options.samples = 25;
  ok.m.copies = 3;
  ok.m.bytes = 7500.0;
  ok.extra = {{"picks", "tiny"}, {"exact", true}};
  ok.stages = {{"first", TimingStats{1.0, 0.5, 2.0, 25, "graph"}}, {"second", TimingStats{1.5, 1.0, 3.0, 24, "graph"}}};
  w.write(ok);

  bench::Record na;
  na.table = "t1";
  na.variant = "slow";
  na.params = {{"tokens", std::int64_t{1} << 40}};
  na.m.status = "n/a";
  na.m.reason = "needs\ttokens <= 32";
  w.write(na);

  bench::Record fail = ok;
  fail.variant = "wrong";
  fail.variant_requested = "auto";
  fail.dtype = "bfloat16";
  fail.pdl = "on";
  fail.extra.clear();
  fail.stages.clear();
  fail.m.status = "fail";
  fail.m.reason = "out[3]: 1 != 2";
  fail.m.options.graph = false;
  fail.m.bytes = 0;
  w.write(fail);

  bench::Record err;
  err.variant = "broken";
  err.m.status = "error";
  err.m.reason = "launch: invalid argument";
  w.write(err);

  // Nothing at FILE until finish() (a bench that dies keeps the old results).
  CHECK(slurp(path).empty());
  CHECK(w.finish() == 4);
  CHECK(slurp(path + ".partial").empty());

  // Hand-listed: the --results report's fields in its order, then the bench's.
  const std::string gpu = R"("bench":"bench_x","table":"t1","gpu":{"cc":"9.0","sms":132,"runtime":"12.8"})";
  const std::string tail = R"("outputs":[],"notes":[],"summary":{},"driver":"13.0","build":"abc-dirty",)";
  const std::string want =
      R"({"op":"x","variant":"fast","variant_requested":"fast","params":{"tokens":16,"dtype":"bf16","zipf":"no"},)"
      R"("dtype":null,"device":"GPU \"9\"","check":{"result":"pass","max_error":null,"error_unit":null,)"
      R"("first_difference":null},"time_us":{"median":2.5,"min":2,"max":4.12346,"samples":25},)"
      R"("stage_us":{"first":{"median":1,"min":0.5,"max":2,"samples":25},"second":{"median":1.5,"min":1,"max":3,)"
      R"("samples":24},"sum":{"median":2.5,"min":1.5,"max":5,"samples":24}},)"
      R"("timing_mode":"graph replay x20","bytes":7500,"gbps":3,"timing":{"method":"graph","cache":"warm",)"
      R"("launches":20,"warmup":5,"copies":3},"peak_gbps":3000,"pct_of_peak":0.1,)" +
      tail + R"("pdl":"off","resources":null,"error":null,)" + gpu + R"(,"extra":{"picks":"tiny","exact":true}})" +
      "\n" +
      R"({"op":"x","variant":"slow","variant_requested":"slow","params":{"tokens":1099511627776},"dtype":null,)"
      R"("device":"GPU \"9\"","check":{"result":"skipped","max_error":null,"error_unit":null,)"
      R"("first_difference":null},"time_us":null,"stage_us":null,"timing_mode":null,"bytes":0,"gbps":null,)"
      R"("timing":null,"peak_gbps":null,"pct_of_peak":null,)" +
      tail +
      R"("pdl":"off","resources":null,"error":{"exit_code":2,"message":"x variant 'slow' does not apply to this )"
      R"(input: needs\ttokens <= 32"},)" +
      gpu + "}\n" +
      R"({"op":"x","variant":"wrong","variant_requested":"auto","params":{"tokens":16,"dtype":"bf16","zipf":"no"},)"
      R"("dtype":"bfloat16","device":"GPU \"9\"","check":{"result":"fail","max_error":null,"error_unit":null,)"
      R"("first_difference":"out[3]: 1 != 2"},"time_us":{"median":2.5,"min":2,"max":4.12346,"samples":25},)"
      R"("stage_us":null,"timing_mode":"graph replay x20","bytes":0,"gbps":null,"timing":{"method":"events",)"
      R"("cache":"warm","launches":1,"warmup":5,"copies":3},"peak_gbps":null,"pct_of_peak":null,)" +
      tail + R"("pdl":"on","resources":null,"error":null,)" + gpu + "}\n" +
      R"({"op":"x","variant":"broken","variant_requested":"broken","params":null,"dtype":null,"device":"GPU \"9\"",)"
      R"("check":{"result":"skipped","max_error":null,"error_unit":null,"first_difference":null},"time_us":null,)"
      R"("stage_us":null,"timing_mode":null,"bytes":0,"gbps":null,"timing":null,"peak_gbps":null,)"
      R"("pct_of_peak":null,)" +
      tail +
      R"("pdl":"off","resources":null,"error":{"exit_code":3,"message":"launch: invalid argument"},)"
      R"("bench":"bench_x","gpu":{"cc":"9.0","sms":132,"runtime":"12.8"}})" + "\n";
  CHECK(slurp(path) == want);

  // compare and plot read them: the fail and error cells are untimed, n/a too.
  const auto recs = records::read_file(path);
  REQUIRE(recs.size() == 4);
  CHECK(recs[0].median_us == 2.5);
  CHECK(recs[0].gbps == 3);
  CHECK(recs[0].device == "GPU \"9\"");
  CHECK(!recs[1].median_us);
  CHECK(!recs[2].median_us);
  CHECK(recs[2].variant_label() == "wrong (from auto)");
  CHECK(!recs[3].median_us);
  std::remove(path.c_str());
}

TEST_CASE("bench records and --results records of the same cells compare and plot as the same cells") {
  const std::string bench_path = temp("moekit_record_bench.jsonl"), cli_path = temp("moekit_record_cli.jsonl");
  std::remove(bench_path.c_str());
  std::remove(cli_path.c_str());
  // The cells as a bench program states them: dtype and PDL mode are the
  // record's own fields, as the CLI's report has them.
  bench::Writer w("bench_demo", "demo", bench_path, {{"name", "GPU"}, {"driver", 13000}}, "b1");
  const bench::Fields shape16{{"tokens", 16}, {"num_experts", 64}, {"topk", 8}, {"block_size", 128}};
  const bench::Fields shape256{{"tokens", 256}, {"num_experts", 64}, {"topk", 8}, {"block_size", 128}};
  for (const char* pdl : {"off", "on"}) {
    for (const auto& [shape, us] : {std::pair{shape16, 10.0}, std::pair{shape256, 20.0}}) {
      bench::Record r = timed("warpscan", shape, us);
      r.dtype = "int32";
      r.pdl = pdl;
      w.write(r);
    }
  }
  w.finish();
  // The same cells as `moekit demo ... --variant warpscan --pdl on,off --results FILE` appends them.
  for (const char* pdl : {"off", "on"}) {
    for (const auto& [tokens, us] : {std::pair{"16", 10.0}, std::pair{"256", 20.0}}) {
      Report rep;
      rep.op = "demo";
      rep.variant = rep.variant_requested = "warpscan";
      rep.params = {{"tokens", tokens}, {"num_experts", "64"}, {"topk", "8"}, {"block_size", "128"}};
      rep.dtype = "int32";
      rep.device = "GPU";
      rep.driver = "13.0";
      rep.pdl = pdl;
      rep.check_status = "pass";
      rep.timing = TimingStats{us, us * 0.95, us * 1.05, 25, "graph replay x20", "graph"};
      records::append_line(cli_path, render_report(rep, Format::json));
    }
  }
  const auto base = records::read_file(bench_path), next = records::read_file(cli_path);
  REQUIRE(base.size() == 4);
  REQUIRE(next.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(base[i].key() == next[i].key());
  const tools::Comparison c = tools::compare(base, next, 0.05);
  CHECK(c.cells.size() == 4);
  CHECK(c.same == 4);
  CHECK(c.only_base + c.only_new + c.untimed == 0);
  // plot: one panel per PDL mode, one line (warpscan) in each, of the bench
  // and the CLI records alike.
  for (const auto* recs : {&base, &next}) {
    const std::string svg = tools::render_svg(*recs, {}, "r.jsonl");
    CHECK(svg.find("data-variant=\"warpscan\"") != std::string::npos);
    CHECK(svg.find("left out") == std::string::npos);
  }
  CHECK(tools::render_svg(base, {}, "r.jsonl") == tools::render_svg(next, {}, "r.jsonl"));
  std::remove(bench_path.c_str());
  std::remove(cli_path.c_str());
}
