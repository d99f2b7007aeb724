// Sweeps: a kernel command whose numeric shape options (or --variant, or
// --pdl) hold comma lists runs once per cell of their cartesian product.
// Generic over the families: any option a family registers with a numeric
// type is list-valued, so no family declares anything; of the text options
// only those two (whose values never hold a comma) are. See docs/regression.md.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace moekit {

struct SweepCell {
  std::vector<std::string> args;  // the full command line of this cell (args[0] = program)
  std::string label;              // "tokens=16 E=64", what the cell's values are (printable)
  std::string variant;            // the cell's --variant as typed; empty when not given (auto)
};

constexpr std::size_t kMaxSweepCells = 10000;

// The cells of `args` (args[0] the program, args[1] the kernel command `sub`
// parses). Empty when no option holds a list: the command runs as typed.
// `--out DIR` becomes DIR/<label> per cell, so cells never overwrite each
// other's files. A short option takes its list attached too (-E8,16). Items
// are not parsed here: an item the option refuses (--tokens 1,x) makes its
// cell fail (main.cpp). Throws InputError on an empty list item or more than
// kMaxSweepCells cells.
std::vector<SweepCell> expand_sweep(const CLI::App& sub, const std::vector<std::string>& args);

}  // namespace moekit
