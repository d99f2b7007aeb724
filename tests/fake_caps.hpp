// A DeviceCaps of an sm_90 part with an H100's SM count and shared memory,
// for CPU tests of device-dependent picks and limits (no GPU needed).
#pragma once

#include "common/device.hpp"

namespace moekit::test {

inline DeviceCaps fake_sm90() {
  DeviceCaps c;
  c.ordinal = 0;
  c.name = "fake sm_90";
  c.cc_major = 9;
  c.sm_count = 132;
  c.smem_optin = 227 * 1024;
  c.smem_per_sm = c.smem_optin + 1024;
  c.cooperative = true;
  c.pdl = true;
  return c;
}

}  // namespace moekit::test
