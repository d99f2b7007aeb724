// Whether a block's dynamic shared memory fits the device: the limit check
// every variant's not_applicable shares. Host-visible: no CUDA headers.
#pragma once

#include <cstddef>

#include "common/device.hpp"

namespace moekit {

// Device-dependent limits hold only where a device is known: without one
// (listing or checking on a CPU-only machine) only the device-independent
// limits reject a problem; launching then fails with the real CUDA error.
inline bool fits_smem(const DeviceCaps& caps, std::size_t bytes) {
  return !caps.present() || bytes <= caps.smem_optin;
}

}  // namespace moekit
