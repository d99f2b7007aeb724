// The expert-parallel options of the commands that run align on router ids
// (`moekit align` and the commands built on it): --expert-map, --invalid,
// --map-semantics; reading and checking the map and the ids against them, in
// one place (docs/align.md, "Invalid ids and expert parallelism").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "align/align.hpp"

namespace CLI {
class App;
}

namespace moekit::align {

struct EpArgs {
  std::string expert_map;  // file; empty = no map
  std::string invalid = std::string(kInvalidNames[0]);
  std::string map_semantics = std::string(kMapSemanticsNames[0]);
  bool ignore_invalid = false;  // the deprecated alias of --invalid drop (align only)
};

// Registers --expert-map, --invalid and --map-semantics; with
// `ignore_invalid_alias`, also the deprecated --ignore-invalid (= --invalid
// drop; the two exclude each other).
void add_ep_options(CLI::App& s, EpArgs& a, bool ignore_invalid_alias);

// The parsed options, the map read and checked.
struct Ep {
  Invalid invalid = Invalid::reject;
  MapSemantics map_semantics = MapSemantics::local;
  std::vector<std::int32_t> map;  // empty: no map
  std::string map_label;          // the map file, printable
  bool via_alias = false;         // drop came from --ignore-invalid
};

// Reads the map (1-D int32, 1..kMaxMapSize entries, each in [-1, E); with
// vllm semantics exactly E entries). Throws InputError, one line naming the
// file.
Ep read_ep(const EpArgs& a, std::int32_t num_experts);

// Ids are valid in [0, id_bound): the map's length with a map (vllm: E, its
// length), else E.
std::int64_t id_bound(const Ep& ep, std::int32_t num_experts);

// Ids outside [0, id_bound). `reject`: throws InputError naming `label`
// and the first such id at `where(i)`; otherwise returns the report's note
// on what became of the invalid slots (empty when there were none).
std::string check_ids(const Ep& ep, std::int32_t num_experts, std::span<const std::int64_t> ids,
                      const std::string& label, const std::function<std::string(std::size_t)>& where);

// The report's params: expert_map (its length, or null), invalid, map_semantics.
std::vector<std::pair<std::string, std::optional<std::string>>> ep_params(const Ep& ep);

}  // namespace moekit::align
