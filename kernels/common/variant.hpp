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
// undefined on entry). Errors surface through cudaGetLastError() after it.
template <class Problem, class Buffers>
struct Variant {
  VariantInfo info;
  // nullptr when the variant handles `p`, else a short reason ("needs E <= 64").
  const char* (*not_applicable)(const Problem& p);
  std::size_t (*workspace_bytes)(const Problem& p);
  void (*launch)(const Problem& p, const Buffers& b, Stream stream);
};

// The entry of `registry` named `name`, or nullptr. Every family's find().
template <class V>
const V* find_variant(std::span<const V> registry, std::string_view name) {
  for (const V& v : registry)
    if (v.info.name == name) return &v;
  return nullptr;
}

}  // namespace moekit
