// What the compiler made of moekit's own kernels, recorded at build time
// (kernels/resource_records.py reads the kernel libraries' fatbins), and which
// of them a variant launches: the `kernels` spec of its registry entry
// (common/variant.hpp). CUDA-free; the runtime side (attributes and occupancy
// on a GPU) is kernel_occupancy.hpp. docs/resources.md says how to read them.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moekit {

// One kernel instantiation in one cubin of the binary.
struct KernelRecord {
  int sm = 0;                // cubin architecture: 90 for sm_90
  std::string_view mangled;  // the kernel's symbol, as cuobjdump, ncu and nsys name it
  int registers = 0;         // per thread
  int local_bytes = 0;       // stack frame per thread (local arrays and register spills)
  int static_smem = 0;       // static shared memory per block, bytes
  int launch_bound = 0;      // __launch_bounds__ threads per block; 0: none declared
};

// The build's records, sorted by (sm, mangled name).
std::span<const KernelRecord> kernel_records();
// The architectures the build compiled cubins for, ascending.
std::vector<int> record_archs(std::span<const KernelRecord> records);
// The cubin architecture a device of compute capability `device_sm` runs from
// `archs`: the newest with the same major version not above it; 0 when none
// does (the runtime would JIT the PTX, which has no records).
int runtime_arch(int device_sm, std::span<const int> archs);

// The demangled name, or the mangled text where it does not demangle.
std::string demangle(std::string_view mangled);

// The parts of a demangled kernel name a `kernels` spec matches:
// "void moekit::f::detail::ranks_kernel<int, 256>(Args, int)" has qualified
// "moekit::f::detail::ranks_kernel", base "ranks_kernel", template_args
// "int, 256" and short_name "ranks_kernel<int, 256>".
struct KernelName {
  std::string qualified, base, template_args, short_name;
};
KernelName split_kernel_name(std::string_view demangled);

// Another variant's spec for `@v` and `f:v` tokens; `v` "*" joins every
// variant's spec of family f. nullopt: no such family or variant.
using SpecLookup = std::function<std::optional<std::string>(std::string_view family, std::string_view variant)>;

struct KernelMatch {
  std::vector<const KernelRecord*> records;  // distinct, in the order of `records`
  std::string error;                         // empty, or what in the spec matched nothing
};

// The records `spec` (a variant's `kernels`, of family `family`) names. Every
// token must match at least one record, and an empty spec is an error: a
// variant whose kernels the build did not record fails, not passes quietly.
KernelMatch match_kernels(std::string_view family, std::string_view spec, std::span<const KernelRecord> records,
                          const SpecLookup& lookup);

// The spec without its `@v` / `f:v` references: the kernels the variant's own
// launchers name (what `moekit variants --resources` lists under it), and the
// references alone.
std::string own_kernels(std::string_view spec);
std::string referenced_variants(std::string_view spec);

// The registered `kernels` spec of `variant` of `family` (a command name:
// family.hpp); variant "*" joins every variant's. nullopt: unknown.
std::optional<std::string> variant_spec(std::string_view family, std::string_view variant);
// match_kernels against the binary's records, references resolved through
// variant_spec.
KernelMatch match_binary(std::string_view family, std::string_view spec);
KernelMatch variant_kernels(std::string_view family, std::string_view variant);

}  // namespace moekit
