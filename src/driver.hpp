// What the three kernel commands share: options, device choice, measurement
// and output writing. CUDA-free.
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
#include "errors.hpp"
#include "npy.hpp"
#include "report.hpp"

namespace moekit {

struct CommonOpts {
  std::string variant = "auto";
  std::string device = "auto";  // auto | gpu | cpu
  std::string out;              // output folder; empty = write nothing
  bool check = true;
  bool bench = false;
  int warmup = 10;
  int iters = 100;
  bool cold = false;
  bool graph = true;
  bool profile = false;
  std::string format = "text";
  std::uint64_t seed = 1;
};

Format parse_format(const std::string& s);

// Decides CPU or GPU. `--device gpu` without a usable GPU throws CudaError;
// `auto` falls back to the CPU reference and notes why in the report.
bool decide_gpu(const CommonOpts& c, Report& r);

// Timing and ncu profiling of a GPU launch, per the options. `launch(stream, copy)`
// reads input copy `copy` of `copies`.
void measure_gpu(const CommonOpts& c, Report& r, const std::function<void(Stream, int)>& launch,
                 int copies);

// Times a CPU reference run with the host clock (median of c.iters runs, at most ~2 s).
void measure_cpu(const CommonOpts& c, Report& r, const std::function<void()>& run);

// Writes named arrays into c.out (created if missing); each file atomically.
// Returns the paths written and lists them in the report.
std::vector<std::string> write_outputs(const CommonOpts& c, Report& r,
                                       const std::vector<std::pair<std::string, const npy::Array*>>& files);

// Prints the report and returns the exit code (1 on a failed check, else 0).
int finish(const CommonOpts& c, Report& r);

// Resolves --variant (a name or "auto") against a family's registry and checks
// that it applies on `caps`; records the resolved name in the report.
template <class V, class P>
const V& resolve_variant(const CommonOpts& c, const P& p, Report& r, const DeviceCaps& caps,
                         const V& (*pick_auto)(const P&, const DeviceCaps&),
                         const V* (*find)(std::string_view)) {
  const V* v = c.variant == "auto" ? &pick_auto(p, caps) : find(c.variant);
  if (!v)
    throw InputError(fmt::format("unknown {} variant '{}' (see `moekit variants {}`)", r.op, c.variant, r.op));
  if (const char* why = v->not_applicable(p, caps))
    throw InputError(fmt::format("{} variant '{}' does not apply to this input: {}", r.op, v->info.name, why));
  r.variant = std::string(v->info.name);
  return *v;
}

// Rejects an unknown --variant name up front, whatever the device: a CPU run
// never resolves the variant, and a typo must not pass silently as exit 0.
template <class V>
void require_known_variant(const CommonOpts& c, const Report& r, const V* (*find)(std::string_view)) {
  if (c.variant != "auto" && !find(c.variant))
    throw InputError(fmt::format("unknown {} variant '{}' (see `moekit variants {}`)", r.op, c.variant, r.op));
}

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
