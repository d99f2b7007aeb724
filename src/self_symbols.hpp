// Functions of the running executable by symbol name, from its own ELF symbol
// table (/proc/self/exe; the binary is not stripped). kernel_occupancy.cu
// finds a kernel's host stub so. Plain C++: nvcc's front end cannot compile
// this reader.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace moekit {

// The address of the function named `symbol` in this process, or nullptr with
// `why` set.
const void* self_function(std::string_view symbol, std::string& why);

// The host symbols a kernel's stub may have: nvcc makes stubs static, and the
// host compiler marks internal linkage with an `L` before the function's
// name (_ZN1kL4scanEv for the device's _ZN1k4scanEv); so the name itself, then
// an `L` at each place a name may start.
std::vector<std::string> host_stub_names(std::string_view mangled);

}  // namespace moekit
