// stripe's launches: every instantiation of stripe_kernel (threads x in-warp
// scan width x power-of-two B) compiles here, apart from the registry.
#include "align/stripe.cuh"

namespace moekit::align::detail {

template <class IdT>
cudaError_t launch_stripe(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl, const StripePlan& pl) {
  if (pl.threads == 0) return cudaErrorInvalidValue;  // not applicable: one block cannot hold the slots
  const Args a = make_args(p, bufs);
  const bool p2 = is_pow2(p.block_size);
  const auto go = [&](auto threads) {
    constexpr int kT = decltype(threads)::value;
    const auto by_lane = [&](auto per_lane) {
      constexpr int kP = decltype(per_lane)::value;
      const auto kernel = p2 ? stripe_kernel<IdT, kT, kP, true> : stripe_kernel<IdT, kT, kP, false>;
      return prim::launch_with_smem(kernel, pl.grid, kT, pl.smem, s, prim::pdl_attrs(pdl), a, pl.stripe_rows);
    };
    return with_warp_scan_width(pl.per_lane, by_lane);
  };
  switch (pl.threads) {
    case kStripeMinThreads: return go(std::integral_constant<int, kStripeMinThreads>{});
    case 512: return go(std::integral_constant<int, 512>{});
    default: return go(std::integral_constant<int, 1024>{});
  }
}

template cudaError_t launch_stripe<std::int32_t>(const Problem&, const Buffers&, cudaStream_t, bool, const StripePlan&);
template cudaError_t launch_stripe<std::int64_t>(const Problem&, const Buffers&, cudaStream_t, bool, const StripePlan&);

}  // namespace moekit::align::detail
