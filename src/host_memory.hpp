// Host memory a run may ask for: computed before allocating, refused with a
// one-line error (exit 2) instead of the process being killed for memory.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <string_view>

#include "errors.hpp"

namespace moekit {

// Three quarters of physical memory, or 90% of the address-space limit when
// one is set lower (ulimit -v).
inline double host_memory_budget() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  double budget = pages > 0 && page > 0 ? 0.75 * double(pages) * double(page) : 1e18;
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY)
    budget = std::min(budget, 0.9 * double(lim.rlim_cur));
  return budget;
}

// Throws InputError when `bytes` (what `what` will hold at once) is over budget.
inline void require_host_memory(double bytes, std::string_view what) {
  const double budget = host_memory_budget();
  if (bytes > budget)
    throw InputError(fmt::format("{} needs about {:.1f} GB of host memory, more than this machine allows "
                                 "({:.1f} GB); use a smaller shape",
                                 what, bytes / 1e9, budget / 1e9));
}

}  // namespace moekit
