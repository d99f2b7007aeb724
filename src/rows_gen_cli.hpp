// `moekit gen <family>` for hidden states [tokens, H]: the options and the
// generator, written once for every family whose input is hidden rows. Include only from a family's
// CLI code (it pulls in CLI11).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>

#include "rows_gen.hpp"

namespace moekit::gen {

struct HiddenRowsGen {
  std::int64_t tokens = -1, hidden_size = 0;
  std::string dtype = "bf16";
};

// Registers --tokens, --hidden-size, --dtype on s (description: what `gen` writes);
// the returned function builds the rows once they are parsed.
inline std::function<npy::Array(std::uint64_t)> add_hidden_rows_gen(CLI::App& s, HiddenRowsGen& g,
                                                                    const std::string& description) {
  s.description(description);
  s.add_option("--tokens", g.tokens, "tokens")->required();
  s.add_option("--hidden-size", g.hidden_size, "H")->required();
  s.add_option("--dtype", g.dtype, "f32, bf16 or f16")->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  return [&g](std::uint64_t seed) {
    return normal_rows(g.tokens, g.hidden_size, *npy::parse_dtype(g.dtype), seed, "hidden rows");
  };
}

}  // namespace moekit::gen
