// Shared vocabulary of the kernel registries. Host-visible: no CUDA headers.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

struct CUstream_st;

namespace moekit {

// The same type as cudaStream_t, named without pulling in the CUDA runtime.
using Stream = CUstream_st*;

// What `moekit variants` prints about one variant.
struct VariantInfo {
  std::string_view name;         // as typed after --variant
  std::string_view description;  // one line: the idea
  std::string_view limits;       // one line: shapes it accepts ("any" if none)
};

// A registry entry. Problem and Buffers are per-op structs.
//
// Contract for launch(): asynchronous on `stream`, and capturable into a CUDA
// graph: no allocation, no synchronisation, no host<->device copies. All scratch
// memory comes from Buffers::workspace (workspace_bytes(problem) bytes, contents
// undefined on entry unless zeroed_workspace says otherwise). Errors surface
// through cudaGetLastError() after it.
template <class Problem, class Buffers>
struct Variant {
  VariantInfo info;
  // nullptr when the variant handles `p`, else a short reason ("needs E <= 64").
  const char* (*not_applicable)(const Problem& p);
  std::size_t (*workspace_bytes)(const Problem& p);
  void (*launch)(const Problem& p, const Buffers& b, Stream stream);
  // Non-null and true for `p`: the workspace must be all zero bytes before the
  // first launch, and every launch that completes leaves it all zero again
  // (kernels that agree through counters in it; the caller zeroes it once at
  // allocation, so graph replays need no memset node). Such a workspace must
  // not be shared with variants that leave data in theirs.
  bool (*zeroed_workspace)(const Problem& p) = nullptr;
};

// Whether the caller must zero the workspace once before launching v on p.
template <class V, class Problem>
bool needs_zeroed_workspace(const V& v, const Problem& p) {
  return v.zeroed_workspace != nullptr && v.zeroed_workspace(p);
}

// The entry of `registry` named `name`, or nullptr. Every family's find().
template <class V>
const V* find_variant(std::span<const V> registry, std::string_view name) {
  for (const V& v : registry)
    if (v.info.name == name) return &v;
  return nullptr;
}

}  // namespace moekit
