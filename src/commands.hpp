// Commands that are not kernel families (main.cpp wires them to CLI11).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace moekit {

int run_info(const std::vector<std::string>& files, const std::string& format);
// `moekit variants [OP] [--resources]` (variants.cpp).
int run_variants(const std::string& op, const std::string& format, bool resources);
// `moekit sass OP --variant V [--kernel NAME]` (sass.cpp).
int run_sass(const std::string& op, const std::string& variant, const std::string& kernel, const char* argv0);

// A command that registers its own subcommand and options; run() is called
// once the command line is parsed, when `sub` was given.
struct ToolCommand {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

// `trace stats`, `trace import`, `compare` and `plot` (tools.cpp).
std::vector<ToolCommand> add_tool_commands(CLI::App& app);

}  // namespace moekit
