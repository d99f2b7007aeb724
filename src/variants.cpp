// `moekit variants`: every family's registered variants, their limits on this
// device (formulas without one) and the auto rule, all read from the registries.
#include <fmt/format.h>

#include <algorithm>

#include "commands.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "family.hpp"

namespace moekit {
namespace {

std::string jq(std::string_view s) {
  std::string o = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    o += ch;
  }
  return o + "\"";
}

}  // namespace

int run_variants(const std::string& op, const std::string& format) {
  Family* only = nullptr;
  if (!op.empty()) {
    only = find_family(op);
    std::string names;
    for (const auto& f : families()) names += (names.empty() ? "" : ", ") + std::string(f->command());
    if (!only) throw InputError(fmt::format("variants: unknown op '{}' ({})", printable(op), names));
  }
  const DeviceCaps& caps = device_caps();
  for (const auto& f : families()) {
    if (only && only != f.get()) continue;
    std::vector<VariantRow> rows = f->variants(caps);
    std::erase_if(rows, [](const VariantRow& v) { return v.name == "auto"; });  // listed once, with its rule
    const std::string rule = f->auto_rule();
    const std::string fop(f->command());
    if (format == "json") {
      for (auto& v : rows)
        fmt::print("{{\"op\":{},\"variant\":{},\"description\":{},\"limits\":{},\"stable_order\":{}}}\n", jq(fop),
                   jq(v.name), jq(v.description), jq(v.limits), v.stable_order);
      fmt::print("{{\"op\":{},\"variant\":\"auto\",\"description\":{},\"limits\":\"any\",\"stable_order\":false}}\n",
                 jq(fop), jq(rule));
      continue;
    }
    std::size_t w = 4;
    for (auto& v : rows) w = std::max(w, v.name.size());
    fmt::print("{}\n", fop);
    for (auto& v : rows) {
      fmt::print("  {:<{}}  {}\n", v.name, w, v.description);
      fmt::print("  {:<{}}  limits: {}{}\n", "", w, v.limits, v.stable_order ? "; stable order" : "");
    }
    fmt::print("  {:<{}}  {}\n\n", "auto", w, rule);
  }
  return kOk;
}

}  // namespace moekit
