// lanes' launches: every instantiation of lanes_kernel (threads x ids per
// thread x expert bits) compiles here, apart from the registry.
#include "align/lanes.cuh"

namespace moekit::align::detail {

template <class IdT>
cudaError_t launch_lanes(const Problem& p, const Buffers& bufs, cudaStream_t s, const LanesPlan& pl) {
  if (pl.threads == 0) return cudaErrorInvalidValue;  // not applicable
  const Args a = make_args(p, bufs);
  const auto go = [&](auto threads, auto rounds) {
    constexpr int kT = decltype(threads)::value, kR = decltype(rounds)::value;
    const auto kernel = pl.bits <= 3 ? lanes_kernel<IdT, kT, kR, 3> : lanes_kernel<IdT, kT, kR, 5>;
    return prim::launch_ex(kernel, pl.grid, kT, 0, s, launch_attrs(p), a, pl.stripe_rows);
  };
  const auto by_rounds = [&](auto threads) {
    switch (pl.rounds) {
      case 1: return go(threads, std::integral_constant<int, 1>{});
      case 2: return go(threads, std::integral_constant<int, 2>{});
      case 4: return go(threads, std::integral_constant<int, 4>{});
      case 8: return go(threads, std::integral_constant<int, 8>{});
      default: return go(threads, std::integral_constant<int, kLanesMaxRounds>{});
    }
  };
  switch (pl.threads) {
    case kLanesMinThreads: return by_rounds(std::integral_constant<int, kLanesMinThreads>{});
    case 512: return by_rounds(std::integral_constant<int, 512>{});
    default: return by_rounds(std::integral_constant<int, kLanesMaxThreads>{});
  }
}

template cudaError_t launch_lanes<std::int32_t>(const Problem&, const Buffers&, cudaStream_t, const LanesPlan&);
template cudaError_t launch_lanes<std::int64_t>(const Problem&, const Buffers&, cudaStream_t, const LanesPlan&);

}  // namespace moekit::align::detail
