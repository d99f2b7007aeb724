// Lab probe for the combine family (never the product): candidate launch
// shapes of a bit-for-bit gather combine against the production `slices`, on
// the shapes compare.py's combine table runs (identity inverse, as the peers
// get it) and on a shuffled map, PDL off and on, timed as moekit times
// (src/timing.hpp: graph replay of 20 launches, input copies rotated past L2).
// Every candidate's output is checked bit for bit against the CPU reference
// before it is timed.
//
//   probe_combine [--tokens 1,16,256,4096] [--samples 25]
//
// Candidates (bench/tune/combine_probe.cu's table; bf16, 16-byte loads and
// stores, H % 8 == 0): `cur` is the production `slices` launcher; the others
// are one template (threads per block, rows in flight fitted to K or 8,
// tokens per block, indices read before pdl_wait or after, trigger at exit
// or start, grid y capped per SM or not). Results and the first round's
// candidates: docs/bench/combine-notes.md, "combine: launch-shape probe".
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "combine/buffers.hpp"
#include "combine/combine.hpp"
#include "combine/gen.hpp"
#include "combine/reference.hpp"
#include "cuda_util.hpp"
#include "combine_probe.hpp"
#include "rows_gen.hpp"
#include "timing.hpp"

using namespace moekit;
using moekit::probe::Cand;

namespace {

struct Shape {
  const char* name;
  int K;
  std::int64_t H;
};
const Shape kShapes[] = {{"mixtral K2 H4096", 2, 4096}, {"deepseek K8 H7168", 8, 7168}, {"qwen K8 H4096", 8, 4096}};

// A decimal number and nothing else (std::stoll alone takes "5x" as 5).
std::int64_t whole_number(const std::string& s) {
  std::size_t used = 0;
  const std::int64_t v = std::stoll(s, &used);
  if (used != s.size()) throw std::invalid_argument("not a number");
  return v;
}

std::vector<std::int64_t> parse_list(const char* s) {
  std::vector<std::int64_t> v;
  std::string cur;
  for (const char* q = s;; ++q) {
    if (*q == ',' || *q == 0) {
      if (!cur.empty()) v.push_back(whole_number(cur));
      cur.clear();
      if (*q == 0) break;
    } else {
      cur += *q;
    }
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::int64_t> tokens = {1, 16, 256, 4096};
  int samples = 25;
  const char* usage =
      "usage: probe_combine [--tokens 1,16,256,4096 (each 1..65536)] [--samples 25]\n"
      "Times combine launch-shape candidates beside the production slices launcher (bf16; Mixtral, DeepSeek-V3\n"
      "and Qwen3 shapes; identity and shuffled maps; PDL off and on), each checked bit for bit first.\n"
      "Prints a Markdown table; exit 1 when a candidate's output differs, 3 without a GPU.\n";
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      return 0;
    }
    try {
      if (i + 1 >= argc) throw std::invalid_argument("no value");
      if (a == "--tokens") tokens = parse_list(argv[i + 1]);
      else if (a == "--samples") samples = static_cast<int>(std::min<std::int64_t>(whole_number(argv[i + 1]), 100000));
      else throw std::invalid_argument("unknown option");
      if (samples < 1 || tokens.empty()) throw std::invalid_argument("out of range");
      for (std::int64_t t : tokens)
        if (t < 1 || t > 65536) throw std::invalid_argument("out of range");  // 65536 x 8 x 7168 bf16: 7.5 GB
    } catch (const std::exception&) {
      std::fprintf(stderr, "probe_combine: bad argument '%s'\n%s", a.c_str(), usage);
      return 2;
    }
  }
  if (cuda_device_count() == 0) {
    std::fprintf(stderr, "probe_combine: no CUDA device\n");
    return 3;
  }
  const combine::Variant* cur = nullptr;
  for (const combine::Variant& v : combine::registry().variants())
    if (std::string(v.info.name) == "slices") cur = &v;
  std::printf("| shape | inverse | T | PDL | candidate | median us | min | max | GB/s | check |\n|---|---|---:|---|---|---:|---:|---:|---:|---|\n");
  std::uint64_t seed = 11;
  int failures = 0;
  for (const Shape& sh : kShapes)
    for (std::int64_t T : tokens)
      for (bool identity : {true, false}) {
        combine::Problem p;
        p.tokens = T;
        p.topk = sh.K;
        p.rows = T * sh.K;
        p.hidden = sh.H;
        p.dtype = combine::DType::bf16;
        p.scaling = 1.0f;
        const npy::Array x = gen::normal_rows(p.rows, sh.H, npy::DType::bf16, ++seed, "expert rows");
        npy::Array inv_a = gen::combine_inverse(T, sh.K, seed);
        auto inv = inv_a.as<std::int32_t>();
        std::vector<std::int32_t> inv_v(inv.begin(), inv.end());
        if (identity) std::iota(inv_v.begin(), inv_v.end(), 0);
        const npy::Array w_a = gen::topk_weights(T, sh.K, seed);
        const auto w = w_a.as<float>();
        std::vector<unsigned char> ref(combine::out_bytes(p));
        combine::reference(p, x.data.data(), inv_v.data(), w.data(), ref.data());
        const int copies = rotation_copies(x.data.size(), false);
        combine::DeviceBuffers d(p, {x.data, inv_v, w}, WorkspaceNeed{}, SetOptions::run(copies));
        std::vector<combine::Buffers> bufs;
        for (int k = 0; k < copies; ++k) bufs.push_back(d.buffers(k));
        const double bytes = combine::bytes_moved(p, inv_v);
        for (bool pdl : {false, true}) {
          std::vector<std::pair<std::string, std::function<void(Stream, int)>>> runs;
          runs.emplace_back("cur", [&](Stream s, int k) { cuda_check(cur->launch(p, bufs[k], s, pdl), "cur"); });
          for (const Cand& c : probe::candidates())
            runs.emplace_back(c.name, [&, c](Stream s, int k) {
              cuda_check(c.launch(p, bufs[k], static_cast<cudaStream_t>(s), pdl), c.name);
            });
          for (auto& [name, launch] : runs) {
            d.poison();
            launch(process_stream(), 0);
            cuda_sync("probe");
            std::vector<unsigned char> got(ref.size());
            std::string why = d.download(got.data());
            if (why.empty()) {
              const CheckResult chk = combine::check(p, ref.data(), got.data());
              if (!chk.ok) why = chk.first_difference;
            }
            if (!why.empty()) ++failures;
            TimingOptions o;
            o.samples = samples;
            const TimingStats ts = time_launches(launch, copies, o);
            std::printf("| %s | %s | %lld | %s | %s | %.2f | %.2f | %.2f | %.0f | %s |\n", sh.name,
                        identity ? "identity" : "shuffled", static_cast<long long>(T), pdl ? "on" : "off", name.c_str(),
                        ts.median_us, ts.min_us, ts.max_us, bytes / ts.median_us / 1e3, why.empty() ? "ok" : why.c_str());
            std::fflush(stdout);
          }
        }
      }
  std::printf("probe_combine: %d check failures\n", failures);
  return failures ? 1 : 0;
}
