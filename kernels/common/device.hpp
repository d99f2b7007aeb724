// Capabilities of the CUDA device, queried once. Host-visible: no CUDA headers.
// The only device-attribute query of the product: launch shapes, limits and
// `moekit info` all read this.
#pragma once

#include <cstddef>
#include <string>

namespace moekit {

struct DeviceCaps {
  int ordinal = -1;              // -1: no usable CUDA device (CPU-only machine)
  std::string name;              // "NVIDIA H100 80GB HBM3"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::size_t smem_optin = 0;    // dynamic smem per block with the opt-in attribute
  std::size_t smem_per_sm = 0;
  std::size_t l2_bytes = 0;
  std::size_t global_mem = 0;
  int max_threads_per_sm = 0;
  bool cooperative = false;      // cooperative launch supported
  bool pdl = false;              // programmatic dependent launch (cc >= 9.0)
  double dram_peak_gbps = 0.0;   // DRAM peak from memory clock x bus width (0: not reported)
  bool present() const { return ordinal >= 0; }
  int arch() const { return cc_major * 10 + cc_minor; }  // 90 for sm_90
};

// Capabilities of the current device, queried once per ordinal and cached
// (thread-safe; later calls cost a cudaGetDevice). Without a usable device
// returns a caps object with ordinal -1 (all zeros) and never throws; a failed
// query leaves no error behind for the next launch check to find.
const DeviceCaps& device_caps();

}  // namespace moekit
