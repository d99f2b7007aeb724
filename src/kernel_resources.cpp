#include <cctype>
#include "kernel_resources.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "common/device.hpp"
#include "family.hpp"

namespace moekit {
namespace {

// Generated at build time (kernels/meson.build: kernel_records).
constexpr KernelRecord kRecords[] = {
#include "kernel_records.inc"
};

// Tokens of a spec, split on spaces.
std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// Split names of records, demangled once per mangled name.
const KernelName& name_of(std::string_view mangled) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<KernelName>, std::less<>> cache;
  const std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(mangled);
  if (it == cache.end())
    it = cache.emplace(std::string(mangled), std::make_unique<KernelName>(split_kernel_name(demangle(mangled)))).first;
  return *it->second;
}

// One token that names kernels: `base` or `base<SUB>`.
bool token_matches(std::string_view token, const KernelName& k) {
  std::string_view base = token, sub;
  if (const std::size_t lt = token.find('<'); lt != std::string_view::npos && token.back() == '>') {
    base = token.substr(0, lt);
    sub = token.substr(lt + 1, token.size() - lt - 2);
  }
  return k.base == base && (sub.empty() || k.template_args.find(sub) != std::string::npos);
}

void match_into(std::string_view family, std::string_view spec, std::span<const KernelRecord> records,
                const SpecLookup& lookup, int depth, std::vector<bool>& hit, std::string& error) {
  if (depth > 8) {
    if (error.empty()) error = "references nest deeper than 8 (a cycle?)";
    return;
  }
  const auto toks = tokens(spec);
  if (toks.empty() && error.empty()) error = "names no kernels";
  for (std::string_view t : toks) {
    if (!error.empty()) return;
    std::string_view ref_family, ref_variant;
    if (t.front() == '@') {
      ref_family = family;
      ref_variant = t.substr(1);
    } else if (const std::size_t colon = t.find(':'); colon != std::string_view::npos) {
      ref_family = t.substr(0, colon);
      ref_variant = t.substr(colon + 1);
    }
    if (!ref_variant.empty()) {
      const std::optional<std::string> sub = lookup ? lookup(ref_family, ref_variant) : std::nullopt;
      if (!sub) {
        error = fmt::format("'{}': no such variant", t);
        return;
      }
      match_into(ref_family, *sub, records, lookup, depth + 1, hit, error);
      if (!error.empty()) error = fmt::format("'{}': {}", t, error);
      continue;
    }
    bool any = false;
    for (std::size_t i = 0; i < records.size(); ++i)
      if (token_matches(t, name_of(records[i].mangled))) hit[i] = any = true;
    if (!any) error = fmt::format("'{}' matches no kernel the build recorded", t);
  }
}

}  // namespace

std::span<const KernelRecord> kernel_records() { return kRecords; }

std::vector<int> record_archs(std::span<const KernelRecord> records) {
  std::vector<int> archs;
  for (const KernelRecord& r : records)
    if (std::find(archs.begin(), archs.end(), r.sm) == archs.end()) archs.push_back(r.sm);
  std::sort(archs.begin(), archs.end());
  return archs;
}

int runtime_arch(int device_sm, std::span<const int> archs) {
  int best = 0;
  for (int a : archs)
    if (a / 10 == device_sm / 10 && a <= device_sm) best = std::max(best, a);
  return best;
}

std::string demangle(std::string_view mangled) {
  const std::string m(mangled);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : m;
}

namespace {
// A mangled name __cxa_demangle refused (the toolchain cuts cubin symbols of
// CUTLASS's deep templates at 1200 characters): its leading nested name
// (_ZN 7cutlass 13device_kernel I...) as the qualified name, and the rest,
// still mangled, as the template arguments, in which a spec's `<...>` is found
// as a substring (identifiers keep their spelling when mangled).
bool split_mangled(std::string_view d, KernelName& k) {
  if (!d.starts_with("_ZN")) return false;
  std::size_t i = 3;
  std::string q;
  while (i < d.size() && std::isdigit(static_cast<unsigned char>(d[i]))) {
    std::size_t n = 0;
    while (i < d.size() && std::isdigit(static_cast<unsigned char>(d[i]))) n = n * 10 + std::size_t(d[i++] - '0');
    if (i + n > d.size()) return false;
    if (!q.empty()) q += "::";
    q += d.substr(i, n);
    i += n;
  }
  if (q.empty()) return false;
  k.qualified = q;
  const std::size_t colons = q.rfind("::");
  k.base = colons == std::string::npos ? q : q.substr(colons + 2);
  if (i < d.size() && d[i] == 'I') k.template_args = std::string(d.substr(i + 1));
  k.short_name = k.base + (k.template_args.empty() ? "" : "<...>");
  return true;
}
}  // namespace

KernelName split_kernel_name(std::string_view d) {
  KernelName k;
  if (split_mangled(d, k)) return k;
  if (d.starts_with("void ")) d.remove_prefix(5);  // a template's return type
  std::size_t end = d.find_first_of("<(");
  if (end == std::string_view::npos) end = d.size();
  k.qualified = std::string(d.substr(0, end));
  const std::size_t colons = k.qualified.rfind("::");
  k.base = colons == std::string::npos ? k.qualified : k.qualified.substr(colons + 2);
  std::size_t close = end;
  if (end < d.size() && d[end] == '<') {
    int depth = 0;
    for (std::size_t i = end; i < d.size(); ++i) {
      if (d[i] == '<') ++depth;
      if (d[i] == '>' && --depth == 0) {
        close = i + 1;
        break;
      }
    }
    k.template_args = std::string(d.substr(end + 1, close - end - 2));
  }
  k.short_name = k.base;
  k.short_name += d.substr(end, close - end);
  return k;
}

KernelMatch match_kernels(std::string_view family, std::string_view spec, std::span<const KernelRecord> records,
                          const SpecLookup& lookup) {
  KernelMatch m;
  std::vector<bool> hit(records.size(), false);
  match_into(family, spec, records, lookup, 0, hit, m.error);
  if (!m.error.empty()) return m;
  for (std::size_t i = 0; i < records.size(); ++i)
    if (hit[i]) m.records.push_back(&records[i]);
  return m;
}

namespace {
bool is_reference(std::string_view t) { return t.front() == '@' || t.find(':') != std::string_view::npos; }
std::string join_if(std::string_view spec, bool refs) {
  std::string o;
  for (std::string_view t : tokens(spec))
    if (is_reference(t) == refs) {
      if (!o.empty()) o += ' ';
      o += t;
    }
  return o;
}
}  // namespace

std::string own_kernels(std::string_view spec) { return join_if(spec, false); }
std::string referenced_variants(std::string_view spec) { return join_if(spec, true); }

std::optional<std::string> variant_spec(std::string_view family, std::string_view variant) {
  Family* fam = find_family(family);
  if (fam == nullptr) return std::nullopt;
  const DeviceCaps none;  // the rows' limits text is not read here
  std::string joined;
  for (const VariantRow& row : fam->variants(none)) {
    if (variant == "*") {
      joined += row.kernels;
      joined += ' ';
    }
    if (row.name == variant) return row.kernels;
  }
  if (variant == "*") return joined;
  return std::nullopt;
}

KernelMatch match_binary(std::string_view family, std::string_view spec) {
  return match_kernels(family, spec, kernel_records(), variant_spec);
}

KernelMatch variant_kernels(std::string_view family, std::string_view variant) {
  const std::optional<std::string> spec = variant_spec(family, variant);
  if (!spec) return {{}, fmt::format("no variant {} {}", family, variant)};
  return match_binary(family, *spec);
}

}  // namespace moekit
