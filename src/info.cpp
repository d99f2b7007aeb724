// `moekit info`: the device, or the dtype and shape of .npy files.
#include <fmt/format.h>

#include <cstdio>

#include "build_describe.hpp"
#include "commands.hpp"
#include "cuda_util.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "json.hpp"
#include "npy.hpp"
#include "timing.hpp"

namespace moekit {
namespace {

std::string dims_csv(const std::vector<std::int64_t>& shape) {
  std::string o;
  for (auto d : shape) {
    if (!o.empty()) o += ',';
    o += std::to_string(d);
  }
  return o;
}

std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

std::string jq(std::string_view s) { return json_quote(s); }

// Describes each file from its header alone (inspect() also checks the file
// size against the header, so a truncated or padded file is still an error).
// Every file is reported; a bad one is a stderr line, and exit 2 at the end.
int describe_files(const std::vector<std::string>& files, bool json) {
  int rc = kOk;
  for (auto& f : files) {
    npy::Info a;
    try {
      a = npy::inspect(f);
    } catch (const InputError& e) {
      // JSON readers of stdout see every file, a bad one as an error object.
      if (json) fmt::print("{{\"file\":{},\"error\":{{\"exit_code\":2,\"message\":{}}}}}\n", jq(f), jq(e.what()));
      std::fflush(stdout);
      fmt::print(stderr, "moekit: {}\n", e.what());
      rc = kBadInput;
      continue;
    }
    std::int64_t numel = 1;
    for (auto d : a.shape) numel *= d;  // inspect() refused shapes whose count overflows
    if (json)
      fmt::print("{{\"file\":{},\"dtype\":{},\"shape\":[{}],\"numel\":{}}}\n", jq(f), jq(npy::dtype_name(a.dtype)),
                 dims_csv(a.shape), numel);
    else
      fmt::print("{}: {} {} ({} elements)\n", display_path(f), npy::dtype_name(a.dtype), npy::format_shape(a.shape),
                 numel);
  }
  std::fflush(stdout);
  return rc;
}

// "80;90" -> "SASS for sm_80, sm_90, PTX for compute_90" (meson.build's gencode rule).
std::string arch_text(std::string_view archs) {
  std::string sass, last;
  for (std::size_t start = 0; start <= archs.size();) {
    std::size_t end = archs.find(';', start);
    if (end == std::string_view::npos) end = archs.size();
    const std::string a(archs.substr(start, end - start));
    if (!a.empty()) sass += (sass.empty() ? "" : ", ") + ("sm_" + a), last = a;
    start = end + 1;
  }
  return fmt::format("SASS for {}, PTX for compute_{}", sass, last);
}

// Versions and build, known without a device (the README promises them on every machine).
struct Versions {
  int driver = cuda_driver_version(), runtime = cuda_runtime_version();
  std::string driver_text() const { return driver ? version_text(driver) : "none (no NVIDIA driver)"; }
};

}  // namespace

int run_info(const std::vector<std::string>& files, const std::string& format) {
  const bool json = format == "json";
  if (!files.empty()) return describe_files(files, json);
  const Versions v;
  const std::string build = build_describe(), arch = MOEKIT_GPU_ARCH;
  if (cuda_device_count() == 0) {
    if (json)
      fmt::print("{{\"device\":null,\"note\":\"no CUDA device found\",\"driver\":{},\"runtime\":{},\"build\":{},"
                 "\"gpu_arch\":{}}}\n",
                 v.driver ? jq(version_text(v.driver)) : "null", jq(version_text(v.runtime)), jq(build), jq(arch));
    else
      fmt::print("device:              none: no CUDA device found (kernel commands fall back to the CPU reference; "
                 "--device gpu exits 3)\n"
                 "CUDA driver/runtime: {} / {}\n"
                 "build:               {}, {}\n",
                 v.driver_text(), version_text(v.runtime), build, arch_text(arch));
    return kOk;
  }
  DeviceProps d = device_props();
  const double bw = measured_copy_bandwidth_gbps(), rbw = measured_read_bandwidth_gbps();
  if (json) {
    fmt::print(
        "{{\"device\":{},\"sm_count\":{},\"compute_capability\":\"{}.{}\",\"l2_bytes\":{},\"memory_bytes\":{},"
        "\"driver\":\"{}\",\"runtime\":\"{}\",\"dram_peak_gbps\":{},\"copy_bandwidth_gbps\":{:.1f},"
        "\"read_bandwidth_gbps\":{:.1f},\"build\":{},\"gpu_arch\":{}}}\n",
        jq(d.name), d.sm_count, d.cc_major, d.cc_minor, d.l2_bytes, d.global_mem_bytes,
        version_text(d.driver_version), version_text(d.runtime_version),
        d.dram_peak_gbps > 0 ? fmt::format("{:.1f}", d.dram_peak_gbps) : std::string("null"), bw, rbw,
        jq(build), jq(arch));
  } else {
    fmt::print("device:              {}\n", d.name);
    fmt::print("compute capability:  {}.{}\n", d.cc_major, d.cc_minor);
    fmt::print("multiprocessors:     {}\n", d.sm_count);
    fmt::print("L2 cache:            {:.1f} MiB\n", d.l2_bytes / 1048576.0);
    fmt::print("memory:              {:.1f} GiB\n", d.global_mem_bytes / 1073741824.0);
    fmt::print("CUDA driver/runtime: {} / {}\n", version_text(d.driver_version), version_text(d.runtime_version));
    if (d.dram_peak_gbps > 0)
      fmt::print("DRAM peak:           {:.0f} GB/s (memory clock x bus width, as the part reports them; auto rules "
                 "read it per SM)\n",
                 d.dram_peak_gbps);
    else
      fmt::print("DRAM peak:           not reported by the part\n");
    fmt::print("copy bandwidth:      {:.0f} GB/s (device-to-device 512 MiB copies, read + write bytes, "
               "median of 10; the peak that pct_of_peak uses)\n",
               bw);
    fmt::print("read bandwidth:      {:.0f} GB/s (a streaming reduction over 2 GiB, bytes read, median of 10; the "
               "ceiling for weight streaming)\n",
               rbw);
    fmt::print("build:               {}, {}\n", build, arch_text(arch));
  }
  return kOk;
}

}  // namespace moekit
