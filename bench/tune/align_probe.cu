// probe_align: calibration and tuning probes of the align family (device
// only; not a test). Bench only (bench/tune/): the modes compute their own
// launch plans (the product's plan functions take no overrides) and build
// their own kernel copies from product pieces. One file per question probed
// (align_probe_<question>.cu), one harness (align_probe.hpp); this file lists
// the modes.
//
// Retired modes (their questions are answered in docs/bench/align-notes.md;
// the code is in git at 5bbb436, bench/tune/align_probe.cu): `phases` (tiny's
// clock64 per phase, "tiny phase breakdown") and `trigger` (tiny's PDL
// trigger at later phases, solo at 2-4 slots per thread: "tiny's PDL
// trigger", neither kept). Both needed a probe hook in the product kernel.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "align_probe.hpp"
#include "cuda_util.hpp"

using namespace moekit::align_probe;

namespace {

struct Mode {
  const char* name;
  const char* arg;  // the word after the mode ("" for none)
  const char* what;
  int (*run)(const char* arg);
};

constexpr Mode kModes[] = {
    {"calib", "", "harness calibration: trivial kernels, fill-overlap and tiny under several timing setups",
     calib_mode},
    {"sweep", "FILE.csv", "`tiny` launch shapes (grid x threads) per bench shape; best per shape on stdout",
     sweep_mode},
    {"twopass", "", "`twopass` over grid x counting warps", twopass_mode},
    {"onepass", "", "`onepass` over threads x loads x grid, with and without the cooperative attribute, next to "
                    "tiny / twopass / auto",
     onepass_mode},
    {"micro", "", "`micro` over threads x rows per thread, 1-16 tokens, next to tiny and relay", micro_mode},
    {"micro1", "", "copies of micro's one-warp path (<= 32 slots) with parts changed or removed", micro1_mode},
    {"relay", "", "`relay` over threads x fill rows per thread, plain and cooperative launches, next to tiny",
     relay_mode},
    {"solo", "", "`solo` over threads (256-1024), next to micro, tiny, relay and onepass", solo_mode},
    {"solo1", "", "copies of solo (one slot per thread, E <= 128) with parts changed or removed", solo1_mode},
    {"stripe", "", "`stripe` over rows per block (1024-8192) and threads, next to micro, solo and tiny",
     stripe_mode},
    {"cluster", "", "what one thread block cluster costs, then `cluster` next to solo / tiny / onepass",
     cluster_mode},
    {"floor", "", "per issue-#12 cell, PDL off / on: kernels that do only the memory work, next to micro and auto",
     floor_mode},
    {"ncu", "", "two launches of each kernel of interest, for `ncu --metrics gpu__time_duration.sum ...`",
     ncu_mode},
};

void usage(std::FILE* to) {
  std::fprintf(to, "usage: probe_align [MODE [ARG]]   (default: calib)\n\n");
  for (const Mode& m : kModes) {
    const std::string head = std::string(m.name) + (m.arg[0] ? std::string(" ") + m.arg : "");
    std::fprintf(to, "  %-18s %s\n", head.c_str(), m.what);
  }
  std::fprintf(to,
               "\nPROBE_MIN_TOKENS / PROBE_MAX_TOKENS: only token counts in that range (sweep, onepass, solo, "
               "stripe, cluster, floor).\nTables (Markdown) go to stdout; exit 77 without a CUDA device.\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "calib";
  if (mode == "--help" || mode == "-h") {
    usage(stdout);
    return 0;
  }
  const Mode* m = nullptr;
  for (const Mode& k : kModes)
    if (mode == k.name) m = &k;
  if (m == nullptr) {
    std::fprintf(stderr, "probe_align: unknown mode '%s'\n", mode.c_str());
    usage(stderr);
    return 2;
  }
  if (moekit::cuda_device_count() == 0) {
    std::puts("probe_align: no CUDA device");
    return 77;
  }
  try {
    return m->run(argc > 2 ? argv[2] : nullptr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "probe_align: %s\n", e.what());
    return 1;
  }
}
