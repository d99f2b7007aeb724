#include "resources_view.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "errors.hpp"
#include "json.hpp"
#include "report.hpp"

namespace moekit {
namespace {

const KernelRecord* find_record(int arch, std::string_view mangled) {
  for (const KernelRecord& r : kernel_records())
    if (r.sm == arch && r.mangled == mangled) return &r;
  return nullptr;
}

// The cubin architecture the device runs (0: none, PTX JIT), or -1 without a device.
int device_arch(const DeviceCaps& caps) {
  if (!caps.present()) return -1;
  const std::vector<int> archs = record_archs(kernel_records());
  return runtime_arch(caps.arch(), archs);
}

std::string opt_int(bool has, long long v) { return has ? std::to_string(v) : std::string("null"); }

ResourceRow row_of(std::string_view op, std::string_view variant, const KernelRecord& rec) {
  ResourceRow r;
  r.op = std::string(op);
  r.variant = std::string(variant);
  r.mangled = std::string(rec.mangled);
  r.kernel = split_kernel_name(demangle(rec.mangled)).short_name;
  r.arch = rec.sm;
  r.record = &rec;
  return r;
}

void add_runtime(ResourceRow& r, const void* stub) {
  std::string why;
  r.runtime = stub != nullptr ? runtime_kernel(stub, r.block, r.dynamic_smem.value_or(0), why)
                              : runtime_kernel(r.mangled, r.block, r.dynamic_smem.value_or(0), why);
  if (!r.runtime)
    r.note = fmt::format("no runtime attributes: {}", why);
  else if (r.block == 0)
    r.note = "occupancy needs the block size, chosen at launch: see a run's report (--format json)";
}

}  // namespace

std::vector<ResourceRow> variant_resource_rows(std::string_view op, std::string_view variant, const DeviceCaps& caps) {
  const KernelMatch all = variant_kernels(op, variant);
  if (!all.error.empty()) throw InputError(fmt::format("{} {}: kernels: {}", op, variant, all.error));
  const std::string own = own_kernels(variant_spec(op, variant).value_or(""));
  std::vector<ResourceRow> rows;
  if (own.empty()) return rows;  // it launches other variants' kernels: listed under them
  const KernelMatch mine = match_binary(op, own);
  const int arch = device_arch(caps);
  for (const KernelRecord* rec : mine.records) {
    if (arch > 0 && rec->sm != arch) continue;
    ResourceRow r = row_of(op, variant, *rec);
    r.block = rec->launch_bound;
    if (arch > 0)
      add_runtime(r, nullptr);
    else
      r.note = arch < 0 ? "occupancy needs a device: the build's records" : "no cubin for this device (PTX JIT)";
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<ResourceRow> launch_resource_rows(std::string_view op, std::string_view variant,
                                              std::span<const LaunchRecord> log, const DeviceCaps& caps) {
  std::vector<ResourceRow> rows;
  std::vector<std::pair<const void*, std::pair<unsigned, std::size_t>>> seen;
  const int arch = device_arch(caps);
  for (const LaunchRecord& l : log) {
    const auto key = std::make_pair(l.kernel, std::make_pair(l.block_threads, l.dynamic_smem));
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    const std::string mangled = kernel_symbol(l.kernel);
    const KernelRecord* rec = find_record(arch, mangled);
    ResourceRow r;
    if (rec != nullptr) {
      r = row_of(op, variant, *rec);
    } else {
      r.op = std::string(op);
      r.variant = std::string(variant);
      r.mangled = mangled;
      r.kernel = split_kernel_name(demangle(mangled)).short_name;
    }
    r.block = static_cast<int>(l.block_threads);
    r.dynamic_smem = l.dynamic_smem;
    add_runtime(r, l.kernel);
    if (rec == nullptr && r.note.empty()) r.note = "no build record for this device's cubin";
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string occupancy_text(const ResourceRow& r) {
  if (!r.runtime || r.runtime->block == 0) return "-";
  const RuntimeKernel& k = *r.runtime;
  return fmt::format("{} blocks, {}/{} warps ({})", k.blocks_per_sm, k.warps_per_sm, k.max_warps_per_sm, k.limiter);
}

std::string resource_row_json(const ResourceRow& r) {
  const KernelRecord* b = r.record;
  std::string runtime = "null", occupancy = "null";
  if (r.runtime) {
    const RuntimeKernel& k = *r.runtime;
    runtime = fmt::format(
        "{{\"registers\":{},\"local_bytes\":{},\"static_smem_bytes\":{},\"max_threads_per_block\":{}}}", k.registers,
        k.local_bytes, k.static_smem, k.max_threads);
    if (k.block > 0)
      occupancy = fmt::format(
          "{{\"block\":{},\"dynamic_smem_bytes\":{},\"blocks_per_sm\":{},\"warps_per_sm\":{},\"max_warps_per_sm\":{},"
          "\"limiter\":{}}}",
          k.block, k.dynamic_smem, k.blocks_per_sm, k.warps_per_sm, k.max_warps_per_sm, json_quote(k.limiter));
  }
  return fmt::format(
      "{{\"op\":{},\"variant\":{},\"kernel\":{},\"mangled\":{},\"arch\":{},\"registers\":{},\"local_bytes\":{},"
      "\"static_smem_bytes\":{},\"launch_bound\":{},\"block\":{},\"dynamic_smem_bytes\":{},\"runtime\":{},"
      "\"occupancy\":{},\"note\":{}}}",
      json_quote(r.op), json_quote(r.variant), json_quote(r.kernel), json_quote(r.mangled),
      r.arch > 0 ? json_quote(fmt::format("sm_{}", r.arch)) : std::string("null"), opt_int(b, b ? b->registers : 0),
      opt_int(b, b ? b->local_bytes : 0), opt_int(b, b ? b->static_smem : 0), opt_int(b, b ? b->launch_bound : 0),
      opt_int(r.block > 0, r.block), opt_int(r.dynamic_smem.has_value(), static_cast<long long>(r.dynamic_smem.value_or(0))),
      runtime, occupancy, r.note.empty() ? std::string("null") : json_quote(r.note));
}

std::string resource_csv_header() {
  return "op,variant,kernel,arch,registers,local_bytes,static_smem_bytes,launch_bound,block,dynamic_smem_bytes,"
         "rt_registers,rt_local_bytes,rt_static_smem_bytes,blocks_per_sm,warps_per_sm,max_warps_per_sm,limiter,"
         "mangled,note";
}

std::string resource_row_csv(const ResourceRow& r) {
  const KernelRecord* b = r.record;
  auto cell = [](bool has, long long v) { return has ? std::to_string(v) : std::string(); };
  const RuntimeKernel* k = r.runtime ? &*r.runtime : nullptr;
  const bool occ = k != nullptr && k->block > 0;
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", csv_field(r.op),
                     csv_field(r.variant), csv_field(r.kernel), r.arch > 0 ? fmt::format("sm_{}", r.arch) : "",
                     cell(b, b ? b->registers : 0), cell(b, b ? b->local_bytes : 0), cell(b, b ? b->static_smem : 0),
                     cell(b, b ? b->launch_bound : 0), cell(r.block > 0, r.block),
                     cell(r.dynamic_smem.has_value(), static_cast<long long>(r.dynamic_smem.value_or(0))),
                     cell(k, k ? k->registers : 0), cell(k, k ? k->local_bytes : 0), cell(k, k ? k->static_smem : 0),
                     cell(occ, occ ? k->blocks_per_sm : 0), cell(occ, occ ? k->warps_per_sm : 0),
                     cell(occ, occ ? k->max_warps_per_sm : 0), occ ? csv_field(k->limiter) : "",
                     csv_field(r.mangled), csv_field(r.note));
}

}  // namespace moekit
