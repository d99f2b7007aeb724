#include "driver.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "cuda_util.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "outputs.hpp"
#include "profile.hpp"
#include "records.hpp"

namespace moekit {

Format parse_format(const std::string& s) {
  if (s == "text") return Format::text;
  if (s == "json") return Format::json;
  if (s == "csv") return Format::csv;
  throw InputError(fmt::format("--format: unknown format '{}' (text, json or csv)", printable(s)));
}

bool decide_gpu(const CommonOpts& c, Report& r) {
  if (c.device == "cpu") {
    r.device = "cpu";
    return false;
  }
  if (cuda_device_count() > 0) {
    const DeviceProps d = device_props();
    r.device = d.name;
    r.driver = fmt::format("{}.{}", d.driver_version / 1000, (d.driver_version % 1000) / 10);
    return true;
  }
  if (c.device == "gpu") throw CudaError("no CUDA device found (--device gpu needs one)");
  r.device = "cpu";
  r.notes.push_back("no CUDA device found: ran the CPU reference instead (--device cpu)");
  return false;
}

TimingOptions timing_options(const CommonOpts& c, bool host_sync) {
  TimingOptions t;
  t.warmup = c.warmup;
  t.samples = c.iters;
  t.cold = c.cold;
  t.graph = c.graph && !host_sync;  // a capture would fail at the host's wait
  return t;
}

std::string timing_note(const CommonOpts& c, bool host_sync) {
  if (!c.bench || !host_sync || !c.graph) return "";
  return "timed with events around each launch, not CUDA-graph replays: the variant waits on the device from "
         "the host inside its launch (not capturable), so its times include that wait and its launch overheads";
}

void measure_gpu(const CommonOpts& c, Report& r, const std::function<LaunchStatus(Stream, int)>& launch,
                 int copies, bool host_sync) {
  // Launches inside a graph capture cannot throw: the first error is kept and
  // thrown once the capture or profile range is closed.
  LaunchStatus first = 0;
  auto keep = [&](Stream s, int copy) {
    const LaunchStatus e = launch(s, copy);
    if (first == 0) first = e;
  };
  if (c.bench) {
    r.timing = time_launches(keep, copies, timing_options(c, host_sync));
    cuda_check(first, "kernel launch while timing");
    r.peak_gbps = measured_copy_bandwidth_gbps();
  }
  if (c.profile) {
    profile_one_launch(fmt::format("moekit/{}/{}", r.op, r.variant), [&](Stream s) { keep(s, 0); });
    cuda_check(first, "kernel launch while profiling");
    r.notes.push_back(fmt::format("profiled one launch in NVTX range moekit/{}/{}", r.op, r.variant));
  }
}

void measure_stages(const CommonOpts& c, Report& r, const std::vector<Job::Stage>& stages, int copies, bool pdl,
                    bool host_sync) {
  if (!c.bench) return;
  for (const Job::Stage& st : stages) {
    LaunchStatus first = 0;
    auto keep = [&](Stream s, int copy) {
      const LaunchStatus e = st.launch(s, pdl, copy);
      if (first == 0) first = e;
    };
    TimingStats t = time_launches(keep, copies, timing_options(c, host_sync));
    cuda_check(first, fmt::format("{} stage launch while timing", st.name).c_str());
    r.stage_timings.emplace_back(st.name, std::move(t));
  }
}

void measure_cpu(const CommonOpts& c, Report& r, const std::function<void()>& run) {
  if (c.profile) r.notes.push_back("--profile ignored: there is no GPU kernel to profile on the CPU");
  if (!c.bench) return;
  using clk = std::chrono::steady_clock;
  std::vector<double> us;
  auto budget_end = clk::now() + std::chrono::seconds(2);
  for (int i = 0; i < std::max(c.iters, 1); ++i) {
    auto t0 = clk::now();
    run();
    auto t1 = clk::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (t1 > budget_end) break;
  }
  std::vector<double> sorted = us;
  std::sort(sorted.begin(), sorted.end());
  TimingStats st;
  st.samples = static_cast<int>(us.size());
  st.min_us = sorted.front();
  st.max_us = sorted.back();
  st.median_us = sorted[sorted.size() / 2];
  st.mode = "host clock around the CPU reference";
  st.method = "host";
  st.samples_us = std::move(us);
  r.timing = st;
}

std::vector<std::string> write_outputs(
    const CommonOpts& c, Report& r, const std::vector<std::pair<std::string, const npy::Array*>>& files,
    const std::function<void(const std::vector<std::string>&)>& while_locked) {
  if (c.out.empty()) return {};
  std::vector<std::string> targets;
  for (const auto& f : files) targets.push_back((std::filesystem::path(c.out) / f.first).string());
  outputs::refuse_inputs_as_targets(targets, c.inputs);  // `--hidden out/permuted.npy --out out` keeps its input
  auto paths = outputs::write_folder(c.out, files, while_locked);  // all files or none
  r.outputs.insert(r.outputs.end(), paths.begin(), paths.end());
  return paths;
}

std::vector<DeviceBuffer> upload_copies(const npy::Array& a, int copies) {
  std::vector<DeviceBuffer> v;
  for (int i = 0; i < copies; ++i) {
    v.emplace_back(a.data.size());
    v.back().upload(a.data.data(), a.data.size());
  }
  return v;
}

int finish(const CommonOpts& c, Report& r) {
  const Format f = parse_format(c.format);
  print_report(r, f);
  // A run whose check failed is no baseline: only good runs become records.
  if (!c.results.empty() && r.check_status != "fail") records::append_line(c.results, render_report(r, Format::json));
  if (r.check_status == "fail") {
    fmt::print(stderr, "moekit {}: validation failed: {}\n", r.op, r.check.first_difference);
    return kMismatch;
  }
  return kOk;
}

}  // namespace moekit
