// The run skeleton every kernel command goes through (family.hpp).
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "build_describe.hpp"
#include "cuda_util.hpp"
#include "display.hpp"
#include "driver.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "resources_view.hpp"
#include "timing.hpp"

namespace moekit {

namespace {

// The CPU reference of a large input can take seconds: say so on a terminal.
void reference_with_progress(Job& job) {
  const bool tell = job.input_bytes() >= (std::size_t(64) << 20) && isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  if (tell) fmt::print(stderr, "moekit: CPU reference on {:.0f} MB of input...", job.input_bytes() / 1e6);
  job.reference();
  if (tell)
    fmt::print(stderr, " {:.1f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

std::string json_array(const std::vector<ResourceRow>& rows) {
  std::string o = "[";
  for (const ResourceRow& row : rows) {
    if (o.size() > 1) o += ',';
    o += resource_row_json(row);
  }
  return o + "]";
}

// Notes each launch_ex launch while alive (common/launch_log.hpp).
class LaunchLogScope {
 public:
  explicit LaunchLogScope(std::vector<LaunchRecord>& log) { launch_log = &log; }
  ~LaunchLogScope() { launch_log = nullptr; }
  LaunchLogScope(const LaunchLogScope&) = delete;
  LaunchLogScope& operator=(const LaunchLogScope&) = delete;
};

}  // namespace

int run_family(Family& f, const CommonOpts& c, std::string* ran_variant) {
  Report r;
  r.op = std::string(f.command());
  r.variant_requested = c.variant;
  r.build = build_describe();
  // "n/a" on the CPU; a GPU run says what its launches did (Resolved::pdl).
  r.pdl = "n/a";

  // An unknown name is an error on every machine, before any input is read:
  // a CPU run never resolves the variant, and a typo must not pass as exit 0.
  if (c.variant != "auto") {
    const auto rows = f.variants(DeviceCaps{});
    if (std::none_of(rows.begin(), rows.end(), [&](const VariantRow& v) { return v.name == c.variant; }))
      throw InputError(
          fmt::format("unknown {} variant '{}' (see `moekit variants {}`)", r.op, printable(c.variant), r.op));
  }

  std::unique_ptr<Job> job = f.prepare(c, r);
  const bool gpu = decide_gpu(c, r);
  if (!gpu || c.check) reference_with_progress(*job);

  if (!gpu) {
    // Applicability is judged the same way on every machine, as far as it
    // does not depend on the device.
    static const DeviceCaps no_device;
    if (c.variant != "auto") (void)job->resolve(c.variant, no_device, false);
    r.variant = "reference";
    r.check_status = "n/a";
    if (c.variant != "auto" && c.format == "json") {
      // What the build recorded for the named variant's kernels.
      try {
        r.resources_json = json_array(variant_resource_rows(r.op, c.variant, no_device));
      } catch (const InputError& e) {
        r.notes.push_back(fmt::format("no kernel resources: {}", e.what()));
      }
    }
    measure_cpu(c, r, [&] { job->reference(); });
    job->adopt_reference();
  } else {
    // The one PDL decision of the run: every launch below, stages included, gets it.
    const bool pdl = launch_pdl(c, device_caps());
    const Resolved picked = job->resolve(c.variant, device_caps(), pdl);
    const bool exact_order = picked.exact_order;
    r.variant = picked.name;
    r.pdl = pdl_name(picked.pdl);
    const int copies = c.bench ? rotation_copies(job->input_bytes(), c.cold) : 1;
    job->upload(copies);
    const std::string what = fmt::format("{} kernel ({})", r.op, r.variant);
    std::vector<LaunchRecord> launches;
    {
      const LaunchLogScope log(launches);
      cuda_check(job->launch(process_stream(), pdl, 0), what.c_str());
    }
    cuda_sync(what.c_str());
    if (c.format == "json") r.resources_json = json_array(launch_resource_rows(r.op, r.variant, launches, device_caps()));
    job->download();
    if (c.check) {
      r.check = job->check(exact_order);
      r.check_status = r.check.ok ? "pass" : "fail";
      if (exact_order) r.notes.push_back("checked bit for bit: the variant promises the reference's order");
    }
    r.bytes = job->bytes_moved();
    // A host_sync variant is timed with events, its stages too (timing_options).
    measure_gpu(c, r, [&](Stream s, int copy) { return job->launch(s, pdl, copy); }, copies, picked.host_sync);
    measure_stages(c, r, job->stages(), copies, pdl, picked.host_sync);
    if (const std::string note = timing_note(c, picked.host_sync); !note.empty()) r.notes.push_back(note);
  }

  r.summary = job->summary();
  const std::vector<NamedArray> outs = job->outputs();
  std::vector<std::pair<std::string, const npy::Array*>> files;
  for (const auto& [name, arr] : outs) files.emplace_back(name, &arr);
  // The raw samples behind the report's time (GPU launches, or the CPU
  // reference under the host clock; the report's timing mode says which).
  npy::Array timings;
  if (r.timing && !r.timing->samples_us.empty()) {
    timings = make_array(npy::DType::f8, {std::int64_t(r.timing->samples_us.size())}, r.timing->samples_us);
    files.emplace_back("timings.npy", &timings);
  }
  // Without a GPU there is no kernel to check; validate what was written
  // instead: read the files back and compare them with the reference, while
  // the folder is still locked (a concurrent run's files are not ours).
  const auto read_back = [&](const std::vector<std::string>& written) {
    if (gpu || !c.check) return;
    std::vector<std::string> own(written.begin(), written.begin() + std::min(written.size(), outs.size()));
    if (own.empty()) return;
    r.check = job->check_files(own);
    r.check_status = r.check.ok ? "pass" : "fail";
    r.notes.push_back(own.size() == 1 ? "validated the written .npy file against the CPU reference"
                                      : "validated the written .npy files against the CPU reference");
  };
  write_outputs(c, r, files, read_back);
  if (ran_variant) *ran_variant = r.variant;
  return finish(c, r);
}

}  // namespace moekit
