// Commands that are not kernel families (main.cpp wires them to CLI11).
#pragma once

#include <string>
#include <vector>

namespace moekit {

int run_info(const std::vector<std::string>& files, const std::string& format);
int run_variants(const std::string& op, const std::string& format);

}  // namespace moekit
