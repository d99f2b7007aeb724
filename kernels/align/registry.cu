// Registry of the align variants: thin launchers over the kernels in the
// .cuh headers, their limits, and the `auto` rule (docs/align.md).
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "align/align.hpp"
#include "align/baseline.cuh"
#include "align/blelloch.cuh"
#include "align/common.cuh"
#include "align/host_util.cuh"
#include "align/micro.cuh"
#include "align/onepass.cuh"
#include "align/oneshot.cuh"
#include "align/persistent.cuh"
#include "align/scatter.cuh"
#include "align/small_batch.cuh"
#include "align/tiny.cuh"
#include "align/twopass.cuh"
#include "align/vecpad.cuh"
#include "align/warpscan.cuh"

namespace moekit::align {
namespace {

using namespace detail;

cudaStream_t cu(Stream s) { return reinterpret_cast<cudaStream_t>(s); }

// Dispatch on the id dtype.
template <template <class> class F>
void by_dtype(const Problem& p, const Buffers& b, Stream s) {
  if (p.ids_int64)
    F<std::int64_t>::run(p, b, cu(s));
  else
    F<std::int32_t>::run(p, b, cu(s));
}

std::size_t cursor_workspace(const Problem& p) {
  return sizeof(int) * (static_cast<std::size_t>(p.num_experts) + 1);
}
std::size_t no_workspace(const Problem&) { return 0; }

const char* needs_smem(std::size_t bytes) {
  return bytes > device_caps().smem_optin ? "E too large for one block's shared memory" : nullptr;
}

std::size_t scan_smem(const Problem& p) {
  return sizeof(int) * (static_cast<std::size_t>(p.num_experts) + 1);
}
std::size_t blelloch_smem(const Problem& p) {
  return sizeof(int) * (static_cast<std::size_t>(next_pow2(p.num_experts)) + p.num_experts + 1);
}

// ---- baseline (0x1) -----------------------------------------------------------
template <class IdT>
struct Baseline {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    const Args a = make_args(p, b);
    int* cursor = static_cast<int*>(b.workspace);
    fill_sorted_scalar_kernel<<<clamp_grid(ceil_div<long long>(a.max_padded, 256), 1024), 256, 0,
                                s>>>(a);
    const std::size_t smem = scan_smem(p);
    allow_smem(baseline_count_kernel<IdT>, smem);
    baseline_count_kernel<IdT><<<1, kCountThreads, smem, s>>>(a, cursor);
    launch_scatter_atomic<IdT>(a, cursor, s);
  }
};
const char* baseline_na(const Problem& p) { return needs_smem(scan_smem(p)); }

// ---- small-batch (0x1 fused) --------------------------------------------------
const char* small_batch_na(const Problem& p) {
  if (p.numel > kSmallBatchMaxNumel || p.num_experts > kSmallBatchMaxExperts)
    return "needs numel < 1024 and E <= 64";
  return nullptr;
}
template <class IdT>
struct SmallBatch {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    small_batch_kernel<IdT, 0><<<1, kSmallBatchThreads, small_batch_smem(p.num_experts), s>>>(
        make_args(p, b));
  }
};

// ---- vecpad (0x2) -------------------------------------------------------------
template <class IdT>
struct Vecpad {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    const Args a = make_args(p, b);
    int* cursor = static_cast<int*>(b.workspace);
    const std::size_t smem = scan_smem(p);
    allow_smem(vecpad_count_kernel<IdT>, smem);
    vecpad_count_kernel<IdT><<<1, kCountThreads, smem, s>>>(a, cursor);
    launch_scatter_atomic<IdT>(a, cursor, s);
  }
};

// ---- blelloch (0x3) -----------------------------------------------------------
template <class IdT>
struct Blelloch {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    const Args a = make_args(p, b);
    int* cursor = static_cast<int*>(b.workspace);
    const std::size_t smem = blelloch_smem(p);
    allow_smem(blelloch_count_kernel<IdT>, smem);
    blelloch_count_kernel<IdT><<<1, kCountThreads, smem, s>>>(a, cursor, next_pow2(p.num_experts));
    launch_scatter_atomic<IdT>(a, cursor, s);
  }
};
const char* blelloch_na(const Problem& p) { return needs_smem(blelloch_smem(p)); }

// ---- warpscan (0x4) -----------------------------------------------------------
template <class IdT>
struct Warpscan {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    const Args a = make_args(p, b);
    int* cursor = static_cast<int*>(b.workspace);
    const std::size_t smem = scan_smem(p);
    allow_smem(warpscan_count_kernel<IdT, false>, smem);
    warpscan_count_kernel<IdT, false><<<1, kCountThreads, smem, s>>>(a, cursor);
    launch_scatter_atomic<IdT>(a, cursor, s);
  }
};

// ---- fill-overlap (0x5) -------------------------------------------------------
template <class IdT>
struct FillOverlap {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    const Args a = make_args(p, b);
    if (small_batch_na(p) == nullptr) {  // one launch: fill threads + compute threads
      small_batch_kernel<IdT, kOverlapFillThreads>
          <<<1, kOverlapFillThreads + kSmallBatchThreads, small_batch_smem(p.num_experts), s>>>(a);
      return;
    }
    int* cursor = static_cast<int*>(b.workspace);
    const std::size_t smem = scan_smem(p);
    allow_smem(warpscan_count_kernel<IdT, true>, smem);
    warpscan_count_kernel<IdT, true><<<2, kCountThreads, smem, s>>>(a, cursor);
    launch_scatter_atomic<IdT>(a, cursor, s);
  }
};
std::size_t fill_overlap_workspace(const Problem& p) {
  return small_batch_na(p) == nullptr ? 0 : cursor_workspace(p);
}

// ---- tiny / oneshot / persistent / stable (ours) ----------------------------------
template <class IdT>
struct Tiny {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    launch_tiny<IdT>(p, b, s);
  }
};

template <class IdT>
struct Micro {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    launch_micro<IdT>(p, b, s);
  }
};

template <class IdT>
struct Oneshot {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    launch_oneshot<IdT>(p, b, s);
  }
};

template <class IdT>
struct Persistent {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    launch_persistent<IdT>(p, b, s);
  }
};
std::size_t persistent_ws(const Problem& p) {
  return p.ids_int64 ? persistent_workspace<std::int64_t>(p)
                     : persistent_workspace<std::int32_t>(p);
}

template <class IdT>
struct OnePass {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    launch_onepass<IdT>(p, b, s);
  }
};
const char* onepass_na(const Problem& p) {
  return p.ids_int64 ? onepass_not_applicable<std::int64_t>(p)
                     : onepass_not_applicable<std::int32_t>(p);
}
bool zeroed(const Problem&) { return true; }

template <class IdT>
struct TwoPass {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    launch_twopass<IdT>(p, b, s);
  }
};
std::size_t twopass_ws(const Problem& p) {
  return p.ids_int64 ? twopass_workspace<std::int64_t>(p) : twopass_workspace<std::int32_t>(p);
}

// Stable designs by size (docs/align.md, measured in docs/bench/align.md):
// micro for decode-sized inputs (<= 32 slots), oneshot while every block can
// afford to re-read all slots (<= 8192: it beat twopass at 1024 tokens x 8 by
// 0.3-3.9 µs), then twopass (since its launch-shape fit it beats persistent
// at every measured shape with E <= 1024: E = 512, 16384 tokens 17.1 vs
// 17.8 µs); the cooperative persistent kernel only where twopass does not
// apply. From E = 4096 twopass's G x E table cap leaves it <= 8 blocks with
// one counting warp each (E = 16384, 4096 tokens: 528 µs), so there oneshot
// runs as long as it applies (43.7 µs) and persistent after it (E = 4096,
// 16384 tokens: 59.6 vs 102.8 µs).
enum class StablePath { kMicro, kOneshot, kPersistent, kTwoPass };

bool oneshot_preferred(const Problem& p) { return p.numel <= 8192; }
bool huge_experts(const Problem& p) { return p.num_experts >= 4096; }

StablePath stable_path(const Problem& p) {
  const bool one_ok = oneshot_not_applicable(p) == nullptr;
  const bool two_ok = twopass_not_applicable(p) == nullptr;
  const bool per_ok = persistent_not_applicable(p) == nullptr;
  if (micro_not_applicable(p) == nullptr) return StablePath::kMicro;
  if (one_ok && (oneshot_preferred(p) || huge_experts(p))) return StablePath::kOneshot;
  if (per_ok && huge_experts(p)) return StablePath::kPersistent;
  if (two_ok) return StablePath::kTwoPass;
  if (per_ok) return StablePath::kPersistent;
  return StablePath::kOneshot;  // applicable or nothing is
}
const char* stable_na(const Problem& p) {
  switch (stable_path(p)) {
    case StablePath::kPersistent: return persistent_not_applicable(p);
    case StablePath::kTwoPass: return twopass_not_applicable(p);
    case StablePath::kMicro: return micro_not_applicable(p);
    default: return oneshot_not_applicable(p);
  }
}
template <class IdT>
struct Stable {
  static void run(const Problem& p, const Buffers& b, cudaStream_t s) {
    switch (stable_path(p)) {
      case StablePath::kPersistent: launch_persistent<IdT>(p, b, s); break;
      case StablePath::kTwoPass: launch_twopass<IdT>(p, b, s); break;
      case StablePath::kMicro: launch_micro<IdT>(p, b, s); break;
      default: launch_oneshot<IdT>(p, b, s); break;
    }
  }
};
std::size_t stable_ws(const Problem& p) {
  switch (stable_path(p)) {
    case StablePath::kPersistent: return persistent_ws(p);
    case StablePath::kTwoPass: return twopass_ws(p);
    default: return 0;
  }
}

const Variant& auto_pick(const Problem& p);
const char* auto_na(const Problem& p) { return auto_pick(p).not_applicable(p); }
std::size_t auto_ws(const Problem& p) { return auto_pick(p).workspace_bytes(p); }
void auto_launch(const Problem& p, const Buffers& b, Stream s) { auto_pick(p).launch(p, b, s); }

bool auto_zeroed(const Problem& p);
const std::array<Variant, 14> kVariants = {{
    {{"baseline", "0x1: fill kernel; one block counts (shared atomics), serial scan; atomic scatter",
      "E <= 16384 (E+1 ints of shared memory)"},
     baseline_na, cursor_workspace, by_dtype<Baseline>},
    {{"small-batch", "0x1 fused: one block, per-thread counter rows, no atomics, one launch",
      "numel < 1024 and E <= 64"},
     small_batch_na, no_workspace, by_dtype<SmallBatch>},
    {{"vecpad", "0x2: padding fused into the count block with 16-byte stores", "as baseline"},
     baseline_na, cursor_workspace, by_dtype<Vecpad>},
    {{"blelloch", "0x3: Blelloch scan; expert_ids by binary search over all blocks",
      "E <= 16384 (next_pow2(E)+E+1 ints of shared memory)"},
     blelloch_na, cursor_workspace, by_dtype<Blelloch>},
    {{"warpscan", "0x4: two-level warp-shuffle scan (3 barriers)", "as baseline"},
     baseline_na, cursor_workspace, by_dtype<Warpscan>},
    {{"fill-overlap",
      "0x5: padding by a 2nd block (or 256 fill threads on the small path) overlapping the count",
      "as baseline; small path for numel < 1024 and E <= 64"},
     baseline_na, fill_overlap_workspace, by_dtype<FillOverlap>},
    {{"tiny",
      "ours, small inputs: one launch, every block ranks all slots (shared atomics), writes its "
      "own chunk of rows; no workspace; unstable",
      "numel <= 32768, 4*(numel+2E+1) bytes of shared memory"},
     tiny_not_applicable, no_workspace, by_dtype<Tiny>},
    {{"micro",
      "ours, decode: one launch; one warp lays out the <= 32 slots from their distinct experts "
      "(no scan over E), every block fills its rows while the ids load; stable",
      "numel <= 32"},
     micro_not_applicable, no_workspace, by_dtype<Micro>},
    {{"oneshot",
      "ours, small: one launch, every block counts all slots, blocks split the writes; stable",
      "numel <= 65535"},
     oneshot_not_applicable, no_workspace, by_dtype<Oneshot>},
    {{"persistent",
      "ours, large: one cooperative launch, per-warp rows, blocks x experts table, 2 grid "
      "barriers; stable",
      "E <= 24576"},
     persistent_not_applicable, persistent_ws, by_dtype<Persistent>},
    {{"onepass",
      "ours, mid/large: one cooperative launch, every slot loaded once; block ranks + one global "
      "atomic per (block, expert) give offsets; one grid barrier; self-clearing workspace; "
      "unstable",
      "numel <= 4 16-byte loads x 1024 threads x SMs (2.1M int32 / 1.08M int64 ids on H100), "
      "E <= 29000"},
     onepass_na, onepass_workspace, by_dtype<OnePass>, zeroed},
    {{"twopass",
      "ours, large: count + place kernels chained by PDL, blocks x experts table, no global "
      "atomics; stable",
      "E <= 19370 on H100 (12E+4 bytes of shared memory)"},
     twopass_not_applicable, twopass_ws, by_dtype<TwoPass>},
    {{"stable",
      "slots ascend inside each expert (bit-exact vs the reference): micro, oneshot or "
      "twopass by size (persistent where twopass does not apply; E >= 4096: oneshot, then "
      "persistent)",
      "E <= 19370 on H100 (24576 via persistent)"},
     stable_na, stable_ws, by_dtype<Stable>},
    {{"auto", "picks per shape from measured data (docs/align.md)", "any"},
     auto_na, auto_ws, auto_launch, auto_zeroed},
}};

const Variant& by_name(std::string_view n) {
  const Variant* v = find_variant<Variant>(kVariants, n);
  return v ? *v : kVariants[0];
}

bool auto_zeroed(const Problem& p) { return needs_zeroed_workspace(auto_pick(p), p); }

// From the H100 measurements in docs/bench/align.md (bench_align, probe_align
// onepass / twopass; B = 128, E 8..16384, 1..65536 tokens):
//  - `micro` up to 32 slots (1-4 tokens): 0-0.6 µs faster than `tiny` and
//    stable;
//  - `tiny` up to 8192 slots (4096 when E <= 16: its few shared counters
//    contend in every block; 16384 when E >= 1024, where onepass's per-block
//    E-wide passes cost more): one launch, no barrier between blocks;
//  - `onepass` beyond: one launch, each slot loaded once (4096 tokens x 8,
//    E = 256: 6.0 µs, tiny 11.9, twopass 11.0; E = 16384: 32.5 vs twopass
//    528, whose G x E table cap leaves it two blocks);
//  - where onepass does not apply (more slots than a wave of blocks holds),
//    the stable rule: twopass, persistent where twopass does not apply.
// warpscan is the last resort (E <= 16384 always fits it).
const Variant& auto_pick(const Problem& p) {
  static const Variant& micro = by_name("micro");
  static const Variant& tiny = by_name("tiny");
  static const Variant& onepass = by_name("onepass");
  static const Variant& warpscan = by_name("warpscan");
  if (micro.not_applicable(p) == nullptr) return micro;
  const int E = p.num_experts;
  const bool tiny_size = p.numel <= (E <= 16 ? 4096 : E >= 1024 ? 16384 : 8192);
  if (tiny_size && tiny.not_applicable(p) == nullptr) return tiny;
  if (onepass.not_applicable(p) == nullptr) return onepass;
  switch (stable_path(p)) {
    case StablePath::kPersistent: return by_name("persistent");
    case StablePath::kTwoPass: return by_name("twopass");
    default: break;
  }
  if (oneshot_not_applicable(p) == nullptr) return by_name("oneshot");
  if (tiny.not_applicable(p) == nullptr) return tiny;
  return warpscan;
}

}  // namespace

std::span<const Variant> variants() { return kVariants; }

const Variant* find(std::string_view name) { return find_variant<Variant>(kVariants, name); }

const Variant& pick_auto(const Problem& p) { return auto_pick(p); }

std::string_view auto_rule() {
  return "micro if numel <= 32; tiny if numel <= 8192 (4096 when E <= 16, 16384 when E >= 1024) "
         "and its shared memory fits; else onepass (one launch, one grid barrier) if numel fits "
         "one wave of its blocks; else as stable: twopass (persistent where twopass does not "
         "apply, or when E >= 4096)";
}

}  // namespace moekit::align
