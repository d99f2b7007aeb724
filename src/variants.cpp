// `moekit variants`: every family's registered variants, their limits on this
// device (formulas without one) and the auto rule, all read from the registries.
#include <fmt/format.h>

#include <algorithm>

#include "commands.hpp"
#include "display.hpp"
#include "errors.hpp"
#include "family.hpp"
#include "kernel_resources.hpp"
#include "resources_view.hpp"

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

// `--resources`: one row per (variant, kernel) of every variant with kernels
// of its own; variants that only launch others' kernels say whose.
void print_resources(const Family& f, const std::string& format, const DeviceCaps& caps) {
  const std::string fop(f.command());
  std::vector<ResourceRow> all;
  std::vector<std::pair<std::string, std::string>> delegating;  // variant, whose kernels it launches too
  for (const VariantRow& v : f.variants(caps)) {
    std::vector<ResourceRow> rows = variant_resource_rows(fop, v.name, caps);
    if (const std::string refs = referenced_variants(v.kernels); !refs.empty())
      delegating.emplace_back(v.name, fmt::format("{}launches the kernels of {}", rows.empty() ? "" : "also ", refs));
    for (auto& r : rows) all.push_back(std::move(r));
  }
  if (format == "json") {
    for (const auto& r : all) fmt::print("{}\n", resource_row_json(r));
    return;
  }
  if (format == "csv") {
    for (const auto& r : all) fmt::print("{}\n", resource_row_csv(r));
    return;
  }
  std::size_t wv = 7, wo = 9;
  for (const auto& r : all) {
    wv = std::max(wv, r.variant.size());
    wo = std::max(wo, occupancy_text(r).size());
  }
  fmt::print("{}\n  {:<{}}  {:<5}  {:>4}  {:>5}  {:>6}  {:>5}  {:<{}}  {}\n", fop, "variant", wv, "arch", "regs", "local",
             "smem", "block", "occupancy", wo, "kernel");
  for (const auto& r : all) {
    const KernelRecord* b = r.record;
    fmt::print("  {:<{}}  {:<5}  {:>4}  {:>5}  {:>6}  {:>5}  {:<{}}  {}\n", r.variant, wv,
               r.arch > 0 ? fmt::format("sm_{}", r.arch) : "-", b ? std::to_string(b->registers) : "-",
               b ? std::to_string(b->local_bytes) : "-", b ? std::to_string(b->static_smem) : "-",
               r.block > 0 ? std::to_string(r.block) : "-", occupancy_text(r), wo, r.kernel);
  }
  for (const auto& [name, what] : delegating) fmt::print("  {:<{}}  {}\n", name, wv, what);
  const bool any_runtime = std::any_of(all.begin(), all.end(), [](const ResourceRow& r) { return r.runtime; });
  if (!caps.present())
    fmt::print("  (the build's records: regs per thread, local bytes per thread (stack frame: spills and local "
               "arrays), static smem bytes per block, block = __launch_bounds__; occupancy needs a device)\n");
  else if (any_runtime)
    fmt::print("  (on {}; block = __launch_bounds__, dynamic shared memory not counted; a run's --format json "
               "report has each launch's own)\n",
               caps.name);
  fmt::print("\n");
}

}  // namespace

int run_variants(const std::string& op, const std::string& format, bool resources) {
  Family* only = nullptr;
  if (!op.empty()) {
    only = find_family(op);
    std::string names;
    for (const auto& f : families()) names += (names.empty() ? "" : ", ") + std::string(f->command());
    if (!only) throw InputError(fmt::format("variants: unknown op '{}' ({})", printable(op), names));
  }
  if (format == "csv" && !resources) throw InputError("variants: --format csv needs --resources");
  const DeviceCaps& caps = device_caps();
  if (resources && format == "csv") fmt::print("{}\n", resource_csv_header());
  for (const auto& f : families()) {
    if (only && only != f.get()) continue;
    if (resources) {
      print_resources(*f, format, caps);
      continue;
    }
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
