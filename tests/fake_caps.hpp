// DeviceCaps of parts that are not here, for CPU tests of device-dependent
// picks and limits (no GPU needed).
#pragma once

#include "common/device.hpp"

namespace moekit::test {

// Compute capability major.minor with `sms` SMs, nothing else set (no shared
// memory opt-in, PDL or cooperative launch): the base the tests add to.
inline DeviceCaps fake_caps(int major, int minor, int sms) {
  DeviceCaps c;
  c.ordinal = 0;
  c.cc_major = major;
  c.cc_minor = minor;
  c.sm_count = sms;
  return c;
}

// An sm_90 part with an H100's SM count and shared memory.
inline DeviceCaps fake_sm90() {
  DeviceCaps c = fake_caps(9, 0, 132);
  c.name = "fake sm_90";
  c.smem_optin = 227 * 1024;
  c.smem_per_sm = c.smem_optin + 1024;
  c.cooperative = true;
  c.pdl = true;
  return c;
}

}  // namespace moekit::test
