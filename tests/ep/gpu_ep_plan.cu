// GPU test of ep's sender plan (kernels/ep/plan.cuh) against a CPU plan
// written from a2a.cuh's layout rules, array by array: send_tok, send_aux,
// slot_pos, counts, partial_inverse and ones. gpu_ep checks the plan only
// through whole launches, whose identity experts return the same row (the
// token's) for every slot a token sends to one rank, so a slot_pos that
// swapped two such slots would pass there; here it cannot.
//
// On one GPU: the plan needs the rank count only as a number (R up to 8)
// and a placement. Both kernels' contracts: the one-block plan_kernel for
// T <= 256, the two passes for every T (0 included), past 256 blocks too;
// K {1, 7, 8, 11, 255} (groups of 8 ids, the byte counter's limit), dropped
// ids (-1 and >= E), an uneven placement, outputs filled with 0xCD first.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_util.hpp"
#include "ep/plan.cuh"
#include "primitives/launch.cuh"

using namespace moekit;

namespace {

constexpr int kThreads = 256;

// The pieces streamed into one string (fmt's compile-time format strings do
// not build under nvcc).
template <class... A>
std::string str(const A&... a) {
  std::ostringstream o;
  (o << ... << a);
  return o.str();
}

struct Plan {
  std::vector<std::int32_t> send_tok, send_aux, slot_pos, counts, partial_inverse;
  std::vector<float> ones;
};

// The CPU plan: tokens in order, each token's slots in order; a row goes to
// d once per token that has a slot there.
Plan cpu_plan(const std::vector<std::int32_t>& ids, const std::vector<std::int32_t>& placement, std::int64_t T,
              int K, int E, int R, int rank) {
  Plan p;
  p.send_tok.assign(std::size_t(R * T), -7);
  p.send_aux.assign(std::size_t(2 * R * T), -7);
  p.slot_pos.assign(std::size_t(T * K), -7);
  p.counts.assign(std::size_t(2 * R), 0);
  p.partial_inverse.assign(std::size_t(T * R), -7);
  p.ones.assign(std::size_t(T * R), 1.0f);
  std::vector<std::int64_t> rows(std::size_t(R), 0), slots(std::size_t(R), 0);
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<std::int64_t> first(slots);  // the slot counts before this token
    std::vector<bool> to(std::size_t(R), false);
    for (int j = 0; j < K; ++j) {
      const std::int32_t e = ids[std::size_t(t * K + j)];
      if (e < 0 || e >= E) {
        p.slot_pos[std::size_t(t * K + j)] = -1;
        continue;
      }
      const int d = placement[std::size_t(e)];
      p.slot_pos[std::size_t(t * K + j)] = std::int32_t(d * T * K + slots[std::size_t(d)]++);
      to[std::size_t(d)] = true;
    }
    for (int d = 0; d < R; ++d) {
      p.partial_inverse[std::size_t(t * R + d)] = to[std::size_t(d)] ? std::int32_t(d * T + t) : -1;
      if (!to[std::size_t(d)]) continue;
      const std::int64_t q = d * T + rows[std::size_t(d)]++;
      p.send_tok[std::size_t(q)] = std::int32_t(t);
      p.send_aux[std::size_t(2 * q)] = std::int32_t(first[std::size_t(d)]);
      p.send_aux[std::size_t(2 * q + 1)] = rank;
    }
  }
  for (int d = 0; d < R; ++d) {
    p.counts[std::size_t(2 * d)] = std::int32_t(rows[std::size_t(d)]);
    p.counts[std::size_t(2 * d + 1)] = std::int32_t(slots[std::size_t(d)]);
  }
  return p;
}

template <class V>
std::vector<V> down(const DeviceBuffer& b, std::size_t n) {
  std::vector<V> v(n);
  if (n > 0) b.download(v.data(), n * sizeof(V));
  return v;
}

// "" or the first difference of the GPU plan from the CPU's.
std::string compare(const Plan& want, const DeviceBuffer& tok, const DeviceBuffer& aux, const DeviceBuffer& pos,
                    const DeviceBuffer& counts, const DeviceBuffer& pinv, const DeviceBuffer& ones, std::int64_t T,
                    int K, int R) {
  const auto c = down<std::int32_t>(counts, std::size_t(2 * R));
  for (int i = 0; i < 2 * R; ++i)
    if (c[std::size_t(i)] != want.counts[std::size_t(i)])
      return str("counts[", i, "] = ", c[std::size_t(i)], ", expected ", want.counts[std::size_t(i)]);
  const auto st = down<std::int32_t>(tok, std::size_t(R * T));
  const auto sa = down<std::int32_t>(aux, std::size_t(2 * R * T));
  for (int d = 0; d < R; ++d)
    for (std::int64_t i = 0; i < want.counts[std::size_t(2 * d)]; ++i) {
      const std::size_t q = std::size_t(d * T + i);
      if (st[q] != want.send_tok[q]) return str("send_tok[", q, "] = ", st[q], ", expected ", want.send_tok[q]);
      for (int h = 0; h < 2; ++h)
        if (sa[2 * q + h] != want.send_aux[2 * q + h])
          return str("send_aux[", 2 * q + h, "] = ", sa[2 * q + h], ", expected ", want.send_aux[2 * q + h]);
    }
  const auto sp = down<std::int32_t>(pos, std::size_t(T * K));
  for (std::size_t i = 0; i < sp.size(); ++i)
    if (sp[i] != want.slot_pos[i]) return str("slot_pos[", i, "] = ", sp[i], ", expected ", want.slot_pos[i]);
  const auto pi = down<std::int32_t>(pinv, std::size_t(T * R));
  const auto on = down<float>(ones, std::size_t(T * R));
  for (std::size_t i = 0; i < pi.size(); ++i) {
    if (pi[i] != want.partial_inverse[i])
      return str("partial_inverse[", i, "] = ", pi[i], ", expected ", want.partial_inverse[i]);
    if (on[i] != 1.0f) return str("ones[", i, "] = ", on[i]);
  }
  return "";
}

// One plan on the GPU (`two_pass`: the count and place kernels, else the one
// block) and its comparison with the CPU plan.
std::string run_plan(std::int64_t T, int K, int E, int R, int rank, bool two_pass, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> placement(static_cast<std::size_t>(E));
  // From R 3 on, rank R - 1 owns nothing.
  for (auto& r : placement) r = std::int32_t(rng() % std::uint64_t(R >= 3 ? R - 1 : R));
  std::vector<std::int32_t> ids(std::size_t(T * K));
  for (auto& e : ids) {
    const std::uint64_t x = rng() % 16;
    e = x == 0 ? -1 : x == 1 ? E + std::int32_t(rng() % 3) : std::int32_t(rng() % std::uint64_t(E));
  }
  const Plan want = cpu_plan(ids, placement, T, K, E, R, rank);

  const auto bytes = [](std::int64_t n, std::size_t each) { return std::max<std::size_t>(std::size_t(n) * each, 4); };
  DeviceBuffer d_ids(bytes(T * K, 4)), d_place(bytes(E, 4)), tok(bytes(R * T, 4)), aux(bytes(2 * R * T, 4)),
      pos(bytes(T * K, 4)), counts(bytes(2 * R, 4)), pinv(bytes(T * R, 4)), ones(bytes(T * R, 4));
  // At least one block: T 0 still launches a grid of one, whose block writes its sums.
  const std::int64_t blocks = std::max<std::int64_t>((T + kThreads - 1) / kThreads, 1);
  DeviceBuffer totals(bytes(blocks * ep::kMaxRanks, 8));
  for (DeviceBuffer* b : {&tok, &aux, &pos, &counts, &pinv, &ones, &totals}) b->fill_bytes(0xCD);
  if (T * K > 0) d_ids.upload(ids.data(), ids.size() * 4);
  d_place.upload(placement.data(), placement.size() * 4);
  const ep::detail::PlanArgs a{d_ids.as<std::int32_t>(), d_place.as<std::int32_t>(), T, K, E, R, rank,
                               tok.as<std::int32_t>(), aux.as<std::int32_t>(), pos.as<std::int32_t>(),
                               counts.as<std::int32_t>(), pinv.as<std::int32_t>(), ones.as<float>(),
                               totals.as<unsigned long long>()};
  const Stream s = process_stream();
  if (two_pass) {
    const unsigned g = unsigned(blocks);
    cuda_check(prim::launch_ex(ep::detail::plan_count_kernel<kThreads>, g, kThreads, 0, s, prim::LaunchAttrs{}, a),
               "plan_count_kernel");
    cuda_check(prim::launch_ex(ep::detail::plan_place_kernel<kThreads>, g, kThreads, 0, s, prim::pdl_attrs(true), a),
               "plan_place_kernel");
  } else {
    cuda_check(prim::launch_ex(ep::detail::plan_kernel<kThreads>, 1, kThreads, 0, s, prim::LaunchAttrs{}, a),
               "plan_kernel");
  }
  cuda_sync();
  return compare(want, tok, aux, pos, counts, pinv, ones, T, K, R);
}

}  // namespace

TEST_CASE("ep plan vs a CPU plan") {
  int runs = 0;
  std::uint64_t seed = 7;
  for (const std::int64_t T : {0, 1, 5, 255, 256, 257, 300, 1500, 66000})
    for (const int K : {1, 7, 8, 11, 255})
      for (const int R : {1, 2, 3, 8}) {
        if (T * K > 2'000'000 || (K == 255 && R != 8)) continue;  // the largest shapes once
        const int E = K == 255 ? 512 : 64;
        for (const bool two_pass : {false, true}) {
          if (!two_pass && T > kThreads) continue;  // one block plans at most kThreads tokens
          const std::string why = run_plan(T, K, E, R, R - 1, two_pass, ++seed);
          CHECK_MESSAGE(why.empty(), str("T ", T, " K ", K, " R ", R, " ", two_pass ? "two passes" : "one block", ": ", why));
          ++runs;
        }
      }
  MESSAGE(runs << " plans");
  CHECK(runs > 0);
}

// The comparison rejects a plan that swaps two slots a token sends to the
// same rank (what gpu_ep's identity experts cannot see).
TEST_CASE("ep plan comparison rejects swapped slots") {
  const std::int64_t T = 3;
  const int K = 2, E = 4, R = 2;
  const std::vector<std::int32_t> ids{0, 1, 2, 3, 1, 0}, placement{0, 0, 1, 1};
  Plan want = cpu_plan(ids, placement, T, K, E, R, 0);
  // Hand-listed: token 0's slots 0 and 1 both go to rank 0 at places 0 and 1.
  CHECK(want.slot_pos[0] == 0);
  CHECK(want.slot_pos[1] == 1);
  CHECK(want.slot_pos[2] == 1 * T * K + 0);
  CHECK(want.counts == std::vector<std::int32_t>{2, 4, 1, 2});
  DeviceBuffer tok(R * T * 4), aux(2 * R * T * 4), pos(T * K * 4), counts(2 * R * 4), pinv(T * R * 4),
      ones(T * R * 4);
  Plan got = want;
  std::swap(got.slot_pos[0], got.slot_pos[1]);
  tok.upload(got.send_tok.data(), tok.size());
  aux.upload(got.send_aux.data(), aux.size());
  pos.upload(got.slot_pos.data(), pos.size());
  counts.upload(got.counts.data(), counts.size());
  pinv.upload(got.partial_inverse.data(), pinv.size());
  ones.upload(got.ones.data(), ones.size());
  CHECK(compare(want, tok, aux, pos, counts, pinv, ones, T, K, R).starts_with("slot_pos[0] = 1"));
  std::swap(got.slot_pos[0], got.slot_pos[1]);
  pos.upload(got.slot_pos.data(), pos.size());
  CHECK(compare(want, tok, aux, pos, counts, pinv, ones, T, K, R).empty());
}
