// Tuning candidates for the 4096-value tile (bs=115, M=2, k=2048): the same
// `fast` / `range-sort` kernel at other block sizes and digit widths, so the
// benchmark can show why the registry uses the shape it does. Not variants.
#include "dedup/fast.cuh"
#include "dedup/launch.cuh"
#include "tune_dedup.hpp"

namespace moekit::dedup::tune {

namespace {

using detail::FastKernel;

template <int THREADS, int IPT, int RB, bool BITMAP>
void launch_cfg(const Problem& p, const Buffers& b, Stream s) {
  using K = FastKernel<THREADS, IPT, RB, BITMAP>;
  detail::launch_rows<detail::dedup_fast_kernel<THREADS, IPT, RB, BITMAP>, typename K::Storage, THREADS>(p, b, s);
}

const Config kConfigs[] = {
    {"range-sort 256x16, 8-bit digits", launch_cfg<256, 16, 8, false>},
    {"range-sort 512x8, 8-bit digits (registry)", launch_cfg<512, 8, 8, false>},
    {"range-sort 1024x4, 8-bit digits", launch_cfg<1024, 4, 8, false>},
    {"range-sort 512x8, 6-bit digits", launch_cfg<512, 8, 6, false>},
    {"range-sort 512x8, 5-bit digits", launch_cfg<512, 8, 5, false>},
    {"range-sort 512x8, 4-bit digits", launch_cfg<512, 8, 4, false>},
    {"range-sort 1024x4, 6-bit digits", launch_cfg<1024, 4, 6, false>},
    {"fast 256x16", launch_cfg<256, 16, 8, true>},
    {"fast 512x8 (registry)", launch_cfg<512, 8, 8, true>},
    {"fast 1024x4", launch_cfg<1024, 4, 8, true>},
};

}  // namespace

std::span<const Config> configs() { return kConfigs; }

}  // namespace moekit::dedup::tune
