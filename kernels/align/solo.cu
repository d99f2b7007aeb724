// solo's launches: every instantiation of solo_kernel (threads x slots per
// thread x in-warp scan width x power-of-two B) compiles here, apart from the
// registry.
#include "align/solo.cuh"

namespace moekit::align::detail {

template <class IdT>
cudaError_t launch_solo(const Problem& p, const Buffers& bufs, cudaStream_t s, bool pdl, const SoloPlan& pl) {
  if (pl.threads == 0) return cudaErrorInvalidValue;  // not applicable: one block cannot hold the slots
  const Args a = make_args(p, bufs);
  const std::size_t smem = expert_table_smem(p.num_experts);  // counts, then first blocks
  const bool p2 = is_pow2(p.block_size);
  const auto go = [&](auto threads, auto per_thread, auto late) {
    constexpr int kT = decltype(threads)::value, kL = decltype(per_thread)::value;
    constexpr bool kLate = decltype(late)::value;
    const auto by_lane = [&](auto per_lane) {
      constexpr int kP = decltype(per_lane)::value;
      const auto kernel = p2 ? solo_kernel<IdT, kT, kL, kP, true, kLate> : solo_kernel<IdT, kT, kL, kP, false, kLate>;
      return prim::launch_with_smem(kernel, 1, kT, smem, s, prim::pdl_attrs(pdl), a);
    };
    return with_warp_scan_width(pl.per_lane, by_lane);
  };
  using std::integral_constant;
  using One = integral_constant<int, 1>;
  using Early = std::false_type;
  // Two or more slots per thread only at 1024 threads (fewer threads would
  // hold them at one each).
  switch (pl.per_thread) {
    case 1: break;
    case 2: return go(integral_constant<int, 1024>{}, integral_constant<int, 2>{}, Early{});
    case 4: return go(integral_constant<int, 1024>{}, integral_constant<int, 4>{}, Early{});
    default: return go(integral_constant<int, 1024>{}, integral_constant<int, 8>{}, Early{});
  }
  switch (pl.threads) {
    case kSoloMinThreads:
      if (pl.late_trigger) return go(integral_constant<int, kSoloMinThreads>{}, One{}, std::true_type{});
      return go(integral_constant<int, kSoloMinThreads>{}, One{}, Early{});
    case 512: return go(integral_constant<int, 512>{}, One{}, Early{});
    default: return go(integral_constant<int, 1024>{}, One{}, Early{});
  }
}

template cudaError_t launch_solo<std::int32_t>(const Problem&, const Buffers&, cudaStream_t, bool, const SoloPlan&);
template cudaError_t launch_solo<std::int64_t>(const Problem&, const Buffers&, cudaStream_t, bool, const SoloPlan&);

}  // namespace moekit::align::detail
