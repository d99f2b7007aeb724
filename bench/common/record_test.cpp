// The JSON Lines the bench programs write (record.hpp), on a fake device:
// field names and shapes bench/render.py reads, escaping, the .partial rename.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "record.hpp"

using namespace moekit;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("bench records: one JSON object per cell, timing and derived fields") {
  const std::string path = (std::filesystem::temp_directory_path() / "moekit_record_test.jsonl").string();
  std::remove(path.c_str());
  bench::Writer w("bench_x", "x", path, {{"name", "GPU \"9\""}, {"cc", "9.0"}, {"sms", 132}}, "abc-dirty");
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
  ok.extra = {{"picks", "tiny"}};
  w.write(ok);

  bench::Record na;
  na.table = "t1";
  na.variant = "slow";
  na.params = {{"tokens", std::int64_t{1} << 40}};
  na.m.status = "n/a";
  na.m.reason = "needs\ttokens <= 32";
  w.write(na);

  // Nothing at FILE until finish() (a bench that dies keeps the old results).
  CHECK(slurp(path).empty());
  CHECK(w.finish() == 2);
  CHECK(slurp(path + ".partial").empty());

  const std::string want =
      R"({"bench":"bench_x","family":"x","table":"t1","variant":"fast","params":{"tokens":16,"dtype":"bf16",)"
      R"("zipf":false},"status":"ok","device":{"name":"GPU \"9\"","cc":"9.0","sms":132},"build":"abc-dirty",)"
      R"("timing":{"median_us":2.5,"min_us":2,"max_us":4.123457,"samples":25,"mode":"graph","iters":20,"warmup":5,)"
      R"("cold":false,"copies":3,"description":"graph replay x20"},"derived":{"bytes":7500,"gbps":3,)"
      R"("copy_gbps":3000,"pct_copy":0.1},"extra":{"picks":"tiny"}})"
      "\n"
      R"({"bench":"bench_x","family":"x","table":"t1","variant":"slow","params":{"tokens":1099511627776},)"
      R"("status":"n/a","reason":"needs\ttokens <= 32","device":{"name":"GPU \"9\"","cc":"9.0","sms":132},)"
      R"("build":"abc-dirty"})"
      "\n";
  CHECK(slurp(path) == want);
  std::remove(path.c_str());
}
