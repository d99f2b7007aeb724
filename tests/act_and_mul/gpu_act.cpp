// GPU test: every act-and-mul variant x activation x dtype against the CPU
// reference, on tokens {0,1,3,64,1000,70000} x d {1,3,7,8,64,127,1024,4095,
// 4096,11008,14336}. Inputs are random normal, plus rows mixing +-inf, NaN,
// large magnitudes (the far-tail paths), denormals and zeros. Outputs are
// poisoned with 0xFF bytes (a NaN pattern the kernels never produce) before
// every launch, sit between guard zones that must stay poisoned, and every
// output element is scanned for the poison. Every (variant, activation,
// dtype, shape) run is one assertion whose failure names them and the seed.
//
// Shapes up to kFullLimit outputs run for all 3 x 3 dtype x activation pairs
// and are checked in full. Larger shapes (70000 x d >= 127, 1000 x d >= 11008)
// run once per variant with a rotating dtype/activation, and the reference
// checks the special rows plus random sampled rows (the poison scan still
// covers every element). Every d and token count is hit by every variant.
//
// MOEKIT_GPU_SUBSET=sanitizer runs a small subset (for compute-sanitizer).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "act_and_mul/act_and_mul.hpp"
#include "act_and_mul/buffers.hpp"
#include "cuda_util.hpp"
#include "gpu_case.hpp"
#include "half.hpp"
#include "act_and_mul/reference.hpp"

using namespace moekit;
using act::Activation;
using act::DType;
using act::Problem;

namespace {

constexpr std::int64_t kTokens[] = {0, 1, 3, 64, 1000, 70000};
constexpr std::int64_t kDs[] = {1, 3, 7, 8, 64, 127, 1024, 4095, 4096, 11008, 14336};
constexpr DType kDtypes[] = {DType::f16, DType::bf16, DType::f32};
constexpr Activation kActs[] = {Activation::silu, Activation::gelu, Activation::gelu_tanh};
constexpr std::int64_t kFullLimit = std::int64_t{1} << 22;  // outputs checked in full
constexpr int kSampledRows = 48;

const char* name(DType t) { return t == DType::f16 ? "f16" : t == DType::bf16 ? "bf16" : "f32"; }
const char* name(Activation a) {
  return a == Activation::silu ? "silu" : a == Activation::gelu ? "gelu" : "gelu-tanh";
}
std::size_t esize(DType t) { return t == DType::f32 ? 4 : 2; }

bool subset_mode() { return test::sanitizer_subset(); }

// Runs f(begin, end) over [0, n) on all cores.
template <class F>
void parallel_for(std::int64_t n, F f) {
  const std::int64_t hw = std::max(1u, std::thread::hardware_concurrency());
  const std::int64_t workers = std::min<std::int64_t>(hw, std::max<std::int64_t>(1, n / 64));
  if (workers <= 1) {
    f(std::int64_t{0}, n);
    return;
  }
  std::vector<std::thread> ts;
  for (std::int64_t w = 0; w < workers; ++w) {
    ts.emplace_back([&, w] { f(n * w / workers, n * (w + 1) / workers); });
  }
  for (auto& t : ts) t.join();
}

std::uint32_t to_bits(DType t, float v) {
  switch (t) {
    case DType::f16: return f32_to_f16_bits(v);
    case DType::bf16: return f32_to_bf16_bits(v);
    case DType::f32: return std::bit_cast<std::uint32_t>(v);
  }
  return 0;
}

void put(DType t, void* base, std::int64_t i, std::uint32_t bits) {
  if (t == DType::f32) {
    static_cast<std::uint32_t*>(base)[i] = bits;
  } else {
    static_cast<std::uint16_t*>(base)[i] = static_cast<std::uint16_t>(bits);
  }
}

// Values that exercise the edges: non-finite, the largest finite, the far
// negative tails (silu below -80, gelu below -4, gelu-tanh below -4.5, where
// act(x) underflows f32 while act(x) * huge y does not), subnormals, zeros.
std::vector<std::uint32_t> special_values(DType t) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v{0.0f,  -0.0f,  inf,    -inf,   1.0f,   -1.0f,  -3.99f, -4.0f,  -4.2f,   -4.5f,
                       -4.6f, -7.5f,  -9.7f,  -12.5f, -13.0f, -19.0f, -20.0f, -30.0f, -79.5f,  -80.0f,
                       -85.0f, -90.0f, -100.0f, -150.0f, -186.0f, -200.0f, -700.0f, 90.0f, 150.0f, 12.5f,
                       1000.0f, -1000.0f, 30000.0f, -60000.0f};
  std::vector<std::uint32_t> bits;
  for (float f : v) bits.push_back(to_bits(t, f));
  switch (t) {
    case DType::f16:
      for (std::uint32_t b : {0x7e00u, 0xfe00u, 0x7bffu, 0xfbffu, 0x0001u, 0x8001u, 0x0003u, 0x03ffu,
                              0x83ffu, 0x0400u, 0x7a00u})
        bits.push_back(b);
      break;
    case DType::bf16:
      for (std::uint32_t b : {0x7fc0u, 0xffc0u, 0x7f7fu, 0xff7fu, 0x0001u, 0x8001u, 0x007fu, 0x0080u,
                              0x0100u, 0x7e80u, 0xfe80u, 0x7100u, 0xf100u})
        bits.push_back(b);
      break;
    case DType::f32:
      for (std::uint32_t b : {0x7fc00000u, 0xffc00000u, 0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x80000001u,
                              0x007fffffu, 0x00800000u, 0x01000000u, 0x7e800000u, 0xfe800000u, 0x71000000u,
                              0xf1000000u, 0x0d000000u})
        bits.push_back(b);
      break;
  }
  return bits;
}

// Host input of one shape and dtype: rows are windows into a pool of normal
// values (cheap for 2e9 elements, still distinct rows); special rows mix in
// edge values.
struct HostInput {
  Problem p;
  std::vector<unsigned char> data;
  std::vector<std::int64_t> special_rows;
  std::uint64_t seed = 0;
};

const std::vector<unsigned char>& pool_bits(DType t, std::int64_t& pool_n) {
  static std::vector<unsigned char> pool_f16, pool_bf16, pool_f32;
  constexpr std::int64_t kPool = std::int64_t{1} << 21;
  pool_n = kPool;
  auto& pool = t == DType::f16 ? pool_f16 : t == DType::bf16 ? pool_bf16 : pool_f32;
  if (pool.empty()) {
    pool.resize(kPool * esize(t));
    std::mt19937_64 rng(42 + static_cast<int>(t));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (std::int64_t i = 0; i < kPool; ++i) put(t, pool.data(), i, to_bits(t, nd(rng)));
  }
  return pool;
}

HostInput make_input(std::int64_t tokens, std::int64_t d, DType t, std::uint64_t seed) {
  HostInput h;
  h.p = Problem{tokens, d, t, Activation::silu};
  h.seed = seed;
  const std::size_t es = esize(t);
  h.data.resize(static_cast<std::size_t>(tokens * 2 * d) * es);
  std::int64_t pool_n = 0;
  const auto& pool = pool_bits(t, pool_n);
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> offs(tokens);
  for (auto& o : offs) o = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(pool_n - 2 * d));
  parallel_for(tokens, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t r = a; r < b; ++r) {
      std::memcpy(h.data.data() + static_cast<std::size_t>(r * 2 * d) * es, pool.data() + offs[r] * es,
                  static_cast<std::size_t>(2 * d) * es);
    }
  });
  if (tokens > 0) {
    h.special_rows = {0, tokens / 2, tokens - 1};
    std::sort(h.special_rows.begin(), h.special_rows.end());
    h.special_rows.erase(std::unique(h.special_rows.begin(), h.special_rows.end()), h.special_rows.end());
    const auto sp = special_values(t);
    for (std::int64_t r : h.special_rows) {
      for (std::int64_t c = 0; c < 2 * d; ++c) {
        if (rng() % 3 != 0) put(t, h.data.data(), r * 2 * d + c, sp[rng() % sp.size()]);
      }
    }
  }
  return h;
}

// Rows the reference checks: all of them for small shapes, else the special
// rows, the first and last two, and random ones.
std::vector<std::int64_t> rows_to_check(const HostInput& h, bool full, std::uint64_t seed) {
  std::vector<std::int64_t> rows;
  if (full) {
    rows.resize(h.p.tokens);
    for (std::int64_t r = 0; r < h.p.tokens; ++r) rows[r] = r;
    return rows;
  }
  rows = h.special_rows;
  for (std::int64_t r : {std::int64_t{0}, std::int64_t{1}, h.p.tokens - 2, h.p.tokens - 1}) {
    if (r >= 0 && r < h.p.tokens) rows.push_back(r);
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < kSampledRows; ++i) rows.push_back(static_cast<std::int64_t>(rng() % h.p.tokens));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// Gathers whole rows (row width w elements) into a contiguous buffer.
std::vector<unsigned char> gather(const unsigned char* src, const std::vector<std::int64_t>& rows, std::int64_t w,
                                  std::size_t es) {
  std::vector<unsigned char> g(rows.size() * static_cast<std::size_t>(w) * es);
  parallel_for(static_cast<std::int64_t>(rows.size()), [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t i = a; i < b; ++i)
      std::memcpy(g.data() + static_cast<std::size_t>(i * w) * es, src + static_cast<std::size_t>(rows[i] * w) * es,
                  static_cast<std::size_t>(w) * es);
  });
  return g;
}

// Reference of the checked rows (contiguous, rows.size() tokens).
std::vector<unsigned char> reference_rows(const Problem& p, const unsigned char* in_rows, std::int64_t nrows) {
  const std::size_t es = esize(p.dtype);
  std::vector<unsigned char> ref(static_cast<std::size_t>(nrows * p.d) * es);
  parallel_for(nrows, [&](std::int64_t a, std::int64_t b) {
    Problem q = p;
    q.tokens = b - a;
    act::reference(q, in_rows + static_cast<std::size_t>(a * 2 * p.d) * es,
                   ref.data() + static_cast<std::size_t>(a * p.d) * es);
  });
  return ref;
}

struct Outcome {
  bool ok = true;
  std::string message;
  double max_error = 0;
};

// Compares checked rows and scans every output element for the poison.
Outcome verify(const Problem& p, const std::vector<std::int64_t>& rows, const unsigned char* ref_rows,
               const unsigned char* out) {
  const std::size_t es = esize(p.dtype);
  Outcome o;
  std::mutex mu;
  const std::int64_t n = p.tokens * p.d;
  std::atomic<std::int64_t> first_poison{n};
  parallel_for(n, [&](std::int64_t a, std::int64_t b) {
    for (std::int64_t i = a; i < b; ++i) {
      const bool poison = es == 4 ? reinterpret_cast<const std::uint32_t*>(out)[i] == 0xffffffffu
                                  : reinterpret_cast<const std::uint16_t*>(out)[i] == 0xffffu;
      if (poison) {
        std::int64_t cur = first_poison.load();
        while (i < cur && !first_poison.compare_exchange_weak(cur, i)) {
        }
        break;
      }
    }
  });
  if (first_poison.load() < n) {
    o.ok = false;
    o.message = "unwritten output (poison) at token " + std::to_string(first_poison.load() / p.d) + ", column " +
                std::to_string(first_poison.load() % p.d);
  }
  std::int64_t first_bad_row = std::numeric_limits<std::int64_t>::max();
  parallel_for(static_cast<std::int64_t>(rows.size()), [&](std::int64_t a, std::int64_t b) {
    Problem q = p;
    q.tokens = 1;
    for (std::int64_t i = a; i < b; ++i) {
      const std::int64_t r = rows[i];
      const CheckResult c = act::check(q, ref_rows + static_cast<std::size_t>(i * p.d) * es,
                                       out + static_cast<std::size_t>(r * p.d) * es);
      std::lock_guard<std::mutex> lock(mu);
      o.max_error = std::max(o.max_error, c.max_error);
      if (!c.ok && r < first_bad_row) {
        first_bad_row = r;
        o.ok = false;
        o.message = "row " + std::to_string(r) + " (" + c.first_difference + ")";
      }
    }
  });
  return o;
}

struct Totals {
  int cases = 0, failed = 0;
  double max_ulp = 0, max_rel = 0;
};

// Launches variant v on d (h's data uploaded `in_offset` elements off, the
// output `out_offset` elements off, between guard zones) with a workspace of
// its own, and verifies the result: one assertion. With `pdl` (where the
// device has it) v launches with programmatic dependent launch, twice back to
// back, the second launch overlapping the first one's tail.
void run_case(const act::Variant& v, const HostInput& h, Activation a, act::DeviceBuffers& d, std::int64_t in_offset,
              std::int64_t out_offset, const std::vector<std::int64_t>& rows, const unsigned char* ref_rows,
              Totals& tot, bool pdl = false) {
  Problem p = h.p;
  p.act = a;
  pdl = pdl && device_caps().pdl;
  d.poison();
  const DeviceCaps& caps = device_caps();
  const WorkspaceNeed need = WorkspaceNeed::of(v, p, caps);
  const bool zeroed = need.zeroed;
  d.replace_workspace(need);  // 0xCD garbage, or zeroed
  const act::Buffers b = d.buffers(0);
  std::string why = test::launch_and_sync([&] { return v.launch(p, b, nullptr, pdl); }, pdl ? 2 : 1);
  if (why.empty()) {
    std::vector<unsigned char> got(act::out_bytes(p));
    const std::string guard = d.download(got.data());
    const Outcome o = verify(p, rows, ref_rows, got.data());
    if (p.dtype == DType::f32) {
      tot.max_rel = std::max(tot.max_rel, o.max_error);
    } else {
      tot.max_ulp = std::max(tot.max_ulp, o.max_error);
    }
    if (!guard.empty()) {
      why = guard;
    } else if (zeroed && !d.workspace_zero()) {
      why = "left its workspace non-zero";
    } else if (!o.ok) {
      why = o.message;
    }
  }
  ++tot.cases;
  if (!why.empty()) ++tot.failed;
  test::expect_ok(std::string(v.info.name) + " " + name(a) + " " + name(p.dtype) + " tokens=" +
                      std::to_string(p.tokens) + " d=" + std::to_string(p.d) + " in+" + std::to_string(in_offset) +
                      " out+" + std::to_string(out_offset) + " seed=" + std::to_string(h.seed) +
                      (pdl ? " pdl (twice back to back)" : ""),
                  why);
}

}  // namespace

TEST_SUITE("gpu") {

TEST_CASE("registry: names, lookup, auto") {
  const auto vs = act::registry().variants();
  REQUIRE(vs.size() >= 4);
  for (const auto& v : vs) {
    CHECK(act::registry().find(v.info.name) == &v);
    CHECK(!v.info.description.empty());
  }
  CHECK(act::registry().find("no-such-variant") == nullptr);
  CHECK(act::registry().find("scalar") != nullptr);
  CHECK(act::registry().find("vectorized") != nullptr);
  CHECK(!act::registry().auto_rule().empty());
  for (std::int64_t t : kTokens)
    for (std::int64_t d : kDs)
      for (DType dt : kDtypes) {
        Problem p{t, d, dt, Activation::silu};
        const act::Variant& v = act::registry().pick_auto(p, false);
        CHECK(act::registry().find(v.info.name) == &v);
        CHECK(v.not_applicable(p, device_caps()) == nullptr);
      }
}

TEST_CASE("every variant x activation x dtype vs the CPU reference") {
  const auto vs = act::registry().variants();
  const bool subset = subset_mode();
  Totals tot;
  int big_k = 0;
  std::uint64_t seed = 1;
  for (std::int64_t tokens : kTokens) {
    for (std::int64_t d : kDs) {
      const std::int64_t n = tokens * d;
      if (subset) {
        const bool t_ok = tokens != 1000;
        const bool d_ok = d != 1024 && d != 11008 && d != 14336;
        if (!t_ok || !d_ok || n > 600000) continue;
      }
      const bool full = n <= kFullLimit;
      std::vector<DType> dts(std::begin(kDtypes), std::end(kDtypes));
      if (!full) dts = {kDtypes[big_k % 3]};
      for (DType dt : dts) {
        ++seed;
        const std::size_t es = esize(dt);
        const HostInput h = make_input(tokens, d, dt, seed);
        act::DeviceBuffers dev(h.p, std::as_bytes(std::span(h.data)), {}, SetOptions::checked());
        const auto rows = rows_to_check(h, full, seed * 7);
        std::vector<unsigned char> gathered;
        const unsigned char* in_rows = h.data.data();
        if (!full) {
          gathered = gather(h.data.data(), rows, 2 * d, es);
          in_rows = gathered.data();
        }
        for (int ai = 0; ai < 3; ++ai) {
          const Activation a = kActs[ai];
          // Which variants run this activation here.
          std::vector<std::size_t> run;
          for (std::size_t vi = 0; vi < vs.size(); ++vi) {
            if (full && !subset) {
              run.push_back(vi);
            } else if (full && subset) {
              if (ai == static_cast<int>((tokens + d + static_cast<std::int64_t>(vi)) % 3)) run.push_back(vi);
            } else if (ai == static_cast<int>((big_k + static_cast<int>(vi)) % 3)) {
              run.push_back(vi);
            }
          }
          if (run.empty()) continue;
          Problem p = h.p;
          p.act = a;
          const auto ref = reference_rows(p, in_rows, static_cast<std::int64_t>(rows.size()));
          // Every other case with PDL, so each variant runs in both modes.
          for (std::size_t vi : run)
            run_case(vs[vi], h, a, dev, 0, 0, rows, ref.data(), tot, (seed + vi + ai) % 2 == 1);
        }
      }
      if (!full) ++big_k;
    }
  }
  std::printf("gpu_act: %d cases (%s), %d passed, %d failed; max error %.3g ULP (f16/bf16), %.3g relative (f32)\n",
              tot.cases, subset ? "subset" : "full", tot.cases - tot.failed, tot.failed, tot.max_ulp, tot.max_rel);
  CHECK(tot.cases > 0);
}

TEST_CASE("unaligned base pointers and rows") {
  // Input and output bases one element past a 16-byte boundary: the vector
  // paths must notice and fall back, for aligned and unaligned d alike.
  const auto vs = act::registry().variants();
  Totals tot;
  for (DType dt : {DType::bf16, DType::f32, DType::f16}) {
    for (std::int64_t d : {std::int64_t{64}, std::int64_t{8}, std::int64_t{7}, std::int64_t{4096}}) {
      const std::size_t es = esize(dt);
      const HostInput h = make_input(5, d, dt, 99 + static_cast<std::uint64_t>(d));
      SetOptions o = SetOptions::checked(es);
      o.output_misalign = es;
      act::DeviceBuffers dev(h.p, std::as_bytes(std::span(h.data)), {}, o);
      const auto rows = rows_to_check(h, true, 1);
      for (Activation a : kActs) {
        Problem p = h.p;
        p.act = a;
        const auto ref = reference_rows(p, h.data.data(), 5);
        for (const auto& v : vs)
          for (bool pdl : {false, true}) run_case(v, h, a, dev, 1, 1, rows, ref.data(), tot, pdl);
      }
    }
  }
  std::printf("gpu_act unaligned: %d cases, %d failed\n", tot.cases, tot.failed);
  CHECK(tot.cases > 0);
}

}  // TEST_SUITE
