// Benchmark of the ep family: one JSON record per (model, ranks, tokens per
// rank, variant) cell (bench/common/record.hpp); bench/render.py turns them
// into docs/bench/ep.md.
//
//   bench_ep --json bench/results/ep.jsonl   (make bench; stdout without --json)
//   bench_ep --model DeepSeek --ranks 2,4 --tokens 128,4096   (a subset of the cells)
//
// Models: the expert shapes of DeepSeek-V3 (E 256, K 8, H 7168, S 2.5),
// Qwen3-235B (E 128, K 8, H 4096) and Mixtral (E 8, K 2, H 4096), bf16 rows
// and uniform distinct ids from the CLI's generators (`moekit gen ep`), on
// 1, 2, 4 and 8 GPUs as far as the host has them (devices 0 .. R-1). The
// buffers are the CLI's (src/ep/buffers.hpp); one ep::Comm per rank count.
// Median microseconds per launch: CUDA-graph replays, or events around each
// launch for a variant that waits on the host (nccl-a2a); each phase
// (dispatch, combine) also timed alone into the record's stage_us. GB/s from
// every row the phases move (the CLI's figure). Each cell is checked against
// the CPU reference first; a mismatch makes its status "fail". PDL on where
// the device has it (as the CLI's default). Not a test.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "align/gen.hpp"
#include "args.hpp"
#include "cell.hpp"
#include "combine/gen.hpp"
#include "cuda_util.hpp"
#include "ep/buffers.hpp"
#include "ep/comm.hpp"
#include "ep/ep.hpp"
#include "ep/gen.hpp"
#include "ep/reference.hpp"
#include "record.hpp"
#include "rows_gen.hpp"
#include "timing.hpp"

using namespace moekit;

namespace {

struct Model {
  const char* name;
  int E, K;
  std::int64_t H;
  float S;
};

const Model kModels[] = {
    {"DeepSeek-V3 (E 256, K 8, H 7168)", 256, 8, 7168, 2.5f},
    {"Qwen3-235B (E 128, K 8, H 4096)", 128, 8, 4096, 1.0f},
    {"Mixtral (E 8, K 2, H 4096)", 8, 2, 4096, 1.0f},
};
const std::int64_t kTokens[] = {1, 16, 128, 1024, 4096};

using ep::rank_seed;  // rank r's generated inputs, as `moekit ep` draws them

struct Inputs {
  std::vector<npy::Array> hidden;
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<std::vector<float>> w;
  std::vector<ep::RankInputs> views() const {
    std::vector<ep::RankInputs> v;
    for (std::size_t r = 0; r < hidden.size(); ++r)
      v.push_back({std::span<const std::byte>(reinterpret_cast<const std::byte*>(hidden[r].data.data()),
                                              hidden[r].data.size()),
                   ids[r], w[r]});
    return v;
  }
};

// One Comm per rank count, released before main returns (NCCL's teardown
// after the CUDA runtime's would be undefined).
std::unique_ptr<ep::Comm> comms[ep::kMaxRanks + 1];

ep::Comm& comm_for(int R) {
  if (!comms[R]) {
    std::string why;
    comms[R] = ep::comm_on_process_streams(R, /*with_nccl=*/true, &why);
    if (!comms[R]) throw CudaError("ep: " + why);
  }
  return *comms[R];
}

void measure(bench::Writer& out, const Model& m, int R, std::int64_t T, std::uint64_t seed) {
  const DeviceCaps& caps = device_caps();
  const bool pdl = caps.pdl;
  const ep::Problem p = ep::make_problem(R, T, m.K, m.E, m.H, combine::DType::bf16, m.S);
  Inputs in;
  for (int r = 0; r < R; ++r) {
    in.hidden.push_back(gen::normal_rows(T, m.H, npy::DType::bf16, rank_seed(seed, r), "hidden rows"));
    const npy::Array ids = gen::align_ids(T, m.K, m.E, gen::parse_dist("uniform"), rank_seed(seed, r), false);
    in.ids.emplace_back(ids.as<std::int32_t>().begin(), ids.as<std::int32_t>().end());
    const npy::Array w = gen::topk_weights(T, m.K, rank_seed(seed, r));
    in.w.emplace_back(w.as<float>().begin(), w.as<float>().end());
  }
  const auto views = in.views();
  const auto ref = ep::reference(p, views);
  const auto ref_partials = ep::reference(p, views, ep::Return::partials);
  const ep::Traffic traffic = ep::traffic(p, in.ids);
  const double bytes = double(traffic.dispatch_rows + traffic.combine_rows) * double(p.row_bytes());
  const int copies = rotation_copies(in.hidden[0].data.size(), false);
  const std::string auto_pick(ep::registry().pick_auto(p, caps, pdl).info.name);
  for (const ep::Variant& v : ep::registry().variants()) {
    bench::Record rec;
    rec.table = fmt::format("{}, {} GPU(s)", m.name, R);
    rec.variant = std::string(v.info.name);
    rec.params = {{"tokens", T}, {"ranks", R}, {"E", m.E}, {"K", m.K}, {"H", m.H}, {"dtype", "bf16"}};
    rec.dtype = "bfloat16";
    rec.pdl = pdl ? "on" : "off";
    rec.extra = {{"auto_pick", auto_pick},
                 {"rows_between_gpus", traffic.dispatch_remote},
                 {"slots_between_gpus", traffic.combine_remote}};
    const char* na = v.not_applicable(p, caps);
    if (na == nullptr && ep::needs_nccl(v) && !comm_for(R).has_nccl()) na = comm_for(R).nccl_unavailable().c_str();
    bench::write_cell(out, std::move(rec), na, [&](bench::Record& r) {
      ep::Comm& comm = comm_for(R);
      ep::DeviceBuffers d(p, views, WorkspaceNeed::of(v, p, caps), SetOptions::run(copies));
      std::vector<ep::Buffers> bufs;
      for (int k = 0; k < copies; ++k) bufs.push_back(d.buffers(k, &comm));
      auto launch = [&](Stream s, int copy) { cuda_check(v.launch(p, bufs[std::size_t(copy)], s, pdl), "ep launch"); };
      bench::launch_once(launch);
      std::vector<ep::RankOutputs> got;
      std::string why = d.download(got);
      if (why.empty()) {
        const CheckResult chk = ep::check(p, ep::returns(v) == ep::Return::partials ? ref_partials : ref, got);
        if (!chk.ok) why = chk.first_difference;
      }
      TimingOptions o;
      o.graph = !v.host_sync;  // a launch that waits on the host is not capturable
      r.m = bench::measure(launch, copies, o, bytes);
      // A phase that fails to time leaves the launch's timing and says so.
      try {
        for (const auto& [name, st] :
             {std::pair{"dispatch", ep::Stage::dispatch}, std::pair{"combine", ep::Stage::combine}})
          r.stages.push_back({name, time_launches(
                                        [&](Stream s, int copy) {
                                          cuda_check(ep::launch_stage(v, p, bufs[std::size_t(copy)], st, s, pdl),
                                                     "ep stage");
                                        },
                                        copies, o)});
      } catch (const std::exception& e) {
        r.extra.push_back({"stage_error", std::string(e.what())});
      }
      // As a process per GPU would run it (no graph spans the GPUs): each
      // rank's stream its own graph (ep::launch_per_rank), the slowest's time.
      if (ep::launches_per_rank(v)) try {
          const TimingStats st = ep::time_per_rank(
              comm,
              [&](int copy) {
                cuda_check(ep::launch_per_rank(v, p, bufs[std::size_t(copy)], pdl), "ep per-rank launch");
              },
              copies, o);
          r.extra.push_back({"per_rank_us", st.median_us});
        } catch (const std::exception& e) {
          r.extra.push_back({"per_rank_error", std::string(e.what())});
        }
      return why;
    });
  }
}

// The cells a run measures: every one by default; --model (a prefix of a
// model's name), --ranks and --tokens (comma lists) pick a subset. Each
// cell keeps the seed of its place in the whole grid.
struct Filter {
  std::string model;
  std::vector<std::int64_t> ranks, tokens;
  static bool has(const std::vector<std::int64_t>& v, std::int64_t x) {
    return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
  }
};

std::vector<std::int64_t> parse_list(std::string_view flag, std::string_view s) {
  try {
    return bench::int_list(s, 1, INT64_MAX);
  } catch (const std::invalid_argument&) {
    throw std::invalid_argument(fmt::format("{} {}", flag, s));
  }
}

// Takes the filter's flags out of argv (run_bench reads --json).
Filter take_filter(int& argc, char** argv) {
  Filter f;
  int w = 1;
  for (int r = 1; r < argc; ++r) {
    const std::string_view a = argv[r];
    const bool known = a == "--model" || a == "--ranks" || a == "--tokens";
    if (!known) {
      argv[w++] = argv[r];
      continue;
    }
    if (r + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", a));
    const std::string_view val = argv[++r];
    if (a == "--model") f.model = std::string(val);
    else if (a == "--ranks") f.ranks = parse_list(a, val);
    else f.tokens = parse_list(a, val);
  }
  argc = w;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Filter f;
  try {
    f = take_filter(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_ep: bad argument: %s\n", e.what());
    return 2;
  }
  return bench::run_bench(argc, argv, "ep", [&](bench::Writer& out) {
    std::uint64_t seed = 1;
    for (int R = 1; R <= std::min(cuda_device_count(), ep::kMaxRanks); R *= 2)
      for (const Model& m : kModels)
        for (std::int64_t t : kTokens) {
          ++seed;
          if (Filter::has(f.ranks, R) && Filter::has(f.tokens, t) && std::string_view(m.name).starts_with(f.model))
            measure(out, m, R, t, seed);
        }
    for (auto& c : comms) c.reset();
  });
}
