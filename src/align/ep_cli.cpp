// --expert-map, --invalid, --map-semantics (ep_cli.hpp; docs/align.md).
#include "align/ep_cli.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "display.hpp"
#include "errors.hpp"
#include "npy.hpp"

namespace moekit::align {

namespace {

template <std::size_t N>
std::vector<std::string> names(const std::array<std::string_view, N>& a) {
  return {a.begin(), a.end()};
}

std::string joined(const std::vector<std::string>& v, const char* last) {
  std::string o;
  for (std::size_t i = 0; i < v.size(); ++i) o += (i == 0 ? "" : i + 1 == v.size() ? last : ", ") + v[i];
  return o;
}

}  // namespace

void add_ep_options(CLI::App& s, EpArgs& a, bool ignore_invalid_alias) {
  s.add_option("--expert-map", a.expert_map,
               "int32 expert map [global experts] -> local expert, -1 = not local; read per --map-semantics");
  auto* inv = s.add_option("--invalid", a.invalid,
                           "what becomes of a slot whose id is -1 or out of range (or, with a local map, not "
                           "local): reject (exit 2; slots mapped to -1 are dropped), drop (no row) or bucket "
                           "(SGLang's expert parallelism: one more group after the E experts, padded to B, its "
                           "blocks' expert_ids -1)")
                  ->check(CLI::IsMember(names(kInvalidNames)))
                  ->capture_default_str();
  s.add_option("--map-semantics", a.map_semantics,
               "how --expert-map is read: local (default: ids map to local experts 0..E-1 first, E = the local "
               "count) or vllm (E = the global count = the map's length; align per global expert, then "
               "expert_ids = map[expert_ids], -1 for blocks of non-local experts)")
      ->check(CLI::IsMember(names(kMapSemanticsNames)))
      ->capture_default_str();
  if (ignore_invalid_alias)
    s.add_flag("--ignore-invalid", a.ignore_invalid, "deprecated alias of --invalid drop")->excludes(inv);
}

Ep read_ep(const EpArgs& a, std::int32_t num_experts) {
  Ep ep;
  // CLI11 has checked the names; parse them again, so a caller that did not
  // go through it still gets a one-line error.
  const auto inv = parse_invalid(a.invalid);
  const auto sem = parse_map_semantics(a.map_semantics);
  if (!inv)
    throw InputError(fmt::format("--invalid must be {} (got '{}')", joined(names(kInvalidNames), " or "),
                                 printable(a.invalid)));
  if (!sem)
    throw InputError(fmt::format("--map-semantics must be {} (got '{}')", joined(names(kMapSemanticsNames), " or "),
                                 printable(a.map_semantics)));
  ep.invalid = a.ignore_invalid ? Invalid::drop : *inv;
  ep.via_alias = a.ignore_invalid;
  ep.map_semantics = *sem;
  if (a.expert_map.empty()) return ep;

  ep.map_label = display_path(a.expert_map);
  const std::string& ml = ep.map_label;
  if (const auto info = npy::inspect(a.expert_map); info.shape.size() == 1 && info.shape[0] > kMaxMapSize)
    throw InputError(fmt::format("{}: the expert map has {} entries, more than {}", ml, info.shape[0], kMaxMapSize));
  npy::Array map = npy::read(a.expert_map);
  if (map.dtype != npy::DType::i4 || map.shape.size() != 1)
    throw InputError(fmt::format("{}: the expert map must be a 1-D int32 array, got {} with {} dimension(s)", ml,
                                 npy::dtype_name(map.dtype), map.shape.size()));
  if (map.numel() < 1) throw InputError(fmt::format("{}: the expert map is empty", ml));
  const bool vllm = ep.map_semantics == MapSemantics::vllm;
  if (vllm && map.numel() != num_experts)
    throw InputError(fmt::format("{}: --map-semantics vllm needs one entry per global expert, --num-experts {}; the "
                                 "map has {}",
                                 ml, num_experts, map.numel()));
  auto m = map.as<std::int32_t>();
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i] < -1 || m[i] >= num_experts)
      throw InputError(fmt::format("{}: entry {} maps to {}, outside [-1, {}) ({})", ml, i, m[i], num_experts,
                                   vllm ? "a local expert is below the global count --num-experts"
                                        : "--num-experts is the local count"));
  ep.map.assign(m.begin(), m.end());
  return ep;
}

std::int64_t id_bound(const Ep& ep, std::int32_t num_experts) {
  return ep.map.empty() ? num_experts : static_cast<std::int64_t>(ep.map.size());
}

std::string check_ids(const Ep& ep, std::int32_t num_experts, std::span<const std::int64_t> ids,
                      const std::string& label, const std::function<std::string(std::size_t)>& where) {
  const std::int64_t bound = id_bound(ep, num_experts);
  const bool local_map = !ep.map.empty() && ep.map_semantics == MapSemantics::local;
  std::int64_t invalid = 0, not_local = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t id = ids[i];
    if (id >= 0 && id < bound) {
      not_local += local_map && ep.map[static_cast<std::size_t>(id)] < 0;
      continue;
    }
    if (ep.invalid == Invalid::reject) {
      const char* keep = "pass --invalid drop or --invalid bucket to keep the run";
      if (!ep.map.empty())  // the map is what is too short (or the id is bad): name both
        throw InputError(fmt::format("{}: expert id {} at {} is outside the expert map {} (length {}); {}", label, id,
                                     where(i), ep.map_label, ep.map.size(), keep));
      throw InputError(
          fmt::format("{}: expert id {} at {} is outside [0, {}); {}", label, id, where(i), bound, keep));
    }
    ++invalid;
  }
  if (ep.invalid == Invalid::drop && invalid > 0)
    return fmt::format("{} invalid id(s) dropped ({})", invalid,
                       ep.via_alias ? "--ignore-invalid, the deprecated alias of --invalid drop" : "--invalid drop");
  if (ep.invalid == Invalid::bucket && invalid + not_local > 0)
    return fmt::format("{} slot(s) in the bucket after the {} experts (--invalid bucket): {} invalid id(s), {} mapped "
                       "to no local expert",
                       invalid + not_local, num_experts, invalid, not_local);
  return {};
}

std::vector<std::pair<std::string, std::optional<std::string>>> ep_params(const Ep& ep) {
  return {{"expert_map", ep.map.empty() ? std::nullopt : std::optional(std::to_string(ep.map.size()))},
          {"invalid", std::string(name_of(ep.invalid))},
          {"map_semantics", std::string(name_of(ep.map_semantics))}};
}

}  // namespace moekit::align
