// Per-architecture policy tables: the row for a device. Host-visible: no CUDA.
#pragma once

#include <span>

#include "common/device.hpp"

namespace moekit {

// One row of a family's policy table: `arch` is the compute capability it was
// measured on (90 = sm_90).
template <class Policy>
struct PolicyRow {
  int arch;
  Policy policy;
};

// The row of the newest architecture not newer than the device's (rows in
// ascending arch order); older or unknown devices (and no device) get the
// oldest row. A row exists only for an architecture it was measured on; a
// table says in a comment which row the others fall back to. Capabilities (SMs, shared memory) are applied by the caller:
// policy values are per SM or per block, never per device.
template <class Policy>
const Policy& policy_row_for(std::span<const PolicyRow<Policy>> rows, const DeviceCaps& caps) {
  const PolicyRow<Policy>* best = &rows.front();
  for (const PolicyRow<Policy>& r : rows)
    if (r.arch <= caps.arch()) best = &r;
  return best->policy;
}

}  // namespace moekit
