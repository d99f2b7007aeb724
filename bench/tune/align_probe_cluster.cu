// probe_align cluster: what one thread block cluster costs (empty kernels
// with and without the cluster attribute, the cluster barriers alone), then
// `cluster` next to solo, tiny and onepass from 64 to 16384 slots.
#include "align_probe.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "align/cluster.cuh"
#include "common/device.hpp"
#include "primitives/launch.cuh"

namespace moekit::align_probe {

namespace {

// One store per block, so that the launch is not optimised into nothing.
__global__ void mark_kernel(int* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}
// `cluster`'s three cluster barriers and nothing else, optionally after one
// global store per thread (a release at cluster scope also covers global
// stores: does it wait for them?).
__global__ void cluster_barriers_kernel(int* out, bool store_first) {
  if (store_first) out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __cluster_barrier_arrive_relaxed();
  __cluster_barrier_wait();
  cooperative_groups::this_cluster().sync();
#endif
  if (!store_first && threadIdx.x == 0) out[blockIdx.x] = 1;
}

}  // namespace

int cluster_mode(const char*) {
  std::mt19937_64 rng(19);
  spin_ms(20);
  DeviceBuffer out(16 * 256 * 4);
  std::printf("| blocks | PDL | plain | cluster attr | cluster barriers | barriers after a store |\n"
              "|---:|---|---:|---:|---:|---:|\n");
  for (int g : {1, 2, 4, 8, 16})
    for (bool pdl : {false, true}) {
      const auto run = [&](auto kernel, int cluster, auto... args) {
        return bench_like(
            [&, kernel, cluster](cudaStream_t s, int) {
              prim::launch_with_smem(kernel, dim3(g), dim3(256), 0, s, prim::LaunchAttrs{pdl, false, cluster},
                                     out.as<int>(), args...);
            },
            1);
      };
      std::printf("| %d | %s | %.2f | %.2f | %.2f | %.2f |\n", g, pdl ? "on" : "off", run(mark_kernel, 0),
                  run(mark_kernel, g), run(cluster_barriers_kernel, g, false), run(cluster_barriers_kernel, g, true));
      std::fflush(stdout);
    }
  std::printf("\n| E, topk | tokens | PDL | plan | solo | tiny | onepass | cluster |\n"
              "|---|---:|---|---|---:|---:|---:|---:|\n");
  struct Row {
    Shape sh;
    int tokens;
  };
  for (const Row& r : {Row{{5, 3, false}, 100}, Row{{8, 2, false}, 64}, Row{{8, 2, false}, 256}, Row{{8, 2, false}, 1024},
                       Row{{8, 2, false}, 2048}, Row{{8, 2, false}, 4096}, Row{{8, 2, false}, 8192}, Row{{16, 4, false}, 1024},
                       Row{{16, 4, false}, 4096}, Row{{32, 8, false}, 1024}, Row{{64, 8, false}, 2048},
                       Row{{64, 8, false}, 16}, Row{{64, 8, false}, 64}, Row{{64, 8, false}, 256},
                       Row{{64, 8, false}, 1024}, Row{{256, 8, false}, 64}, Row{{256, 8, false}, 256}}) {
    if (!token_in_range(r.tokens)) continue;
    Setup su(r.sh, r.tokens, rng);
    for (bool pdl : {false, true}) {
      su.pdl = pdl;
      const auto prod = [&](const char* v) { return time_product(su, v); };
      const ad::ClusterPlan pl = ad::cluster_plan<std::int32_t>(su.p, device_caps());
      std::printf("| %d, %d | %d | %s | %dx%d | %.2f | %.2f | %.2f | %.2f |\n", r.sh.E, r.sh.topk, r.tokens,
                  pdl ? "on" : "off", pl.blocks, pl.threads, prod("solo"), prod("tiny"), prod("onepass"), prod("cluster"));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace moekit::align_probe
