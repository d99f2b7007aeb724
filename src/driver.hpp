// Pieces of the run skeleton that families use too: device choice,
// measurement, variant resolution, output writing. CUDA-free.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/device.hpp"
#include "cuda_util.hpp"
#include "device_set.hpp"
#include "display.hpp"
#include "family.hpp"
#include "errors.hpp"
#include "npy.hpp"
#include "report.hpp"
#include "timing.hpp"

namespace moekit {


Format parse_format(const std::string& s);

// Decides CPU or GPU. `--device gpu` without a usable GPU throws CudaError;
// `auto` falls back to the CPU reference and notes why in the report.
bool decide_gpu(const CommonOpts& c, Report& r);

// The run's one PDL decision (run.cpp hands it to Job::resolve, launch and
// stages): --pdl on and a device with PDL (DeviceCaps::pdl).
inline bool launch_pdl(const CommonOpts& c, const DeviceCaps& caps) { return c.pdl == "on" && caps.pdl; }

// How the run times its launches: the options' warm-up, samples, --cold and
// --graph, except that a variant that waits on the device from the host inside
// its launch (Resolved::host_sync) is never captured into a graph: it is timed
// with events around each launch, whatever --graph says.
TimingOptions timing_options(const CommonOpts& c, bool host_sync);
// The report's note for such a run, or "" when the timing is as the options say.
std::string timing_note(const CommonOpts& c, bool host_sync);

// Timing and ncu profiling of a GPU launch, per the options (timing_options
// with `host_sync`). `launch(stream, copy)` reads input copy `copy` of
// `copies`; the first launch error it returns is thrown as CudaError once the
// timing or profiling is over.
void measure_gpu(const CommonOpts& c, Report& r, const std::function<LaunchStatus(Stream, int)>& launch,
                 int copies, bool host_sync);

// With --bench, times each stage of a job's launch alone (Job::stages), with
// the options, input copies, `pdl` and `host_sync` of the whole launch, into
// r.stage_timings.
void measure_stages(const CommonOpts& c, Report& r, const std::vector<Job::Stage>& stages, int copies, bool pdl,
                    bool host_sync);

// Times a CPU reference run with the host clock (median of c.iters runs, at most ~2 s).
void measure_cpu(const CommonOpts& c, Report& r, const std::function<void()>& run);

// Writes named arrays into c.out (created if missing) as one output set
// (outputs.hpp). Returns the paths written and lists them in the report.
// `while_locked(paths)` runs once they are in place, before another process
// may replace them (outputs::write_folder).
std::vector<std::string> write_outputs(
    const CommonOpts& c, Report& r, const std::vector<std::pair<std::string, const npy::Array*>>& files,
    const std::function<void(const std::vector<std::string>&)>& while_locked = {});

// Prints the report and returns the exit code (1 on a failed check, else 0).
int finish(const CommonOpts& c, Report& r);

// The variant a job runs: --variant resolved against a family's registry
// (auto = the family's pick for this problem and `pdl`), and its workspace.
template <class V>
struct ResolvedVariant {
  const V* v = nullptr;
  DeviceBuffer workspace;

  // For launches with `pdl` (Job::resolve). Throws InputError when the name is
  // unknown or the variant does not apply.
  template <class R, class P>
  Resolved resolve(std::string_view op, const std::string& requested, const P& p, const DeviceCaps& caps, bool pdl,
                   const R& registry) {
    caps_ = &caps;
    v = requested == "auto" ? &registry.pick_auto(p, caps, pdl) : registry.find(requested);
    if (!v)
      throw InputError(fmt::format("unknown {} variant '{}' (see `moekit variants {}`)", op, printable(requested), op));
    if (const char* why = v->not_applicable(p, caps))
      throw InputError(fmt::format("{} variant '{}' does not apply to this input: {}", op, v->info.name, why));
    return {std::string(v->info.name), v->stable_order, launches_with_pdl(*v, pdl, caps), v->host_sync};
  }
  // Allocates the workspace; zeroes it once when the variant keeps it zero.
  template <class P>
  void allocate(const P& p) {
    workspace = DeviceBuffer(v->workspace_bytes(p, *caps_));
    if (v->zeroed_workspace && v->zeroed_workspace(p, *caps_)) workspace.fill_bytes(0);
  }
  // What the variant asks of its workspace on p (a family's DeviceSet allocates it).
  template <class P>
  WorkspaceNeed workspace_need(const P& p) const {
    return WorkspaceNeed::of(*v, p, *caps_);
  }
  // Allocates a workspace the family sized itself (a variant run inside
  // passes of its own); zeroed once when `zeroed`.
  void allocate_bytes(std::size_t bytes, bool zeroed) {
    workspace = DeviceBuffer(bytes);
    if (zeroed) workspace.fill_bytes(0);
  }

 private:
  const DeviceCaps* caps_ = nullptr;  // device_caps() entries live for the process
};

// `copies` device copies of one host input (rotated through when timing).
std::vector<DeviceBuffer> upload_copies(const npy::Array& a, int copies);

// Build an Array from a host vector.
template <class T>
npy::Array make_array(npy::DType t, std::vector<std::int64_t> shape, const std::vector<T>& v) {
  npy::Array a;
  a.dtype = t;
  a.shape = std::move(shape);
  a.data.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(a.data.data(), v.data(), a.data.size());
  return a;
}

}  // namespace moekit
