// GPU tests of every align variant against the CPU reference.
//
//   build-*/tests/align/gpu_align                       full grid (+ subset)
//   MOEKIT_GPU_SUBSET=sanitizer build-*/tests/align/gpu_align
//       small cases only ("sanitizer subset"), for compute-sanitizer
//       --tool memcheck / racecheck
//
// Outputs are poisoned (0xAB bytes) before every launch and sit between guard
// zones that must stay poisoned; the workspace is poisoned once and reused, so
// stale workspace contents are exercised too (variants that keep their
// workspace zero get it zeroed and must leave it zero after every run). Every
// variant runs twice per case: once without programmatic dependent launch,
// then (where the device has PDL) launched twice back to back with
// pdl, so the second launch overlaps the first one's tail. Variants that promise stable order (and `auto`
// when it picks one) must match the reference bit for bit. Every (variant,
// case, run) is one assertion whose failure names the variant, the shape,
// the id dtype and the seed; each test case ends with a one-line summary.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "align/align.hpp"
#include "align/buffers.hpp"
#include "cuda_util.hpp"
#include "align/reference.hpp"
#include "gpu_case.hpp"

using namespace moekit;
using namespace moekit::align;
using moekit::test::expect_ok;

namespace {

enum class Dist { kUniform, kZipf, kOneHot };
const char* dist_name(Dist d) {
  return d == Dist::kUniform ? "uniform" : d == Dist::kZipf ? "zipf" : "onehot";
}

struct Case {
  std::int64_t numel = 0;
  std::int32_t E = 1;
  std::int32_t B = 1;
  Dist dist = Dist::kUniform;
  bool i64 = false;
  bool map = false;
  bool invalid = false;   // sprinkle -1 / out-of-range ids (--ignore-invalid)
  bool pad = false;       // --pad-sorted-ids
  bool loose = false;     // buffer at the loose bound numel + G*(B-1), larger than make_problem's
  bool misalign = false;  // ids pointer offset by one element (no 16-byte loads)
  // Expert parallelism (launch_ep): what invalid slots become, how the map reads
  // (vllm: E global experts, a map of E entries), and every id invalid.
  Invalid mode = Invalid::reject;
  MapSemantics sem = MapSemantics::local;
  bool all_invalid = false;
  std::uint64_t seed = 1;

  std::string str() const {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "numel=%lld E=%d B=%d %s %s%s%s%s%s%s --invalid %s --map-semantics %s%s seed=%llu",
                  static_cast<long long>(numel), E, B, dist_name(dist), i64 ? "int64" : "int32",
                  map ? " map" : "", invalid ? " invalid" : "", pad ? " pad" : "",
                  loose ? " loose" : "", misalign ? " misaligned" : "",
                  std::string(name_of(mode)).c_str(), std::string(name_of(sem)).c_str(),
                  all_invalid ? " all-invalid" : "", static_cast<unsigned long long>(seed));
    return buf;
  }
  std::int32_t map_size() const {
    return !map ? 0 : sem == MapSemantics::vllm ? E : E + E / 2 + 3;
  }
};

struct Stats {
  long cases = 0, runs = 0, not_applicable = 0, failed = 0, exact = 0;
};

struct Inputs {
  std::vector<std::int64_t> ids;
  std::vector<std::int32_t> map;
};

Inputs generate(const Case& c) {
  std::mt19937_64 rng(c.seed);
  Inputs in;
  std::int64_t domain = c.E;  // ids are drawn from [0, domain)
  if (c.map) {
    domain = c.map_size();
    // vllm: E is the global count; the map sends it to about half as many local experts.
    const int locals = c.sem == MapSemantics::vllm ? std::max(1, c.E / 2) : c.E;
    std::uniform_int_distribution<int> local(0, locals - 1);
    std::bernoulli_distribution unmapped(0.2);
    in.map.resize(static_cast<std::size_t>(domain));
    for (auto& m : in.map) m = unmapped(rng) ? -1 : local(rng);
  }
  in.ids.resize(static_cast<std::size_t>(c.numel));
  if (c.dist == Dist::kUniform) {
    std::uniform_int_distribution<std::int64_t> u(0, domain - 1);
    for (auto& x : in.ids) x = u(rng);
  } else if (c.dist == Dist::kOneHot) {
    const std::int64_t hot = std::uniform_int_distribution<std::int64_t>(0, domain - 1)(rng);
    for (auto& x : in.ids) x = hot;
  } else {  // zipf(1.1) over a random permutation of the experts
    std::vector<double> cdf(static_cast<std::size_t>(domain));
    double s = 0;
    for (std::int64_t r = 0; r < domain; ++r) cdf[r] = (s += 1.0 / std::pow(r + 1.0, 1.1));
    std::vector<std::int64_t> perm(static_cast<std::size_t>(domain));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::uniform_real_distribution<double> u(0, s);
    for (auto& x : in.ids) {
      const auto it = std::lower_bound(cdf.begin(), cdf.end(), u(rng));
      x = perm[std::min<std::size_t>(it - cdf.begin(), cdf.size() - 1)];
    }
  }
  if (c.invalid) {
    std::bernoulli_distribution bad(0.05);
    std::uniform_int_distribution<int> kind(0, 3);
    for (auto& x : in.ids) {
      if (!bad(rng)) continue;
      switch (kind(rng)) {
        case 0: x = -1; break;
        case 1: x = domain; break;
        case 2: x = domain + 12345; break;
        default: x = c.i64 ? (std::int64_t(1) << 40) : -7; break;
      }
    }
  }
  if (c.all_invalid)
    for (std::size_t i = 0; i < in.ids.size(); ++i) in.ids[i] = i % 3 == 0 ? -1 : domain + std::int64_t(i % 5);
  return in;
}

Problem problem_of(const Case& c) {
  Problem p = make_problem(c.numel, c.E, c.B, c.i64, c.map_size(), c.pad, c.mode, c.sem);
  if (c.loose) {  // an engine that allocates for every group padding: kernels take any buffer >= the tight bound
    const std::int64_t groups = row_groups(p);
    p.max_num_tokens_padded = c.numel + groups * static_cast<std::int64_t>(c.B - 1);
    if (c.pad) p.max_num_tokens_padded = (p.max_num_tokens_padded + c.B - 1) / c.B * c.B;
    p.max_num_blocks = (p.max_num_tokens_padded + c.B - 1) / c.B;
  }
  return p;
}

// Runs every variant on one case, through launch_ep (which is the variant's
// own launch when the case has no expert-parallel passes): one assertion for
// its applicability and one per run.
void run_case(const Case& c, Stats& st) {
  ++st.cases;
  const Inputs in = generate(c);
  const Problem p = problem_of(c);
  const Problem vp = variant_problem(p);  // what the variant itself runs: E + 1 with the bucket
  const Outputs ref = reference(p, in.ids, in.map);

  // Inputs on the device (optionally one element off 16-byte alignment).
  const std::size_t esz = c.i64 ? 8 : 4;
  std::vector<unsigned char> host(static_cast<std::size_t>(c.numel) * esz);
  for (std::int64_t i = 0; i < c.numel; ++i) {
    if (c.i64) {
      std::memcpy(host.data() + i * 8, &in.ids[i], 8);
    } else {
      const auto v = static_cast<std::int32_t>(in.ids[i]);
      std::memcpy(host.data() + i * 4, &v, 4);
    }
  }
  // The outputs between poisoned guard zones; each variant below gets its own workspace.
  DeviceBuffers d(p, {std::as_bytes(std::span(host)), in.map}, {}, SetOptions::checked(c.misalign ? esz : 0));

  const DeviceCaps& caps = device_caps();
  for (const align::Variant& v : registry().variants()) {
    const char* na = ep_not_applicable(v, p, caps);
    const std::string_view name = v.info.name;
    const std::string what = std::string(name) + " " + c.str();
    // Which variants must accept this shape (E <= 16384 everywhere), on the
    // problem the variant runs.
    const std::int64_t E = vp.num_experts;
    bool must = true, known = true;
    if (name == "small-batch") must = c.numel < 1024 && E <= 64;
    if (name == "oneshot") must = c.numel <= 65535;
    if (name == "micro") must = c.numel <= 256;
    if (name == "relay") must = c.numel <= 4096;
    if (name == "solo") must = c.numel <= 8192;
    if (name == "cluster") must = E <= 128 && c.numel <= (vp.ids_int64 ? 32768 : 65536) && caps.arch() >= 90;
    if (name == "stripe") {  // shared memory 4*(ceil(numel/32)*E + E + 5) + 256 bytes: sure below 160 KiB
      must = c.numel <= 1024;
      known = !must || 4 * (((c.numel + 31) / 32) * E + E + 5) + 256 <= 160 * 1024;
    }
    if (name == "onepass") must = c.numel <= 1048576;  // one wave of 1024 x 16-byte loads x 4
    if (name == "tiny") {  // shared memory 4*(numel + 2E + 1) bytes: sure below 160 KiB
      must = c.numel <= 32768;
      known = !must || 4 * (c.numel + 2 * E + 4) <= 160 * 1024;
    }
    if (known && must != (na == nullptr)) {
      ++st.failed;
      expect_ok(what, std::string("not_applicable=") + (na ? na : "null") + ", expected " +
                          (must ? "applicable" : "a reason"));
    }
    if (na != nullptr) {
      ++st.not_applicable;
      continue;
    }
    // A variant that keeps its workspace zero gets it zeroed once, like from
    // the CLI, and must hand its own part back zeroed after every run (the
    // bucket's groups after it are launch_ep's scratch); any other gets 0xCD.
    const WorkspaceNeed need = workspace_need(v, p, caps);
    const bool zeroed = need.zeroed;
    const std::size_t own_bytes = ep_variant_workspace_bytes(v, p, caps);
    d.replace_workspace(need);
    const Buffers b = d.buffers(0);
    // The registry's promise: stable order means bit for bit (and `auto` when it picks such a variant).
    const bool exact = v.stable_order || (name == "auto" && registry().pick_auto(vp, false).stable_order);
    for (int rep = 0; rep < 2; ++rep) {
      d.poison();
      const bool pdl = rep == 1 && caps.pdl;
      std::string why = test::launch_and_sync([&] { return launch_ep(v, p, b, nullptr, pdl); }, pdl ? 2 : 1);
      ++st.runs;
      if (exact) ++st.exact;
      if (why.empty()) {
        Outputs got;
        if (std::string g = d.download(got); !g.empty()) {
          why = g;
        } else if (zeroed && !d.workspace_zero(own_bytes)) {
          why = "left its workspace non-zero";
        } else {
          const CheckResult r = check(p, ref, got, exact);
          if (!r.ok) why = r.first_difference;
        }
      }
      expect_ok(what + " run " + std::to_string(rep) + (pdl ? " (pdl, twice back to back)" : ""), why);
      if (!why.empty()) {
        ++st.failed;
        break;
      }
    }
  }
}

const std::vector<std::int64_t> kNumels = {0, 1, 2, 7, 63, 64, 1023, 1024, 1025, 8192, 131072,
                                           1048576};
const std::vector<std::int32_t> kExperts = {1, 2, 8, 60, 64, 65, 128, 256, 257, 512, 1024, 4096,
                                            16384};
const std::vector<std::int32_t> kBlocks = {1, 16, 32, 64, 128, 256};
const std::vector<std::int32_t> kBlocksSmall = {1, 3, 16, 64, 128, 256, 1024};

// The knobs the tile-edge loops draw at random, in one place (same draw order
// for both loops: B, dist, i64, map, invalid, [pad, loose,] misalign).
void draw_knobs(Case& c, std::mt19937_64& rng, bool pad_and_loose) {
  c.B = kBlocksSmall[rng() % kBlocksSmall.size()];
  c.dist = static_cast<Dist>(rng() % 3);
  c.i64 = rng() % 2;
  c.map = rng() % 3 == 0;
  c.invalid = rng() % 3 == 0;
  if (pad_and_loose) {
    c.pad = rng() % 2;
    c.loose = rng() % 2;
  }
  c.misalign = rng() % 4 == 0;
}

void report(const char* what, const Stats& st) {
  std::printf(
      "align GPU %s: %ld cases, %ld variant runs (%ld bit-exact), %ld not applicable, %ld "
      "failed -> %s\n",
      what, st.cases, st.runs, st.exact, st.not_applicable, st.failed,
      st.failed == 0 ? "PASS" : "FAIL");
  std::fflush(stdout);
}

// The full-run cases stay out of the sanitizer subset.
bool skipped_in_subset(const char* what) {
  if (!test::sanitizer_subset()) return false;
  std::printf("align GPU %s: skipped (MOEKIT_GPU_SUBSET=sanitizer)\n", what);
  return true;
}

}  // namespace

TEST_CASE("sanitizer subset") {
  Stats st;
  std::uint64_t seed = 7;
  for (std::int64_t n : {0, 7, 60, 120, 200, 250, 1000, 1500, 3000, 5000, 20000})
    for (std::int32_t E : {8, 300})
      for (bool i64 : {false, true}) {
        Case c;
        c.numel = n;
        c.E = E;
        c.B = n == 1000 ? 1 : n == 120 ? 16 : n == 250 ? 4 : n == 3000 ? 3 : 64;
        c.dist = static_cast<Dist>(seed % 3);
        c.i64 = i64;
        c.map = E == 300;
        c.invalid = i64;
        c.misalign = n == 5000 && !i64;
        c.loose = n == 7 && E == 300;
        c.seed = seed++;
        run_case(c, st);
      }
  // The expert-parallel passes (launch_ep) around every variant.
  for (std::int64_t n : {0, 7, 1000, 5000})
    for (int m = 0; m < 3; ++m) {
      Case c;
      c.numel = n;
      c.E = m == 0 ? 8 : 300;
      c.B = 64;
      c.i64 = m == 1;
      c.map = m != 0;
      c.invalid = true;
      c.mode = m == 2 ? Invalid::drop : Invalid::bucket;
      c.sem = m == 0 ? MapSemantics::local : MapSemantics::vllm;
      c.seed = seed++;
      run_case(c, st);
    }
  report("sanitizer subset", st);
  CHECK(st.runs > 0);
}

// Every numel up to 40, micro's shuffle path (<= 8 slots, every B), its
// 1/2/4/8-slots-per-lane steps and bound, relay's
// auto bound, solo's 1/2/4/8 slots per thread and bound (E = 4096: its chunked
// scan), and tiles that end inside a warp's sub-tile, a block's tile and
// the last block of the multi-block variants.
TEST_CASE("small and tile-edge shapes") {
  if (skipped_in_subset("small and tile-edge shapes")) return;
  Stats st;
  std::uint64_t seed = 5000;
  std::mt19937_64 rng(99);
  const auto run_at = [&](std::int64_t n, std::int32_t E, bool pad_and_loose) {
    Case c;
    c.numel = n;
    c.E = E;
    draw_knobs(c, rng, pad_and_loose);
    c.seed = seed++;
    run_case(c, st);
  };
  for (std::int64_t n = 0; n <= 40; ++n) run_at(n, std::array<std::int32_t, 6>{1, 3, 8, 64, 256, 16384}[n % 6], true);
  // micro's keys by shuffles (numel <= 8 and numel <= B) and its votes just
  // past them (numel 9, or B below numel), every B against every small numel.
  for (std::int64_t n = 1; n <= 9; ++n)
    for (std::int32_t B : {1, 4, 7, 8, 9, 128})
      for (std::int32_t E : {1, 5, 64, 4096}) {
        Case c;
        c.numel = n;
        c.E = E;
        draw_knobs(c, rng, true);
        c.B = B;
        c.seed = seed++;
        run_case(c, st);
      }
  for (std::int64_t n : {48, 63, 64, 65, 96, 127, 128, 129, 200, 255, 256, 257, 300, 384, 511, 512, 513, 1023,
                         1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193})
    for (std::int32_t E : {1, 5, 128, 300, 4096}) run_at(n, E, true);
  // solo's in-warp scan at the edges of its lane widths (1 expert per lane up
  // to 32, 4 up to 128) and just past them (the block scan).
  for (std::int64_t n : {40, 300, 1500})
    for (std::int32_t E : {31, 32, 33, 127, 129}) run_at(n, E, true);
  // Few experts at 1-16 ids per thread of a 1024-thread block (solo's and
  // the batched id loads' steps), either side of E = 8, 16 and 32.
  for (std::int64_t n : {1025, 2047, 4097, 8191, 8193, 12345, 16383, 16384, 16385})
    for (std::int32_t E : {2, 8, 9, 16, 31, 32, 33}) run_at(n, E, true);
  for (std::int64_t n : {511, 2049, 16 * 512 + 3, 32768, 65536 + 17, 131072 * 3 + 1})
    for (std::int32_t E : {2, 60, 257, 4096}) run_at(n, E, false);
  // cluster's launch-shape steps: 1-8 blocks of 256, 512, 1024 threads, then
  // 16 blocks (int32 ids: 1,024 slots per 256 threads), and its bounds.
  for (std::int64_t n : {1023, 1024, 1025, 7000, 8193, 16385, 32769, 49000, 65535, 65536, 65537})
    for (std::int32_t E : {1, 7, 32, 33, 128, 1024}) run_at(n, E, true);
  report("small and tile-edge shapes", st);
  CHECK(st.runs > 0);
}

// --invalid bucket / drop and --map-semantics vllm: every variant inside
// launch_ep (pre-pass, the variant on E + 1 groups or the global experts,
// post-pass) against the reference, bit for bit where the variant is stable.
TEST_CASE("expert-parallel modes") {
  if (skipped_in_subset("expert-parallel modes")) return;
  Stats st;
  std::uint64_t seed = 9000;
  struct Mode {
    Invalid mode;
    MapSemantics sem;
    bool map, invalid, all_invalid;
  };
  const Mode modes[] = {
      {Invalid::bucket, MapSemantics::local, false, true, false},  // -1 and out-of-range ids -> the bucket
      {Invalid::bucket, MapSemantics::local, true, true, false},   // + non-local experts via the map
      {Invalid::bucket, MapSemantics::local, false, false, true},  // every slot in the bucket
      {Invalid::drop, MapSemantics::local, true, true, false},
      {Invalid::drop, MapSemantics::local, false, false, true},    // no rows at all
      {Invalid::reject, MapSemantics::vllm, true, false, false},   // global experts, expert_ids mapped
      {Invalid::drop, MapSemantics::vllm, true, true, false},
      {Invalid::bucket, MapSemantics::vllm, true, true, false},    // both passes
  };
  std::size_t k = 0;
  for (std::int64_t n : {0, 1, 7, 32, 33, 1000, 8197, 40000, 131072 * 3 + 1})
    for (std::int32_t E : {1, 8, 63, 64, 257, 4096})
      for (const Mode& m : modes) {
        Case c;
        c.numel = n;
        c.E = E;
        c.B = kBlocksSmall[k % kBlocksSmall.size()];
        c.dist = static_cast<Dist>(k % 3);
        c.i64 = k % 2 == 1;
        c.pad = k % 3 == 1;
        c.loose = k % 4 == 2;
        c.misalign = k % 5 == 3;
        ++k;
        c.mode = m.mode;
        c.sem = m.sem;
        c.map = m.map;
        c.invalid = m.invalid;
        c.all_invalid = m.all_invalid;
        c.seed = seed++;
        run_case(c, st);
      }
  report("expert-parallel modes", st);
  CHECK(st.runs > 0);
}

TEST_CASE("full grid") {
  if (skipped_in_subset("full grid")) return;
  Stats st;
  std::uint64_t seed = 1000;
  // Every numel x every E, with the other knobs rotated.
  for (std::size_t i = 0; i < kNumels.size(); ++i)
    for (std::size_t j = 0; j < kExperts.size(); ++j) {
      Case c;
      c.numel = kNumels[i];
      c.E = kExperts[j];
      c.B = kBlocks[(i + j) % kBlocks.size()];
      c.dist = static_cast<Dist>((i + 2 * j) % 3);
      c.i64 = (i * 13 + j) % 2 == 1;
      c.map = (i + 7 * j) % 4 == 0;
      c.invalid = (3 * i + j) % 5 == 0;
      c.pad = (i + j) % 3 == 1;
      c.misalign = (i + 2 * j) % 7 == 0;
      c.loose = (i + j) % 2 == 0;
      c.seed = seed++;
      run_case(c, st);
    }
  // Block-size edges and every knob combination on a mid-size input.
  for (std::int32_t B : {1, 1024})
    for (std::int64_t n : {1, 1023, 8192, 131072})
      for (std::int32_t E : {1, 65, 257, 16384}) {
        Case c;
        c.numel = n;
        c.E = E;
        c.B = B;
        c.dist = static_cast<Dist>(seed % 3);
        c.i64 = seed % 2 == 0;
        c.seed = seed++;
        run_case(c, st);
      }
  for (int d = 0; d < 3; ++d)
    for (int mask = 0; mask < 16; ++mask) {
      Case c;
      c.numel = 8192 + 5;
      c.E = 256;
      c.B = 64;
      c.dist = static_cast<Dist>(d);
      c.i64 = mask & 1;
      c.map = mask & 2;
      c.invalid = mask & 4;
      c.misalign = mask & 8;
      c.pad = d == 1;
      c.seed = seed++;
      run_case(c, st);
    }
  // Seeded sample of the rest of the space.
  std::mt19937_64 rng(20240521);
  for (int k = 0; k < 160; ++k) {
    Case c;
    const bool from_list = rng() % 2 == 0;
    c.numel = from_list ? kNumels[rng() % kNumels.size()]
                        : static_cast<std::int64_t>(std::exp(std::uniform_real_distribution<double>(
                              0.0, std::log(300000.0))(rng)));
    c.E = rng() % 4 == 0 ? static_cast<std::int32_t>(1 + rng() % 2000)
                         : kExperts[rng() % kExperts.size()];
    c.B = rng() % 4 == 0 ? static_cast<std::int32_t>(1 + rng() % 1024)
                         : kBlocks[rng() % kBlocks.size()];
    c.dist = static_cast<Dist>(rng() % 3);
    c.i64 = rng() % 2;
    c.map = rng() % 3 == 0;
    c.invalid = rng() % 3 == 0;
    c.pad = rng() % 2;
    c.loose = rng() % 2;
    c.misalign = rng() % 5 == 0;
    c.seed = seed++;
    run_case(c, st);
  }
  report("full grid", st);
  CHECK(st.runs > 0);
}
