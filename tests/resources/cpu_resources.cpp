// The build's kernel resource records against the registries: every
// registered variant of every family names kernels the build recorded, for
// every architecture it compiled; and the matcher itself on hand-made records
// (it must reject a variant that names nothing, or nothing the build has).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "family.hpp"
#include "kernel_resources.hpp"
#include "self_symbols.hpp"

using namespace moekit;

TEST_CASE("every registered variant of every family has resource records for every built architecture") {
  const std::vector<int> archs = record_archs(kernel_records());
  REQUIRE(!archs.empty());
  int variants = 0;
  for (const auto& f : families()) {
    const std::string op(f->command());
    for (const VariantRow& v : f->variants(DeviceCaps{})) {
      CAPTURE(op);
      CAPTURE(v.name);
      CAPTURE(v.kernels);
      const KernelMatch m = variant_kernels(op, v.name);
      CHECK(m.error == "");
      for (int arch : archs) {
        CAPTURE(arch);
        CHECK(std::any_of(m.records.begin(), m.records.end(), [&](const KernelRecord* r) { return r->sm == arch; }));
      }
      ++variants;
    }
  }
  CHECK(variants >= static_cast<int>(families().size()));
}

TEST_CASE("records are plausible: registers in 1..255, launch bounds within 1024 threads") {
  for (const KernelRecord& r : kernel_records()) {
    CAPTURE(r.mangled);
    CHECK(r.sm >= 50);
    CHECK(r.registers >= 1);
    CHECK(r.registers <= 255);
    CHECK(r.local_bytes >= 0);
    CHECK(r.static_smem >= 0);
    CHECK(r.launch_bound >= 0);
    CHECK(r.launch_bound <= 1024);
  }
}

// On a GPU, runtime attributes and occupancy need each kernel's host stub
// (kernel_occupancy.cu): this executable links the same kernels, so its
// symbol table must have a stub for every record.
TEST_CASE("every recorded kernel has a host stub in the executable's symbol table") {
  int missing = 0;
  for (const KernelRecord& r : kernel_records()) {
    bool found = false;
    for (const std::string& n : host_stub_names(r.mangled)) {
      std::string why;
      if (self_function(n, why) != nullptr) found = true;
    }
    if (!found && ++missing <= 5) MESSAGE("no host stub: " << demangle(r.mangled));
  }
  CHECK(missing == 0);
}

TEST_CASE("host_stub_names: the name, then an internal-linkage L before each name") {
  const std::vector<std::string> n = host_stub_names("_ZN1k11scan_kernelIiEEvv");
  CHECK(n.front() == "_ZN1k11scan_kernelIiEEvv");
  CHECK(std::find(n.begin(), n.end(), "_ZN1kL11scan_kernelIiEEvv") != n.end());
  CHECK(std::find(n.begin(), n.end(), "_ZNL1k11scan_kernelIiEEvv") != n.end());
  CHECK(std::find(n.begin(), n.end(), "_ZN1k1L1scan_kernelIiEEvv") == n.end());  // never inside a number
  std::string why;
  CHECK(self_function("_ZN1k11no_such_functionEv", why) == nullptr);
  CHECK(why != "");
}

namespace {

// void k::scan_kernel<int>(), void k::scan_kernel<long>(), void k::place_kernel<int, true>()
constexpr KernelRecord kFake[] = {
    {90, "_ZN1k11scan_kernelIiEEvv", 32, 0, 0, 256},
    {90, "_ZN1k11scan_kernelIlEEvv", 40, 16, 0, 256},
    {80, "_ZN1k11scan_kernelIiEEvv", 30, 0, 0, 256},
    {90, "_ZN1k12place_kernelIiLb1EEEvv", 24, 0, 512, 0},
};

std::optional<std::string> fake_lookup(std::string_view f, std::string_view v) {
  if (f == "fam" && v == "scan") return std::string("scan_kernel");
  if (f == "fam" && v == "both") return std::string("@scan place_kernel");
  if (f == "other" && v == "x") return std::string("place_kernel");
  if (f == "fam" && v == "loop") return std::string("@loop");
  return std::nullopt;
}

std::size_t count(std::string_view spec) {
  const KernelMatch m = match_kernels("fam", spec, kFake, fake_lookup);
  REQUIRE(m.error == "");
  return m.records.size();
}

std::string error_of(std::string_view spec) { return match_kernels("fam", spec, kFake, fake_lookup).error; }

}  // namespace

TEST_CASE("kernel specs match by base name, template arguments and references") {
  CHECK(count("scan_kernel") == 3);
  CHECK(count("scan_kernel<long>") == 1);
  CHECK(count("place_kernel") == 1);
  CHECK(count("@scan") == 3);
  CHECK(count("@both") == 4);
  CHECK(count("other:x scan_kernel<long>") == 2);
  CHECK(count("scan_kernel scan_kernel") == 3);  // distinct records
}

TEST_CASE("the matcher rejects a variant with no records") {
  CHECK(error_of("") == "names no kernels");
  CHECK(error_of("   ") == "names no kernels");
  CHECK(error_of("missing_kernel").find("'missing_kernel' matches no kernel") == 0);
  CHECK(error_of("scan_kernel missing_kernel") != "");  // one good token does not excuse a bad one
  CHECK(error_of("scan_kernel<short>") != "");
  CHECK(error_of("kernel") != "");  // base names match whole, not as substrings
  CHECK(error_of("@nope") == "'@nope': no such variant");
  CHECK(error_of("other:nope") == "'other:nope': no such variant");
  CHECK(error_of("@loop") != "");  // a cycle ends in an error, not a hang
  // And the real records: a spec naming no kernel of the build fails.
  CHECK(match_kernels("fam", "no_such_kernel_anywhere", kernel_records(), nullptr).error != "");
}

TEST_CASE("split_kernel_name") {
  const KernelName k = split_kernel_name("void moekit::f::detail::ranks_kernel<int, (moekit::f::Kind)1, A<B> >(Args, int)");
  CHECK(k.qualified == "moekit::f::detail::ranks_kernel");
  CHECK(k.base == "ranks_kernel");
  CHECK(k.template_args == "int, (moekit::f::Kind)1, A<B> ");
  CHECK(k.short_name == "ranks_kernel<int, (moekit::f::Kind)1, A<B> >");
  const KernelName plain = split_kernel_name("moekit::f::detail::fill_kernel(int*, long)");
  CHECK(plain.base == "fill_kernel");
  CHECK(plain.template_args == "");
  CHECK(plain.short_name == "fill_kernel");
  CHECK(demangle("_ZN1k11scan_kernelIlEEvv") == "void k::scan_kernel<long>()");
  CHECK(demangle("not_mangled") == "not_mangled");
}

TEST_CASE("runtime_arch: the newest cubin of the device's major version not above it") {
  const int both[] = {80, 90};
  const int ampere[] = {80, 86};
  CHECK(runtime_arch(90, both) == 90);
  CHECK(runtime_arch(80, both) == 80);
  CHECK(runtime_arch(89, both) == 80);
  CHECK(runtime_arch(86, ampere) == 86);
  CHECK(runtime_arch(87, ampere) == 86);
  CHECK(runtime_arch(75, both) == 0);
  CHECK(runtime_arch(100, both) == 0);  // sm_100 JITs the PTX
}

TEST_CASE("own_kernels and referenced_variants split a spec") {
  CHECK(own_kernels("x:auto a_kernel @v b_kernel<int>") == "a_kernel b_kernel<int>");
  CHECK(referenced_variants("x:auto a_kernel @v b_kernel<int>") == "x:auto @v");
}
