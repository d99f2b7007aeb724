// Shared vocabulary of the kernel registries. Host-visible: no CUDA headers.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "common/device.hpp"

struct CUstream_st;

namespace moekit {

// The same type as cudaStream_t, named without pulling in the CUDA runtime.
using Stream = CUstream_st*;

// A cudaError_t value carried without the CUDA headers (0 == cudaSuccess).
using LaunchStatus = int;

// What `moekit variants` prints about one variant.
struct VariantInfo {
  std::string_view name;         // as typed after --variant; says what it does
  std::string_view description;  // one line: the idea
  // The __global__ function templates its launches use, space-separated, by
  // unqualified name: `micro_kernel`; `name<SUB>`: only instantiations whose
  // template arguments contain SUB; `@v`: every kernel of variant v of this
  // family; `f:v` / `f:*`: of variant v / every variant of family f. Matched
  // against the build's resource records (src/kernel_resources.hpp; a CPU
  // test requires every entry to match at least one).
  std::string_view kernels;
};

// A registry entry. Problem and Buffers are per-family structs.
//
// Contract for launch(p, b, stream, pdl): asynchronous on `stream`, and
// capturable into a CUDA graph: no allocation, no synchronisation, no
// host<->device copies (the one exception: a host_sync variant, below). All scratch memory comes from Buffers::workspace
// (workspace_bytes(problem, caps) bytes, contents undefined on entry unless
// zeroed_workspace says otherwise). Returns the first CUDA error of its
// launches (0: all were issued), never erasing an error produced before it.
//
// `pdl` is how the launch is made, not what is computed, so it travels beside
// the stream rather than in the Problem (as FlashInfer's enable_pdl does):
// true = its kernels launch with programmatic dependent launch
// (primitives/pdl.cuh) and may overlap the previous kernel's tail. The caller
// passes true only where the device has PDL (DeviceCaps::pdl; the CLI: --pdl
// on, decided once in src/run.cpp). A launch that composes others (passes
// around a variant, another family's pick, stages) passes it down. A variant
// that launches with PDL whatever `pdl` says says so in always_pdl.
template <class Problem, class Buffers>
struct Variant {
  VariantInfo info;
  // Output order promise: true = output identical bit for bit with the CPU
  // reference (e.g. items keep their input order inside each output group). The CLI, GPU tests and
  // benches read this field, nothing else.
  bool stable_order = false;
  // Limits as text, computed from the constants and policy the kernel uses:
  // numbers for `caps` when caps.present(), else the formula.
  std::string (*limits)(const DeviceCaps& caps);
  // nullptr when the variant handles `p` on this device, else a short reason.
  // Device-independent limits are checked even without a device, so a
  // CPU-only run rejects what a GPU run would.
  const char* (*not_applicable)(const Problem& p, const DeviceCaps& caps);
  std::size_t (*workspace_bytes)(const Problem& p, const DeviceCaps& caps);
  LaunchStatus (*launch)(const Problem& p, const Buffers& b, Stream stream, bool pdl);
  // Non-null and true for `p`: the workspace must be all zero bytes before the
  // first launch, and every launch that completes leaves it all zero again
  // (kernels that agree through counters in it; the caller zeroes it once at
  // allocation, so graph replays need no memset node). Such a workspace must
  // not be shared with variants that leave data in theirs.
  bool (*zeroed_workspace)(const Problem& p, const DeviceCaps& caps) = nullptr;
  // True: launch() sets the PDL attribute whatever its `pdl` argument says
  // (a variant named after the mode). The run report's "pdl" reads it
  // (launches_with_pdl below), nothing else.
  bool always_pdl = false;
  // True: launch() waits on the device from the host (it copies sizes the
  // device computed back to the host, as a vendor library's grouped GEMM that
  // takes its problem shapes on the host must), so it cannot be captured into
  // a CUDA graph and refuses to run inside a capture. The run skeleton times
  // such a variant with events around each launch instead of graph replays
  // (timing_options, src/driver.hpp) and says so in the report's notes; a
  // composed launch (a graph of several stages) must not contain one.
  bool host_sync = false;
};

// Whether v's launches carry the PDL attribute when launched with `pdl` on a
// device with `caps` (the attribute does nothing where the device lacks PDL,
// so there the answer is false): what the run report's "pdl" says.
template <class V>
bool launches_with_pdl(const V& v, bool pdl, const DeviceCaps& caps) {
  return caps.pdl && (pdl || v.always_pdl);
}

// Whether the caller must zero the workspace once before launching v on p.
template <class V, class Problem>
bool needs_zeroed_workspace(const V& v, const Problem& p, const DeviceCaps& caps) {
  return v.zeroed_workspace != nullptr && v.zeroed_workspace(p, caps);
}

// The entry of `registry` named `name`, or nullptr (no fallback anywhere).
template <class V>
const V* find_variant(std::span<const V> registry, std::string_view name) {
  for (const V& v : registry)
    if (v.info.name == name) return &v;
  return nullptr;
}

}  // namespace moekit
