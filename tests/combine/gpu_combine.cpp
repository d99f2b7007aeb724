// GPU test: the combine variants against the reference (bit for bit when
// stable, else to the order-free tolerance) over T {0, 1, 3, 77, 1000} x K
// {1, 2, 3, 8, 10, 64} (slices' 2-, 4- and 8-row kernels, whole and part-filled
// chunks) x H {1, 7, 1030, 4096, 7168} x dtype, with dropped slots
// (-1) on a one-to-one shuffled inverse map, rows one element off 16-byte
// alignment in every other run (the scalar path), outputs poisoned between
// guard zones; and a case past a grid's 65535 token groups.
//
// MOEKIT_GPU_SUBSET=sanitizer runs T <= 77 and H <= 1030 only.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "combine/buffers.hpp"
#include "combine/reference.hpp"
#include "common/device.hpp"
#include "cuda_util.hpp"
#include "gpu_case.hpp"
#include "half.hpp"

using namespace moekit;

namespace {

// Every variant on one shape (random rows, a shuffled one-to-one map with
// drops, random weights), PDL off and on; the number of variant runs.
int check_variants(std::int64_t T, int K, std::int64_t H, combine::DType dt, std::uint64_t seed) {
  int runs = 0;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  combine::Problem p;
  p.tokens = T;
  p.topk = K;
  p.rows = std::max<std::int64_t>(T * K, 1);
  p.hidden = H;
  p.dtype = dt;
  p.scaling = (seed & 1) ? 2.5f : 1.0f;
  const std::size_t es = dt == combine::DType::f32 ? 4 : 2;
  std::vector<unsigned char> x(std::size_t(p.rows * H) * es);
  for (std::size_t i = 0; i < std::size_t(p.rows * H); ++i) {
    const float v = nd(rng);
    if (es == 4) std::memcpy(&x[i * 4], &v, 4);
    else {
      const std::uint16_t h = dt == combine::DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
      std::memcpy(&x[i * 2], &h, 2);
    }
  }
  // A one-to-one map (as permute writes it) onto shuffled rows, with drops.
  std::vector<std::int32_t> inv(std::size_t(T * K));
  std::vector<std::int32_t> order(std::size_t(p.rows));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<float> w(inv.size());
  for (std::size_t i = 0; i < inv.size(); ++i) {
    inv[i] = rng() % 10 == 0 ? -1 : order[i];
    w[i] = static_cast<float>(rng() % 1000) / 999.0f;
  }
  std::vector<unsigned char> ref(std::size_t(T * H) * es);
  combine::reference(p, x.data(), inv.data(), w.data(), ref.data());
  const std::size_t misalign = (seed & 2) ? es : 0;  // element-aligned, off 16 bytes: the scalar path
  // Each variant once without PDL, and once (where the device has it)
  // with pdl, launched twice back to back so that the second
  // launch overlaps the first one's tail.
  for (const combine::Variant& v : combine::registry().variants())
    for (bool ask_pdl : {false, true}) {
      if (v.not_applicable(p, device_caps()) != nullptr) continue;
      const bool pdl = ask_pdl && device_caps().pdl;
      if (ask_pdl && !pdl) continue;  // no PDL here: the first run covered it
      // Outputs poisoned between guard zones, rows `misalign` bytes off, a garbage workspace.
      combine::DeviceBuffers d(p, {std::as_bytes(std::span(x)), inv, w},
                               WorkspaceNeed::of(v, p, device_caps()), SetOptions::checked(misalign));
      const combine::Buffers b = d.buffers(0);
      std::string why = test::launch_and_sync([&] { return v.launch(p, b, nullptr, pdl); }, pdl ? 2 : 1);
      if (why.empty()) {
        std::vector<unsigned char> got(ref.size());
        why = d.download(got.data());
        if (why.empty()) {
          const CheckResult c = v.stable_order ? combine::check(p, ref.data(), got.data())
                                               : combine::check_tolerant(p, x.data(), inv.data(), w.data(), got.data());
          if (!c.ok) why = c.first_difference;
        }
      }
      test::expect_ok("variant " + std::string(v.info.name) + " T=" + std::to_string(T) + " K=" +
                          std::to_string(K) + " H=" + std::to_string(H) + " dtype " +
                          std::to_string(int(dt)) + " misalign " + std::to_string(misalign) + " seed " +
                          std::to_string(seed) + (pdl ? " pdl (twice back to back)" : ""),
                      why);
      ++runs;
    }
  return runs;
}

}  // namespace

TEST_CASE("combine: every variant against the reference") {
  const bool subset = test::sanitizer_subset();
  std::uint64_t seed = 3;
  int runs = 0;
  for (std::int64_t T : {0, 1, 3, 77, 1000})
    for (int K : {1, 2, 3, 8, 10, 64})
      for (std::int64_t H : {1, 7, 1030, 4096, 7168})
        for (combine::DType dt : {combine::DType::bf16, combine::DType::f16, combine::DType::f32}) {
          if (subset && (T > 77 || H > 1030)) continue;
          if (T * K * H > (std::int64_t(1) << 25)) continue;
          runs += check_variants(T, K, H, dt, ++seed);
        }
  MESSAGE(runs << " runs");
}

// slices' grid holds at most 65535 token groups in y and strides beyond: one
// block column (H 8) over 131073 = 2 x 65535 + 3 tokens takes the stride
// twice, three tokens over (one token per block: 131073 blocks are past the
// policy's two-token band).
TEST_CASE("combine: more token groups than a grid's y dimension") {
  if (test::sanitizer_subset()) return;
  int runs = 0;
  for (int K : {1, 2})
    for (combine::DType dt : {combine::DType::bf16, combine::DType::f32}) runs += check_variants(131073, K, 8, dt, 40 + K);
  MESSAGE(runs << " runs");
}
