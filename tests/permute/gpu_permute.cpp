// GPU test: the permute variants against the reference and the layout's
// rules, over T {0, 1, 3, 77, 1000, 5000} x (E, K) x H (odd, not a multiple of 8,
// 16-byte rows) x element size {2, 4} x both layouts; hidden rows 2 bytes off
// alignment in every other run (the narrow copy path); every third run has a
// hot expert (each token's first pick). Outputs are poisoned
// between guard zones. One assertion per run names it and its seed.
//
// A second case runs the expert-parallel modes (--invalid drop / bucket,
// local and vllm maps) over T {0, 1, 3, 77, 1000} x the (E, K) shapes x H
// {7, 264, 1030} x both layouts.
//
// MOEKIT_GPU_SUBSET=sanitizer runs T <= 77 and H <= 264 only.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "cuda_util.hpp"
#include "gpu_case.hpp"
#include "permute/buffers.hpp"
#include "permute/reference.hpp"

using namespace moekit;
using permute::Layout;

namespace {

struct Shape {
  int E, K;
};
const Shape kShapes[] = {{1, 1}, {8, 2}, {64, 6}, {256, 8}, {4096, 8}};
const std::int64_t kTokens[] = {0, 1, 3, 77, 1000, 5000};
const std::int64_t kHidden[] = {1, 7, 132, 264, 1030, 7168};

// With `pdl` (where the device has it) v launches with programmatic
// dependent launch, twice back to back, the second launch overlapping the
// first one's tail.
std::string run_case(const permute::Variant& v, permute::Problem p, const std::vector<std::byte>& hidden,
                     const std::vector<std::int64_t>& ids, std::size_t misalign,
                     const std::vector<std::int32_t>& map = {}, bool pdl = false) {
  const DeviceCaps& caps = device_caps();
  pdl = pdl && caps.pdl;
  if (v.not_applicable(p, caps) != nullptr) return {};
  std::vector<std::int32_t> ids32(ids.begin(), ids.end());  // the ids fit int32 (the CLI maps others to -1)
  // Outputs poisoned between guard zones, hidden rows `misalign` bytes off, a garbage workspace.
  permute::DeviceBuffers d(p, {hidden, ids32, map}, WorkspaceNeed::of(v, p, caps), SetOptions::checked(misalign));
  const permute::Buffers b = d.buffers(0);
  if (std::string e = test::launch_and_sync([&] { return v.launch(p, b, nullptr, pdl); }, pdl ? 2 : 1); !e.empty())
    return e;
  permute::Outputs got;
  if (std::string e = d.download(got); !e.empty()) return e;
  const permute::Outputs ref = permute::reference(p, hidden.data(), ids, map);
  const CheckResult c = permute::check(p, hidden.data(), ids, ref, got, map);
  return c.ok ? std::string() : c.first_difference;
}

}  // namespace

TEST_CASE("permute: every variant against the reference and the layout rules") {
  const bool subset = test::sanitizer_subset();
  std::uint64_t seed = 11;
  int runs = 0;
  for (const Shape& s : kShapes)
    for (std::int64_t T : kTokens)
      for (std::int64_t H : kHidden) {
        if (subset && (T > 77 || H > 264)) continue;
        if (T * H > (std::int64_t(1) << 24)) continue;  // keep the test quick: 7168-wide rows up to 1000 tokens
        ++seed;
        std::mt19937_64 rng(seed);
        std::vector<std::int64_t> ids(std::size_t(T) * s.K);
        const bool hot = seed % 3 == 0;  // every token's first expert is expert 0 (one block places them all)
        for (std::int64_t t = 0; t < T; ++t) {  // distinct experts per token
          std::vector<std::int64_t> pick;
          if (hot) pick.push_back(0);
          while (std::int64_t(pick.size()) < s.K) {
            const std::int64_t e = std::int64_t(rng() % std::uint64_t(s.E));
            if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
          }
          std::copy(pick.begin(), pick.end(), ids.begin() + t * s.K);
        }
        const std::size_t es = (seed & 1) ? 2 : 4;
        std::vector<std::byte> hidden(std::size_t(T * H) * es);
        for (auto& x : hidden) x = static_cast<std::byte>(rng() | 1);  // never a zero row
        for (Layout layout : {Layout::padded, Layout::compact}) {
          const int B = (seed & 2) || s.E >= 4096 ? 16 : 128;  // E = 4096 at B = 128: GBs of padding rows per case
          const auto p = permute::make_problem(T, s.K, s.E, B, H * std::int64_t(es), layout);
          const std::size_t misalign = (seed & 4) ? 2 : 0;
          for (const permute::Variant& v : permute::registry().variants()) {
            const std::string what = "variant " + std::string(v.info.name) + ", E=" + std::to_string(s.E) +
                                     " K=" + std::to_string(s.K) + " T=" + std::to_string(T) + " H=" +
                                     std::to_string(H) + " x " + std::to_string(es) + " bytes, " +
                                     (layout == Layout::padded ? "padded B=" + std::to_string(B) : "compact") +
                                     ", misalign " + std::to_string(misalign) + ", seed " + std::to_string(seed);
            for (bool pdl : {false, true}) {
              test::expect_ok(what + (pdl ? ", pdl (twice back to back)" : ""),
                              run_case(v, p, hidden, ids, misalign, {}, pdl));
              ++runs;
            }
          }
        }
      }
  MESSAGE(runs << " runs");
}

// --invalid drop / bucket and --expert-map with local and vllm semantics:
// the gather variant runs align through align::launch_ep; dropped slots must
// keep inverse -1 and no row, bucket slots and (vllm) non-local experts' slots
// are copied like any other.
TEST_CASE("permute: expert-parallel modes") {
  const bool subset = test::sanitizer_subset();
  std::uint64_t seed = 7000;
  int runs = 0;
  struct Mode {
    align::Invalid invalid;
    align::MapSemantics sem;
    bool map, all_invalid;
  };
  const Mode modes[] = {
      {align::Invalid::bucket, align::MapSemantics::local, false, false},
      {align::Invalid::bucket, align::MapSemantics::local, true, false},
      {align::Invalid::bucket, align::MapSemantics::local, false, true},
      {align::Invalid::drop, align::MapSemantics::local, true, false},
      {align::Invalid::drop, align::MapSemantics::local, false, true},
      {align::Invalid::reject, align::MapSemantics::vllm, true, false},
      {align::Invalid::bucket, align::MapSemantics::vllm, true, false},
  };
  for (const Shape& s : kShapes)
    for (std::int64_t T : {0, 1, 3, 77, 1000})
      for (std::int64_t H : {7, 264, 1030}) {
        if (subset && (T > 77 || H > 264)) continue;
        for (const Mode& m : modes) {
          ++seed;
          std::mt19937_64 rng(seed);
          const bool vllm = m.sem == align::MapSemantics::vllm;
          // The map: global -> local (-1 for about one in five); vllm: E entries onto E / 2 local experts.
          std::vector<std::int32_t> map;
          if (m.map) {
            const int globals = vllm ? s.E : s.E + s.E / 2 + 3, locals = vllm ? std::max(1, s.E / 2) : s.E;
            for (int g = 0; g < globals; ++g) map.push_back(rng() % 5 == 0 ? -1 : int(rng() % std::uint64_t(locals)));
          }
          const std::int64_t domain = m.map ? std::int64_t(map.size()) : s.E;
          std::vector<std::int64_t> ids(std::size_t(T) * s.K);
          for (std::size_t i = 0; i < ids.size(); ++i) {
            ids[i] = std::int64_t(rng() % std::uint64_t(domain));
            const bool bad = m.all_invalid || (m.invalid != align::Invalid::reject && rng() % 10 == 0);
            if (bad) ids[i] = rng() % 2 ? -1 : domain + std::int64_t(rng() % 100);
          }
          const std::size_t es = (seed & 1) ? 2 : 4;
          std::vector<std::byte> hidden(std::size_t(T * H) * es);
          for (auto& x : hidden) x = static_cast<std::byte>(rng() | 1);
          for (Layout layout : {Layout::padded, Layout::compact}) {
            const int B = (seed & 2) || s.E >= 4096 ? 16 : 128;  // E = 4096 at B = 128: GBs of padding rows per case
            const auto p = permute::make_problem(T, s.K, s.E, B, H * std::int64_t(es), layout,
                                                 static_cast<std::int32_t>(map.size()), m.invalid, m.sem);
            for (const permute::Variant& v : permute::registry().variants()) {
              const std::string what = "variant " + std::string(v.info.name) + ", E=" + std::to_string(s.E) +
                                       " K=" + std::to_string(s.K) + " T=" + std::to_string(T) + " H=" +
                                       std::to_string(H) + " x " + std::to_string(es) + " bytes, " +
                                       (layout == Layout::padded ? "padded B=" + std::to_string(B) : "compact") +
                                       ", --invalid " + std::string(align::name_of(m.invalid)) +
                                       (m.map ? ", map (" + std::string(align::name_of(m.sem)) + ")" : "") +
                                       (m.all_invalid ? ", all invalid" : "") + ", seed " + std::to_string(seed);
              const bool pdl = seed % 2 == 1;  // every other mode with PDL
              test::expect_ok(what + (pdl ? ", pdl (twice back to back)" : ""),
                              run_case(v, p, hidden, ids, (seed & 4) ? 2 : 0, map, pdl));
              ++runs;
            }
          }
        }
      }
  MESSAGE(runs << " runs");
}
