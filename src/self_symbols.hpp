// Functions of the running executable by symbol name, from its own ELF symbol
// table (/proc/self/exe; the binary is not stripped). kernel_occupancy.cu
// finds a kernel's host stub so. Plain C++: nvcc's front end cannot compile
// this reader.
#pragma once

#include <string>
#include <string_view>

namespace moekit {

// The address of the function named `symbol` in this process, or nullptr with
// `why` set.
const void* self_function(std::string_view symbol, std::string& why);

}  // namespace moekit
