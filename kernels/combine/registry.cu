// Launchers and registry of the combine family.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include "combine/combine.hpp"
#include "combine/gather.cuh"
#include "common/cuda_check.cuh"

namespace moekit::combine {
namespace {

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

template <class T>
cudaError_t launch_typed(const Problem& p, const Buffers& b, Stream s) {
  constexpr int V = static_cast<int>(16 / sizeof(T));
  auto x = static_cast<const T*>(b.expert_out);
  auto out = static_cast<T*>(b.out);
  const bool vec = p.hidden % V == 0 && aligned16(x) && aligned16(out);
  const std::int64_t per_thread = vec ? V : 1;
  const unsigned threads =
      static_cast<unsigned>(std::clamp<std::int64_t>((p.hidden / per_thread + 31) / 32 * 32, 32, 512));
  const unsigned grid = clamp_grid(p.tokens);
  if (vec)
    detail::gather_combine_kernel<T, V><<<grid, threads, 0, s>>>(x, b.inverse, b.weights, out, p.tokens, p.topk,
                                                                 p.hidden, p.scaling);
  else
    detail::gather_combine_kernel<T, 1><<<grid, threads, 0, s>>>(x, b.inverse, b.weights, out, p.tokens, p.topk,
                                                                 p.hidden, p.scaling);
  return cudaGetLastError();
}

LaunchStatus launch_gather(const Problem& p, const Buffers& b, Stream s) {
  if (p.tokens <= 0 || p.hidden <= 0) return cudaSuccess;
  switch (p.dtype) {
    case DType::f32: return launch_typed<float>(p, b, s);
    case DType::bf16: return launch_typed<__nv_bfloat16>(p, b, s);
    case DType::f16: return launch_typed<__half>(p, b, s);
  }
  return cudaErrorInvalidValue;
}

const char* gather_na(const Problem& p, const DeviceCaps&) {
  return p.topk > detail::kMaxTopk ? "K > 64 (a token's rows and weights are staged in shared memory)" : nullptr;
}
std::size_t no_workspace(const Problem&, const DeviceCaps&) { return 0; }
std::string gather_limits(const DeviceCaps&) { return "K <= " + std::to_string(detail::kMaxTopk); }

const std::array<Variant, 1> kVariants{{
    {{"gather",
      "one block per token; each thread sums w * row over the token's K rows (j ascending, f32 fused "
      "multiply-adds, 16-byte row loads) and rounds once: bit for bit with the reference"},
     true, gather_limits, gather_na, no_workspace, launch_gather},
}};

const std::array<AutoRow<Problem>, 1> kAutoRows = {{
    {"gather", "", nullptr},
}};

}  // namespace

std::span<const Variant> variants() { return kVariants; }
const Variant* find(std::string_view name) { return find_variant<Variant>(kVariants, name); }
const Variant& pick_auto(const Problem& p) { return pick_auto(p, moekit::device_caps()); }
const Variant& pick_auto(const Problem& p, const DeviceCaps& caps) {
  return pick_from_rows<Variant, Problem>(kAutoRows, kVariants, p, caps);
}
std::span<const AutoRow<Problem>> auto_rows() { return kAutoRows; }
std::string auto_rule() { return auto_rule_text<Problem>(kAutoRows); }

}  // namespace moekit::combine
