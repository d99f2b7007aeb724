// GPU test: every ep variant against the reference on every rank count the
// host allows (1, 2, 4, ... up to the visible GPUs): random rows, ids uniform
// with dropped slots (-1 and ids >= E), one hot expert, an uneven placement
// (a rank owning nothing), T {0, 1, 7, 300, 1500} (300 and 1500: the plan's
// two passes, 2 and 6 blocks; past 256 blocks: the CLI case
// ep_plan_past_256_blocks),
// K {1, 2, 8, 11} (11: a second group of 8 ids a token), H {1, 7, 4096},
// f32 / bf16 / f16, outputs poisoned between guard zones, a filled
// workspace (zeroed with PDL off: a receive place left unmarked would read as
// expert 0; 0xCD with PDL on), PDL off and on, and each launch run twice (the
// second reuses the first's buffers), each phase alone, and (a variant that
// never waits on the host) replays of a CUDA graph. NCCL must load
// (MOEKIT_NCCL_LIB or the loader's path).
//
// MOEKIT_GPU_SUBSET=sanitizer runs T <= 7 and H <= 7 only;
// MOEKIT_GPU_EP_RANKS=4 (a comma list) only those rank counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/device.hpp"
#include "cuda_util.hpp"
#include "ep/buffers.hpp"
#include "ep/comm.hpp"
#include "ep/ep.hpp"
#include "ep/reference.hpp"
#include "gpu_case.hpp"
#include "timing.hpp"
#include "half.hpp"

using namespace moekit;

namespace {

enum class Ids { uniform, hot, dropped };

struct Inputs {
  std::vector<std::vector<std::byte>> hidden;
  std::vector<std::vector<std::int32_t>> ids;
  std::vector<std::vector<float>> w;
  std::vector<ep::RankInputs> views() const {
    std::vector<ep::RankInputs> v;
    for (std::size_t s = 0; s < hidden.size(); ++s) v.push_back({hidden[s], ids[s], w[s]});
    return v;
  }
};

Inputs draw(const ep::Problem& p, Ids how, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  Inputs in;
  const std::size_t es = p.dtype == combine::DType::f32 ? 4 : 2;
  for (int s = 0; s < p.ranks; ++s) {
    std::vector<std::byte> h(std::size_t(p.tokens * p.hidden) * es);
    for (std::size_t i = 0; i < std::size_t(p.tokens * p.hidden); ++i) {
      const float v = nd(rng);
      if (es == 4) std::memcpy(&h[i * 4], &v, 4);
      else {
        const std::uint16_t b = p.dtype == combine::DType::bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
        std::memcpy(&h[i * 2], &b, 2);
      }
    }
    std::vector<std::int32_t> ids(std::size_t(p.tokens * p.topk));
    std::vector<float> w(ids.size());
    for (std::int64_t t = 0; t < p.tokens; ++t) {
      std::vector<std::int32_t> e(std::size_t(p.experts));
      for (std::size_t i = 0; i < e.size(); ++i) e[i] = std::int32_t(i);
      std::shuffle(e.begin(), e.end(), rng);
      for (int j = 0; j < p.topk; ++j) {
        std::int32_t v = e[std::size_t(j) % e.size()];
        if (how == Ids::hot && j == 0) v = std::int32_t(p.experts - 1);  // every token to the last rank's expert
        if (how == Ids::dropped && rng() % 4 == 0) v = rng() % 2 ? -1 : p.experts + std::int32_t(rng() % 5);
        ids[std::size_t(t * p.topk + j)] = v;
        w[std::size_t(t * p.topk + j)] = std::uniform_real_distribution<float>(-0.5f, 1.f)(rng);
      }
    }
    in.hidden.push_back(std::move(h));
    in.ids.push_back(std::move(ids));
    in.w.push_back(std::move(w));
  }
  return in;
}

// The communicators of R ranks, created once (ncclCommInitAll takes a
// while) and shared by every case of that R, as a serving process would.
ep::Comm* comm_for(int R) {
  static std::unique_ptr<ep::Comm> comms[ep::kMaxRanks + 1];
  if (!comms[R]) {
    std::string why;
    comms[R] = ep::comm_on_process_streams(R, /*with_nccl=*/true, &why);
    REQUIRE_MESSAGE(comms[R] != nullptr, why);
    REQUIRE_MESSAGE(comms[R]->has_nccl(), comms[R]->nccl_unavailable());
  }
  return comms[R].get();
}

// p.ffn: the weights' seed and the check's sample (every token at the
// grid's sizes).
ep::FfnInputs ffn_inputs(std::uint64_t seed) {
  ep::FfnInputs f;
  f.weight_seed = seed;
  f.sample_seed = seed + 1;
  f.budget_macs = 4e8;
  return f;
}

// Every variant on one problem, PDL off and on; the runs made. `given`:
// p.ffn's weights from these arrays (global expert order), else generated.
int check_variants(const ep::Problem& p, Ids how, std::uint64_t seed, const std::string& label,
                   const std::vector<std::uint16_t>* given_w1 = nullptr,
                   const std::vector<std::uint16_t>* given_w2 = nullptr) {
  const Inputs in = draw(p, how, seed);
  const auto views = in.views();
  ep::FfnInputs fi = ffn_inputs(seed);
  if (given_w1 != nullptr) {
    fi.w1 = *given_w1;
    fi.w2 = *given_w2;
  }
  const ep::FfnInputs* ffn = p.ffn ? &fi : nullptr;
  const auto ref = ep::reference(p, views, ep::Return::slots, ffn);
  const auto ref_partials = ep::reference(p, views, ep::Return::partials, ffn);
  const DeviceCaps& caps = device_caps();
  ep::Comm* const comm = comm_for(p.ranks);
  int runs = 0;
  for (const ep::Variant& v : ep::registry().variants()) {
    if (v.not_applicable(p, caps) != nullptr) continue;
    const ep::Return rule = ep::returns(v);
    const auto& want = rule == ep::Return::partials ? ref_partials : ref;
    for (const bool pdl : {false, true}) {
      // PDL off: a zeroed workspace, not the usual 0xCD, since -1 ids in the
      // receive buffer must be written by the sender (p2p) or the tail pass
      // (nccl-a2a) and 0xCDCDCDCD would read as a dropped id already (zero is
      // expert 0); PDL on: 0xCD, so nothing may rely on a zero either.
      SetOptions o = SetOptions::checked();
      o.workspace_fill = pdl ? 0xCD : 0x00;
      ep::DeviceBuffers d(p, views, WorkspaceNeed::of(v, p, caps), o, ffn);
      const std::string what = fmt::format("{} {} pdl {} seed {}", v.info.name, label, pdl, seed);
      const ep::Buffers b = d.buffers(0, comm);
      // Twice, each checked, with the outputs poisoned and the workspace
      // filled again between: the second launch reuses the first's buffers
      // and counters, and cannot pass on what the first left in its receive
      // parts (so a barrier that opens early shows as a wrong answer).
      std::string err;
      std::vector<ep::RankOutputs> got;
      for (int round = 0; round < 2 && err.empty(); ++round) {
        if (round > 0) d.poison_all();
        err = test::launch_and_sync([&] { return v.launch(p, b, process_stream(), pdl && caps.pdl); });
        if (err.empty() && !comm->error().empty()) err = comm->error();
        if (err.empty()) err = d.download(got);
        if (err.empty()) {
          const CheckResult c = ep::check(p, want, got, rule, views);
          if (!c.ok) err = fmt::format("launch {}: {}", round + 1, c.first_difference);
        }
      }
      // Each phase alone again (per-phase timing runs them so), the outputs
      // poisoned and the workspace filled first: what the phases read, they
      // wrote (an experts phase that launched nothing leaves y poisoned).
      if (err.empty()) d.poison_all();
      if (err.empty())
        for (const ep::Stage st : {ep::Stage::dispatch, ep::Stage::experts, ep::Stage::combine})
          if (err.empty())
            err = test::launch_and_sync([&] { return ep::launch_stage(v, p, b, st, process_stream(), pdl && caps.pdl); });
      if (err.empty()) err = d.download(got);
      if (err.empty()) {
        const CheckResult c = ep::check(p, want, got, rule, views);
        if (!c.ok) err = "after the phases alone: " + c.first_difference;
      }
      // A variant that never waits on the host is captured into a CUDA graph
      // (the run's timing replays one): outputs poisoned, two replays of a
      // graph of two launches, checked again.
      if (err.empty() && !v.host_sync) {
        d.poison_all();
        try {
          TimingOptions o;
          o.warmup = 0;
          o.samples = 2;
          o.graph = true;
          o.launches_per_graph = 2;
          (void)time_launches([&](Stream s, int) { cuda_check(v.launch(p, b, s, pdl && caps.pdl), "launch"); }, 1, o);
          cuda_sync("graph replays");
        } catch (const std::exception& e) {
          err = std::string("graph capture and replay: ") + e.what();
        }
        if (err.empty()) err = d.download(got);
        if (err.empty()) {
          const CheckResult c = ep::check(p, want, got, rule, views);
          if (!c.ok) err = "after graph replays: " + c.first_difference;
        }
      }
      // As a process per GPU would launch it (launch_per_rank): each rank on
      // its own stream, no fork or join. Two launches back to back without a
      // host wait, over other inputs and outputs but the same workspace (a
      // second DeviceBuffers whose workspace pointers are the first's): a
      // rank that wrote launch 2's rows into a peer before the peer had laid
      // out launch 1's (a barrier that opens early) leaves launch 1's
      // outputs wrong. Then each stream's graph of the two, replayed.
      if (err.empty() && ep::launches_per_rank(v)) {
        const Inputs in2 = draw(p, how, seed + 1000);
        const auto views2 = in2.views();
        const auto want2 = ep::reference(p, views2, rule, ffn);
        ep::DeviceBuffers d2(p, views2, WorkspaceNeed::of(v, p, caps), o, ffn);
        ep::Buffers b2 = d2.buffers(0, comm);
        for (int r = 0; r < p.ranks; ++r) b2.rank[std::size_t(r)].workspace = b.rank[std::size_t(r)].workspace;
        auto sync_all = [&](const char* what) {
          for (int r = 0; r < p.ranks; ++r) {
            const DeviceScope on(r);
            cuda_sync(what);
          }
        };
        auto check_both = [&](const char* when) {
          std::vector<ep::RankOutputs> got2;
          std::string e = d.download(got);
          if (e.empty()) e = d2.download(got2);
          if (e.empty())
            if (const CheckResult c = ep::check(p, want, got, rule, views); !c.ok) e = "first inputs: " + c.first_difference;
          if (e.empty())
            if (const CheckResult c = ep::check(p, want2, got2, rule, views2); !c.ok)
              e = "second inputs: " + c.first_difference;
          return e.empty() ? e : std::string(when) + ": " + e;
        };
        try {
          d.poison_all();
          d2.poison();
          cuda_check(ep::launch_per_rank(v, p, b, pdl && caps.pdl), "launch_per_rank");
          cuda_check(ep::launch_per_rank(v, p, b2, pdl && caps.pdl), "launch_per_rank");
          sync_all("per-rank launches");
          err = check_both("per-rank launches");
          // Not under a sanitizer: one that ran the GPUs' work one graph after
          // another would leave rank 0's barrier waiting for rank 1's graph.
          if (err.empty() && !test::sanitizer_subset()) {
            d.poison_all();
            d2.poison();
            TimingOptions to;
            to.warmup = 0;
            to.samples = 2;
            to.launches_per_graph = 2;
            (void)ep::time_per_rank(
                *comm,
                [&](int copy) {
                  cuda_check(ep::launch_per_rank(v, p, copy == 0 ? b : b2, pdl && caps.pdl), "launch_per_rank");
                },
                2, to);
            sync_all("per-rank graph replays");
            err = check_both("per-rank graph replays");
          }
        } catch (const std::exception& e) {
          err = std::string("per rank: ") + e.what();
        }
      }
      // p2p-signal's counters are a counting semaphore: every launch (and
      // every graph replay) must leave them at zero, or the next one passes
      // its barrier early.
      if (err.empty()) err = comm->signals_not_idle();
      test::expect_ok(what, err);
      ++runs;
    }
  }
  return runs;
}

// 1, 2, 4, ... up to the visible GPUs; MOEKIT_GPU_EP_RANKS (a comma list,
// e.g. "4") keeps only those, so a device call can check one R alone. A
// count outside them fails the test rather than leaving it with nothing to
// check.
std::vector<int> rank_counts() {
  std::vector<int> all;
  for (int r = 1; r <= std::min(cuda_device_count(), ep::kMaxRanks); r *= 2) all.push_back(r);
  const char* only = std::getenv("MOEKIT_GPU_EP_RANKS");
  if (only == nullptr || *only == '\0') return all;
  std::vector<int> v;
  std::string list(only);
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    const std::string item = list.substr(at, end - at);
    const int r = std::atoi(item.c_str());
    if (std::find(all.begin(), all.end(), r) == all.end())
      FAIL("MOEKIT_GPU_EP_RANKS=" << list << ": '" << item << "' is not a rank count this host runs");
    v.push_back(r);
    at = end + 1;
  }
  return v;
}

}  // namespace

TEST_CASE("ep variants vs reference") {
  if (const std::string why = ep::nccl_missing(); !why.empty()) FAIL(why);
  const bool subset = test::sanitizer_subset();
  int runs = 0;
  std::uint64_t seed = 1;
  for (const int R : rank_counts())
    for (const std::int64_t T : {0, 1, 7, 300, 1500})
      for (const int K : {1, 2, 8, 11})
        for (const std::int64_t H : {1, 7, 4096})
          for (const combine::DType dt : {combine::DType::bf16, combine::DType::f32, combine::DType::f16}) {
            if (subset && (T > 7 || H > 7)) continue;
            if (T > 300 && H > 7) continue;  // the plan's larger grids on short rows
            // Not every combination: dtype cycles with the shape so each meets each.
            if ((T + K + H + int(dt)) % 3 != 0 && !(T == 7 && H == 7)) continue;
            const int E = K > 8 ? R * 16 : R * 8;  // distinct ids a token
            const ep::Problem p = ep::make_problem(R, T, K, E, H, dt, ++seed % 2 ? 2.5f : 1.f);
            for (const Ids how : {Ids::uniform, Ids::hot, Ids::dropped})
              runs += check_variants(p, how, seed * 31 + int(how),
                                     fmt::format("R {} T {} K {} E {} H {} dtype {} ids {}", R, T, K, E, H, int(dt),
                                                 int(how)));
          }
  MESSAGE(runs << " variant runs");
  CHECK(runs > 0);
}

// --experts ffn: the experts family's FFN on each rank's received rows
// (its layout-reading auto pick: decode at few rows, else grouped or mma),
// y checked on every token against the experts reference with weights keyed
// by global expert (generated, or given arrays), out bit for bit on the run's
// own y rows. H 64 and 200
// (16-byte rows and not a multiple of the tiles), I 32 and 48, bf16 / f16.
TEST_CASE("ep --experts ffn vs reference") {
  if (const std::string why = ep::nccl_missing(); !why.empty()) FAIL(why);
  const bool subset = test::sanitizer_subset();
  int runs = 0;
  std::uint64_t seed = 500;
  for (const int R : rank_counts())
    for (const std::int64_t T : {0, 1, 7, 300})
      for (const int K : {1, 8})
        for (const std::int64_t H : {64, 200}) {
          if (subset && (T > 7 || H > 64)) continue;
          const combine::DType dt = (T + K + H) % 2 ? combine::DType::f16 : combine::DType::bf16;
          const experts::FfnArgs f{H == 64 ? 32 : 48, experts::Act::silu, experts::W1Layout::gate_up};
          const int E = R * 8;
          const ep::Problem p = ep::make_problem(R, T, K, E, H, dt, ++seed % 2 ? 2.5f : 1.f, {}, &f);
          for (const Ids how : {Ids::uniform, Ids::hot, Ids::dropped})
            runs += check_variants(p, how, seed * 31 + int(how),
                                   fmt::format("ffn R {} T {} K {} E {} H {} I {} dtype {} ids {}", R, T, K, E, H,
                                               f.inter, int(dt), int(how)));
        }
  // An uneven placement: rank R-1 owns no expert (its FFN has none to run).
  for (const int R : rank_counts()) {
    if (R < 2) continue;
    std::vector<std::int32_t> place(12);
    for (std::size_t e = 0; e < place.size(); ++e) place[e] = e < 8 ? 0 : std::int32_t(e % std::size_t(R - 1));
    const experts::FfnArgs f{40, experts::Act::gelu, experts::W1Layout::interleaved};
    const ep::Problem p = ep::make_problem(R, 33, 3, 12, 72, combine::DType::bf16, 1.f, place, &f);
    runs += check_variants(p, Ids::dropped, 77, fmt::format("ffn R {} uneven placement", R));
  }
  // Given weights: each rank uploads its own experts' rows of the global
  // arrays (a rank that took another's would fail y); f16, a row per expert
  // that differs.
  for (const int R : rank_counts()) {
    const experts::FfnArgs f{32, experts::Act::silu, experts::W1Layout::gate_up};
    const int E = R * 4;
    const std::int64_t H = 64;
    const ep::Problem p = ep::make_problem(R, 37, 3, E, H, combine::DType::f16, 1.5f, {}, &f);
    std::mt19937 rng{static_cast<std::uint32_t>(R)};
    std::uniform_real_distribution<float> u(-0.2f, 0.2f);
    std::vector<std::uint16_t> w1(std::size_t(E) * 2 * 32 * H), w2(std::size_t(E) * H * 32);
    for (auto& v : w1) v = f32_to_f16_bits(u(rng));
    for (auto& v : w2) v = f32_to_f16_bits(u(rng));
    runs += check_variants(p, Ids::uniform, 901, fmt::format("ffn R {} given weights", R), &w1, &w2);
  }
  MESSAGE(runs << " ffn variant runs");
  CHECK(runs > 0);
}

TEST_CASE("ep: an uneven placement, one rank owning no expert") {
  if (const std::string why = ep::nccl_missing(); !why.empty()) FAIL(why);
  for (const int R : rank_counts()) {
    if (R < 2) continue;
    // Rank R-1 owns nothing; rank 0 owns most.
    std::vector<std::int32_t> place(12);
    for (std::size_t e = 0; e < place.size(); ++e) place[e] = e < 8 ? 0 : std::int32_t(e % std::size_t(R - 1));
    const ep::Problem p = ep::make_problem(R, 33, 3, 12, 7, combine::DType::bf16, 1.f, place);
    check_variants(p, Ids::dropped, 99, fmt::format("R {} uneven placement", R));
  }
}

TEST_CASE("ep: a Comm of other ranks than the problem's is refused, by whole launches and each phase alone") {
  if (const std::string why = ep::nccl_missing(); !why.empty()) FAIL(why);
  if (cuda_device_count() < 2) return;
  const ep::Problem p = ep::make_problem(2, 5, 2, 8, 16, combine::DType::bf16, 1.f);
  const Inputs in = draw(p, Ids::uniform, 5);
  const auto views = in.views();
  const DeviceCaps& caps = device_caps();
  constexpr LaunchStatus kInvalidValue = 1;  // cudaErrorInvalidValue (no CUDA header in this file)
  for (const ep::Variant& v : ep::registry().variants()) {
    if (v.not_applicable(p, caps) != nullptr) continue;
    ep::DeviceBuffers d(p, views, WorkspaceNeed::of(v, p, caps), SetOptions::checked());
    const ep::Buffers b = d.buffers(0, comm_for(1));  // one rank's Comm for two ranks' buffers
    CHECK_MESSAGE(v.launch(p, b, process_stream(), false) == kInvalidValue, v.info.name);
    if (ep::launches_per_rank(v)) CHECK_MESSAGE(ep::launch_per_rank(v, p, b, false) == kInvalidValue, v.info.name);
    for (const ep::Stage st : {ep::Stage::dispatch, ep::Stage::combine})
      CHECK_MESSAGE(ep::launch_stage(v, p, b, st, process_stream(), false) == kInvalidValue, v.info.name);
  }
  cuda_sync("after the refused launches");
}
