// GPU test: every experts variant against the CPU reference (src/experts/
// reference.hpp: out within the derived bound, and each kept slot's y), with
// PDL off and on (on: launched twice back to back, the second overlapping the
// first's tail), on the compact layout and the padded one at B 16 and 64.
// Buffers are the family's (src/experts/buffers.hpp) with SetOptions::checked:
// outputs poisoned between guard zones, hidden 16 bytes off its allocation in
// every other case, a garbage workspace. Each launch is also run stage by
// stage (per-stage timing relies on it) on the small cases.
//
// Cases (kCases): T 0 and 1, K 1, odd sizes, empty experts, one hot expert,
// H and I off every tile (H 200 I 72, H 4104), more than 256 active experts
// (decode lists them in windows of 256), dropped slots (-1 ids and an
// expert map that makes half the experts non-local), the interleaved W1, every
// activation, f16 and bf16, generated weights (the device generator; the
// reference recomputes them) and given ones (random host arrays), recorded
// routing (a Llama-4-Maverick decode batch with ended requests as -1 and
// DeepSeek-V2-Lite prefill ids, from ../shared/traces or the repository's
// data/ slices; skipped when neither is found), DeepSeek-V3's TP8 expert shard
// at T 4 and 64, Mixtral at T 16 and a prefill-like T 512. Big shapes check a
// seeded sample of tokens (experts::sample_tokens). Inputs are random and
// never zero.
//
// A second runs every variant with hidden 2 bytes off (not 16-byte aligned:
// gather's naive fallback, permute's narrow words).
//
// A third shows the checker rejects wrong GPU answers: one element of a
// variant's downloaded out (and of y) moved off, and a launch whose routing
// weights of two slots were swapped on the device.
//
// MOEKIT_GPU_SUBSET=sanitizer runs the cases marked small only.
// MOEKIT_TRACES=DIR: where the recorded traces are (default: ../shared/traces
// beside the source tree).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/device.hpp"
#include "cuda_util.hpp"
#include "experts/buffers.hpp"
#include "experts/experts.hpp"
#include "experts/reference.hpp"
#include "gpu_case.hpp"
#include "half.hpp"
#include "npy.hpp"

using namespace moekit;
using experts::Act;
using experts::DType;
using experts::W1Layout;
using permute::Layout;
namespace fs = std::filesystem;

namespace {

enum class Routing {
  uniform,  // K distinct experts per token, uniform
  hot1,     // every slot to one expert (K = 1)
  hot,      // slot 0 of every token to one expert, the others distinct and uniform
  dropped,  // uniform over an expert map of 2E global experts (odd ones not local), 1 in 8 ids -1
  none,     // every slot dropped: the same map, ids only odd global experts (not local) or -1
  trace,    // a recorded trace's ids (Case::trace)
};

struct Case {
  const char* name;
  std::int64_t T;
  std::int32_t K, E;
  std::int64_t H, I;
  DType dt = DType::bf16;
  Act act = Act::silu;
  W1Layout w1 = W1Layout::gate_up;
  Routing routing = Routing::uniform;
  bool given = false;        // given weights (host arrays) instead of generated
  bool small = true;         // in the sanitizer subset
  double budget_macs = 4e9;  // the reference's tokens: all that fit (sample_tokens)
  const char* trace = nullptr;  // Routing::trace: a key of load_trace
  float scaling = 1.0f;
};

// clang-format off
const Case kCases[] = {
    {"T 0", 0, 2, 8, 64, 32},
    {"T 1", 1, 4, 16, 256, 128, DType::f16, Act::silu, W1Layout::gate_up, Routing::uniform, true},
    {"K 1", 33, 1, 8, 128, 96, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform, false},
    {"odd sizes", 3, 2, 5, 7, 5, DType::f16, Act::silu, W1Layout::gate_up, Routing::uniform, true},
    {"odd sizes 2", 19, 3, 7, 33, 17, DType::bf16, Act::gelu, W1Layout::gate_up, Routing::uniform, false},
    {"empty experts (E 64, 5 tokens)", 5, 2, 64, 512, 256, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform, true},
    {"one hot expert (K 1)", 300, 1, 16, 256, 192, DType::f16, Act::silu, W1Layout::gate_up, Routing::hot1, false},
    {"one hot expert (K 4)", 130, 4, 32, 384, 128, DType::bf16, Act::silu, W1Layout::gate_up, Routing::hot, true},
    {"H 200 I 72", 50, 3, 12, 200, 72, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform, true},
    {"H 4104", 20, 2, 8, 4104, 136, DType::f16, Act::silu, W1Layout::gate_up, Routing::uniform, false},
    {"E 512, more than 256 active experts", 160, 4, 512, 64, 40, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform, false},
    {"dropped slots and expert map", 77, 4, 16, 256, 128, DType::bf16, Act::silu, W1Layout::gate_up, Routing::dropped, true},
    {"dropped slots, f16", 40, 2, 8, 320, 64, DType::f16, Act::gelu_tanh, W1Layout::gate_up, Routing::dropped, false},
    // fused's empty list (no kept slot: out is zero) and its full one (a slot for each of its 256 threads)
    {"every slot dropped", 6, 4, 16, 256, 128, DType::bf16, Act::silu, W1Layout::gate_up, Routing::none, true},
    {"256 slots (T 32, K 8)", 32, 8, 64, 256, 128, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform, true},
    {"interleaved w1", 40, 2, 8, 512, 256, DType::bf16, Act::silu, W1Layout::interleaved, Routing::uniform, true},
    {"gelu", 24, 2, 8, 256, 128, DType::f16, Act::gelu, W1Layout::gate_up, Routing::uniform, false},
    {"gelu-tanh", 24, 2, 8, 256, 128, DType::bf16, Act::gelu_tanh, W1Layout::gate_up, Routing::uniform, true},
    {"swiglu-oai", 24, 4, 16, 256, 128, DType::bf16, Act::swiglu_oai, W1Layout::interleaved, Routing::uniform, false},
    {"swiglu-oai f16", 9, 2, 8, 192, 64, DType::f16, Act::swiglu_oai, W1Layout::interleaved, Routing::uniform, true},
    {"scaling 2.5", 17, 3, 8, 128, 64, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform, true, true, 4e9, nullptr, 2.5f},
    {"trace: Llama-4-Maverick decode batch (E 128, K 1, ended requests -1)", 0, 1, 128, 1024, 512, DType::bf16,
     Act::silu, W1Layout::gate_up, Routing::trace, false, false, 4e9, "llama4-decode"},
    {"trace: DeepSeek-V2-Lite prefill (E 64, K 6)", 0, 6, 64, 2048, 1408, DType::bf16, Act::silu,
     W1Layout::gate_up, Routing::trace, false, false, 1e9, "v2-lite-prefill"},
    {"DeepSeek-V3 TP8 shard, T 4", 4, 8, 256, 7168, 256, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform,
     false, false, 1e9},
    {"DeepSeek-V3 TP8 shard, T 64", 64, 8, 256, 7168, 256, DType::bf16, Act::silu, W1Layout::gate_up,
     Routing::uniform, false, false, 6e8},
    {"Mixtral, T 16", 16, 2, 8, 4096, 14336, DType::bf16, Act::silu, W1Layout::gate_up, Routing::uniform, false,
     false, 8e8},
    {"prefill-like (T 512, E 16, K 4, H 1024, I 512)", 512, 4, 16, 1024, 512, DType::f16, Act::silu,
     W1Layout::gate_up, Routing::uniform, false, false, 6e8},
};
// clang-format on

// ---- recorded traces --------------------------------------------------------

// The source tree (the folder with families.txt and kernels/experts/): this
// file's path as the compiler saw it (relative to the build folder, where
// `meson test` runs), or the current folder (`make gpu-verify` runs from the
// root), or its parents.
std::optional<fs::path> source_root() {
  std::vector<fs::path> c;
  std::error_code ec;
  const fs::path here = fs::current_path(ec);
  const fs::path file(__FILE__);
  c.push_back((file.is_absolute() ? file : here / file).parent_path().parent_path().parent_path());
  c.push_back(here);
  c.push_back(here.parent_path());
  c.push_back(here.parent_path().parent_path());
  for (const fs::path& p : c)
    if (fs::exists(p / "families.txt", ec) && fs::exists(p / "kernels" / "experts", ec)) return fs::canonical(p, ec);
  return std::nullopt;
}

// The first of `names` (under the traces folder, then the repository's data/) that exists.
std::optional<fs::path> find_trace(std::initializer_list<const char*> shared, std::initializer_list<const char*> data) {
  std::error_code ec;
  std::vector<fs::path> dirs;
  if (const char* e = std::getenv("MOEKIT_TRACES"); e != nullptr && *e != '\0') dirs.emplace_back(e);
  const std::optional<fs::path> root = source_root();
  if (root) dirs.push_back(root->parent_path() / "shared" / "traces");
  for (const fs::path& d : dirs)
    for (const char* n : shared)
      if (fs::exists(d / n, ec)) return d / n;
  if (root)
    for (const char* n : data)
      if (fs::exists(*root / "data" / n, ec)) return *root / "data" / n;
  return std::nullopt;
}

std::vector<std::int32_t> as_i32(const npy::Array& a) {
  std::vector<std::int32_t> v;
  if (a.dtype == npy::DType::i4) v.assign(a.as<std::int32_t>().begin(), a.as<std::int32_t>().end());
  else if (a.dtype == npy::DType::i8)
    for (std::int64_t x : a.as<std::int64_t>()) v.push_back(static_cast<std::int32_t>(x));
  return v;
}

// ids [T, K] of trace `key`, or a line saying why none (file absent or not the expected shape).
struct Trace {
  std::vector<std::int32_t> ids;
  std::int64_t T = 0;
  std::string from, why_not;
};
Trace load_trace(const std::string& key, std::int32_t K) {
  Trace t;
  try {
    if (key == "llama4-decode") {
      // layer23_decode.npy [steps, requests]: row s = every request's s-th
      // decoded token, -1 once it ended. The last row with at least 16
      // running requests: most of its slots dropped (the data/ slice is
      // step 0: none).
      const auto path = find_trace({"llama4-maverick/layer23_decode.npy"}, {"llama4_maverick_l23_decode_step0.npy"});
      if (!path) return {{}, 0, {}, "no Llama-4-Maverick decode trace found (MOEKIT_TRACES, ../shared/traces, data/)"};
      const npy::Array a = npy::read(path->string());
      const std::vector<std::int32_t> v = as_i32(a);
      if (v.empty() || a.shape.size() != 2) return {{}, 0, {}, path->string() + ": not an int [steps, requests] array"};
      const std::int64_t steps = a.shape[0], req = a.shape[1];
      std::int64_t pick = 0;
      for (std::int64_t s = 0; s < steps; ++s) {
        const auto row = std::span(v).subspan(std::size_t(s * req), std::size_t(req));
        const auto ended = std::count(row.begin(), row.end(), -1);
        if (req - ended >= 16) pick = s;
      }
      t.ids.assign(v.begin() + pick * req, v.begin() + (pick + 1) * req);
      t.T = req;
      t.from = path->string() + " row " + std::to_string(pick);
    } else if (key == "v2-lite-prefill") {
      const auto path = find_trace({"deepseek-v2-lite/layer13.npy"}, {"deepseek_v2_lite_l13_prefill1024.npy"});
      if (!path) return {{}, 0, {}, "no DeepSeek-V2-Lite trace found (MOEKIT_TRACES, ../shared/traces, data/)"};
      const npy::Array a = npy::read(path->string());
      const std::vector<std::int32_t> v = as_i32(a);
      if (v.empty() || a.shape.size() != 2 || a.shape[1] != K)
        return {{}, 0, {}, path->string() + ": not an int [tokens, " + std::to_string(K) + "] array"};
      t.T = std::min<std::int64_t>(a.shape[0], 256);  // the first 256 prefill tokens
      t.ids.assign(v.begin(), v.begin() + t.T * K);
      t.from = path->string() + " rows 0.." + std::to_string(t.T - 1);
    } else {
      t.why_not = "unknown trace " + key;
    }
  } catch (const std::exception& e) {
    t.why_not = e.what();
  }
  return t;
}

// ---- host inputs ------------------------------------------------------------

std::uint16_t bits(DType dt, double v) { return dt == DType::bf16 ? f64_to_bf16_bits(v) : f64_to_f16_bits(v); }
double value(DType dt, std::uint16_t b) { return dt == DType::bf16 ? bf16_bits_to_f64(b) : f16_bits_to_f64(b); }

// Random, never zero: sign * scale * U[0.2, 1.2).
std::vector<std::uint16_t> random_nonzero(std::size_t n, DType dt, double scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.2, 1.2);
  std::vector<std::uint16_t> v(n);
  for (auto& x : v) x = bits(dt, (rng() & 1 ? -1.0 : 1.0) * scale * u(rng));
  return v;
}

struct Host {
  std::int64_t T = 0;
  std::int32_t E = 0, map_size = 0;  // map_size > 0: an expert map of that many global experts
  std::vector<std::uint16_t> hidden, w1, w2;  // w1, w2 empty: generated from seed
  std::vector<std::int32_t> ids, map;
  std::vector<float> weights;
  std::uint64_t seed = 0;
  std::string routing_note;
};

// K distinct ids out of [0, n) other than `except`.
void distinct(std::vector<std::int32_t>& out, std::int32_t K, std::int32_t n, std::int32_t except, std::mt19937_64& rng) {
  const std::size_t at = out.size();
  while (std::int32_t(out.size() - at) < K) {
    const auto e = static_cast<std::int32_t>(rng() % std::uint64_t(n));
    if (e != except && std::find(out.begin() + std::ptrdiff_t(at), out.end(), e) == out.end()) out.push_back(e);
  }
}

std::optional<Host> make_host(const Case& c, std::uint64_t seed, std::string& skip) {
  std::mt19937_64 rng(seed);
  Host h;
  h.seed = seed;
  h.T = c.T;
  h.E = c.E;
  const std::int32_t K = c.K;
  if (c.routing == Routing::trace) {
    Trace t = load_trace(c.trace, K);
    if (!t.why_not.empty()) {
      skip = t.why_not;
      return std::nullopt;
    }
    h.T = t.T;
    h.ids = std::move(t.ids);
    h.routing_note = t.from;
  } else {
    for (std::int64_t t = 0; t < c.T; ++t) {
      switch (c.routing) {
        case Routing::hot1: h.ids.push_back(c.E / 3); break;
        case Routing::hot:
          h.ids.push_back(c.E / 3);
          distinct(h.ids, K - 1, c.E, c.E / 3, rng);
          break;
        case Routing::none:
          h.map_size = 2 * c.E;
          for (std::int32_t j = 0; j < K; ++j)
            h.ids.push_back(j % 3 == 2 ? -1 : 2 * static_cast<std::int32_t>(rng() % std::uint64_t(c.E)) + 1);
          break;
        case Routing::dropped: {
          h.map_size = 2 * c.E;
          const std::size_t at = h.ids.size();
          distinct(h.ids, K, h.map_size, -1, rng);
          for (std::size_t i = at; i < h.ids.size(); ++i)
            if (rng() % 8 == 0) h.ids[i] = -1;
          break;
        }
        default: distinct(h.ids, K, c.E, -1, rng);
      }
    }
  }
  if (h.map_size > 0) {  // global g -> local g / 2 for even g; odd experts live elsewhere
    h.map.resize(std::size_t(h.map_size));
    for (std::int32_t g = 0; g < h.map_size; ++g) h.map[std::size_t(g)] = g % 2 == 0 ? g / 2 : -1;
  }
  std::uniform_real_distribution<float> w(0.05f, 1.0f);
  h.weights.resize(h.ids.size());
  for (float& x : h.weights) x = w(rng);
  h.hidden = random_nonzero(std::size_t(h.T * c.H), c.dt, 1.0, rng);
  if (c.given) {  // variance ~1/n per element, as the generator's, so h and y stay O(1)
    h.w1 = random_nonzero(std::size_t(c.E) * std::size_t(2 * c.I * c.H), c.dt, std::sqrt(1.5 / double(c.H)), rng);
    h.w2 = random_nonzero(std::size_t(c.E) * std::size_t(c.H * c.I), c.dt, std::sqrt(1.5 / double(c.I)), rng);
  }
  return h;
}

experts::Inputs ref_inputs(const Host& h) {
  experts::Inputs in;
  in.hidden = h.hidden;
  in.ids = h.ids;
  in.weights = h.weights;
  in.expert_map = h.map;
  in.w = experts::WeightSource::of(h.w1, h.w2, h.seed);
  return in;
}

experts::HostInputs dev_inputs(const Host& h) {
  experts::HostInputs in;
  in.hidden = std::as_bytes(std::span(h.hidden));
  in.ids = h.ids;
  in.weights = h.weights;
  in.expert_map = h.map;
  in.w1 = std::as_bytes(std::span(h.w1));
  in.w2 = std::as_bytes(std::span(h.w2));
  in.seed = h.seed;
  return in;
}

// ---- one run ----------------------------------------------------------------

struct Layouts {
  Layout layout;
  std::int32_t B;
  const char* name;
};
constexpr Layouts kLayouts[] = {{Layout::compact, 64, "compact"}, {Layout::padded, 16, "padded B 16"},
                                {Layout::padded, 64, "padded B 64"}};

// out and y of the launch `run` (returns a status), checked; "" or what is wrong.
template <class Run>
std::string run_and_check(const experts::Problem& p, experts::DeviceBuffers& d, const experts::Outputs& ref,
                          const Run& run, int times) {
  d.poison();
  if (std::string e = test::launch_and_sync(run, times); !e.empty()) return e;
  std::vector<std::uint16_t> out, y;
  std::vector<std::int32_t> inverse;
  if (std::string e = d.download(out, &y, &inverse); !e.empty()) return e;
  if (const CheckResult c = experts::check(p, ref, out); !c.ok) return "out: " + c.first_difference;
  if (const CheckResult c = experts::check_y(p, ref, y, inverse); !c.ok) return "y: " + c.first_difference;
  return {};
}

// The variant's launch (PDL: twice back to back), then its stages one by one
// (`stages`); "" or what is wrong.
std::string run_variant(const experts::Variant& v, const experts::Problem& p, experts::DeviceBuffers& d,
                        const experts::Outputs& ref, bool pdl, bool stages) {
  const experts::Buffers b = d.buffers(0);
  const Stream s = process_stream();
  std::string why = run_and_check(p, d, ref, [&] { return v.launch(p, b, s, pdl); }, pdl ? 2 : 1);
  if (!why.empty()) return "launch: " + why;
  if (stages && p.tokens > 0) {
    why = run_and_check(p, d, ref, [&] {
      for (experts::Stage st : experts::stages(v))
        if (const LaunchStatus e = experts::launch_stage(v, p, b, st, s, pdl); e != 0) return e;
      return LaunchStatus{0};
    }, 1);
    if (!why.empty()) return "stage by stage: " + why;
  }
  if (needs_zeroed_workspace(v, p, device_caps()) && !d.workspace_zero(v)) return "left its zeroed workspace non-zero";
  return {};
}

std::string describe(const Case& c, const Host& h, const char* layout, std::size_t misalign) {
  const char* acts[] = {"silu", "gelu", "gelu-tanh", "swiglu-oai"};
  std::string s = std::string(c.name) + ": T " + std::to_string(h.T) + " K " + std::to_string(c.K) + " E " +
                  std::to_string(c.E) + " H " + std::to_string(c.H) + " I " + std::to_string(c.I) + ", " +
                  (c.dt == DType::bf16 ? "bf16" : "f16") + ", " + acts[int(c.act)] +
                  (c.w1 == W1Layout::interleaved ? ", w1 interleaved" : "") + ", " + layout +
                  (h.map_size ? ", expert map " + std::to_string(h.map_size) + " -> " + std::to_string(c.E) : "") +
                  (c.given ? ", given weights" : ", generated weights") + ", hidden misaligned " +
                  std::to_string(misalign) + ", seed " + std::to_string(h.seed);
  if (!h.routing_note.empty()) s += ", routing " + h.routing_note;
  return s;
}

}  // namespace

TEST_CASE("experts: every variant against the CPU reference") {
  const bool subset = test::sanitizer_subset();
  const DeviceCaps& caps = device_caps();
  std::map<std::string, int> skipped;  // "variant: why" -> runs not applicable
  int runs = 0;
  std::uint64_t seed = 320;
  for (const Case& c : kCases) {
    ++seed;
    if (subset && !c.small) continue;
    std::string skip;
    const std::optional<Host> h = make_host(c, seed, skip);
    if (!h) {
      MESSAGE("case \"" << c.name << "\" skipped: " << skip);
      continue;
    }
    const std::size_t misalign = (seed & 1) ? 16 : 0;  // 16-byte-aligned, off every larger alignment
    std::optional<experts::Outputs> ref;  // once per case: the layout does not change the formula
    std::vector<std::int64_t> tokens;
    for (const Layouts& l : kLayouts) {
      const experts::Problem p = experts::make_problem(h->T, c.K, c.E, c.H, c.I, c.dt, c.act, c.w1, l.layout, l.B,
                                                       c.scaling, h->map_size);
      if (!ref) {
        tokens = experts::sample_tokens(p, c.budget_macs, seed);
        ref = experts::reference(p, ref_inputs(*h), tokens);
      }
      const std::string what = describe(c, *h, l.name, misalign) + ", reference on " + std::to_string(tokens.size()) +
                               " of " + std::to_string(h->T) + " tokens";
      std::optional<experts::DeviceBuffers> d;  // made for the first applicable variant, its workspace replaced after
      for (const experts::Variant& v : experts::registry().variants()) {
        if (const char* why = v.not_applicable(p, caps)) {
          ++skipped[std::string(v.info.name) + ": " + why];
          continue;
        }
        const WorkspaceNeed need = WorkspaceNeed::of(v, p, caps);
        if (!d) d.emplace(p, dev_inputs(*h), need, SetOptions::checked(misalign));
        else d->replace_workspace(need);
        for (bool ask_pdl : {false, true}) {
          if (ask_pdl && !caps.pdl) continue;  // no PDL here: the run without covered it
          test::expect_ok("variant " + std::string(v.info.name) + ", " + what + (ask_pdl ? ", PDL (twice back to back)" : ""),
                          run_variant(v, p, *d, *ref, ask_pdl, c.small));
          ++runs;
        }
      }
    }
  }
  for (const auto& [why, n] : skipped) MESSAGE("not applicable (" << n << " runs skipped): " << why);
  MESSAGE(runs << " runs");
  CHECK(runs > 0);
}

// Case c's problem on layout l and the reference of every token of h.
std::pair<experts::Problem, experts::Outputs> problem_and_full_reference(const Case& c, const Host& h,
                                                                        const Layouts& l) {
  const experts::Problem p =
      experts::make_problem(h.T, c.K, c.E, c.H, c.I, c.dt, c.act, c.w1, l.layout, l.B, c.scaling, 0);
  std::vector<std::int64_t> all(std::size_t(h.T));
  std::iota(all.begin(), all.end(), std::int64_t{0});
  return {p, experts::reference(p, ref_inputs(h), all)};
}

// Hidden rows 2 bytes off their allocation (not 16-byte aligned): the rows a
// gathering gemm1 reads (gather) cannot go through cp.async's 16-byte copies,
// so it takes naive's kernels, gathering too; the other variants read
// permuted, which permute's pick writes in narrow words. Every variant on both
// layouts, PDL off and on.
TEST_CASE("experts: hidden rows not 16-byte aligned") {
  const DeviceCaps& caps = device_caps();
  const Case c{"hidden 2 bytes off", 21, 3, 8, 256, 128, DType::bf16};
  std::string skip;
  const std::optional<Host> h = make_host(c, 91, skip);
  REQUIRE(h);
  int runs = 0;
  for (const Layouts& l : kLayouts) {
    const auto [p, ref] = problem_and_full_reference(c, *h, l);
    for (const experts::Variant& v : experts::registry().variants()) {
      if (v.not_applicable(p, caps) != nullptr) continue;
      experts::DeviceBuffers d(p, dev_inputs(*h), WorkspaceNeed::of(v, p, caps), SetOptions::checked(2));
      for (bool ask_pdl : {false, true}) {
        if (ask_pdl && !caps.pdl) continue;
        test::expect_ok("variant " + std::string(v.info.name) + ", " + l.name + ", hidden 2 bytes off" +
                            (ask_pdl ? ", PDL (twice back to back)" : ""),
                        run_variant(v, p, d, ref, ask_pdl, true));
        ++runs;
      }
    }
  }
  CHECK(runs > 0);
}

// The checker must catch a wrong answer that came from the GPU: out and y
// downloaded from a correct launch, one element moved off; and a launch whose
// routing weights of two slots of one token were swapped on the way in.
TEST_CASE("experts: the checker rejects wrong GPU answers") {
  const DeviceCaps& caps = device_caps();
  const Case c{"rejection", 12, 3, 8, 256, 128, DType::bf16};
  std::string skip;
  const std::optional<Host> h = make_host(c, 77, skip);
  REQUIRE(h);
  int variants = 0;
  for (const Layouts& l : kLayouts) {
    const auto [p, ref] = problem_and_full_reference(c, *h, l);
    for (const experts::Variant& v : experts::registry().variants()) {
      if (v.not_applicable(p, caps) != nullptr) continue;
      const std::string what = "variant " + std::string(v.info.name) + ", " + l.name;
      INFO(what);
      ++variants;
      {
        experts::DeviceBuffers d(p, dev_inputs(*h), WorkspaceNeed::of(v, p, caps), SetOptions::checked());
        const experts::Buffers b = d.buffers(0);
        REQUIRE(test::launch_and_sync([&] { return v.launch(p, b, process_stream(), false); }).empty());
        std::vector<std::uint16_t> out, y;
        std::vector<std::int32_t> inverse;
        REQUIRE(d.download(out, &y, &inverse).empty());
        REQUIRE(experts::check(p, ref, out).ok);  // the launch itself is right
        REQUIRE(experts::check_y(p, ref, y, inverse).ok);
        // out[5, 17] moved by four times its bound (and at least 0.5) away from the exact value.
        const std::size_t k = 5 * std::size_t(c.H) + 17;
        const double exact = ref.out_exact[k], off = std::max(0.5, 4.0 * ref.out_bound[k]);
        std::vector<std::uint16_t> bad = out;
        bad[k] = bits(c.dt, exact + off);
        REQUIRE(std::fabs(value(c.dt, bad[k]) - exact) > ref.out_bound[k]);
        const CheckResult co = experts::check(p, ref, bad);
        CHECK_FALSE(co.ok);
        CHECK_MESSAGE(co.first_difference.find("out[5, 17]") != std::string::npos, co.first_difference);
        // y of slot (4, 1), element 3, likewise.
        const std::int32_t row = inverse[4 * std::size_t(c.K) + 1];
        REQUIRE(row >= 0);
        const std::size_t ky = std::size_t(row) * std::size_t(c.H) + 3;
        const std::size_t kr = (4 * std::size_t(c.K) + 1) * std::size_t(c.H) + 3;
        std::vector<std::uint16_t> bad_y = y;
        bad_y[ky] = bits(c.dt, value(c.dt, ref.y[kr]) + std::max(0.5, 4.0 * ref.y_bound[kr]));
        CHECK_FALSE(experts::check_y(p, ref, bad_y, inverse).ok);
      }
      {
        // Token 6's first two routing weights swapped on the device: a kernel
        // that paired a slot's y with another slot's weight.
        Host swapped = *h;
        std::swap(swapped.weights[6 * std::size_t(c.K)], swapped.weights[6 * std::size_t(c.K) + 1]);
        REQUIRE(swapped.weights[6 * std::size_t(c.K)] != h->weights[6 * std::size_t(c.K)]);
        experts::DeviceBuffers d(p, dev_inputs(swapped), WorkspaceNeed::of(v, p, caps), SetOptions::checked());
        const experts::Buffers b = d.buffers(0);
        REQUIRE(test::launch_and_sync([&] { return v.launch(p, b, process_stream(), false); }).empty());
        std::vector<std::uint16_t> out;
        REQUIRE(d.download(out).empty());
        const CheckResult cw = experts::check(p, ref, out);
        CHECK_FALSE(cw.ok);
        CHECK_MESSAGE(cw.first_difference.find("out[6, ") != std::string::npos, cw.first_difference);
      }
    }
  }
  CHECK(variants > 0);
}
