// libFuzzer target for the .npy reader: header parser and data reader, through
// the real path-based API (the input lives in a memfd opened by its
// /proc/self/fd path). Besides the sanitizers, it traps on broken properties:
// - every rejection is an InputError whose message is one printable line
//   starting with the path;
// - inspect() and read() agree: both accept or both reject, same dtype/shape;
// - an accepted array has numel * itemsize bytes, and writing it (header from
//   encode_header()) then reading it back gives the same array.
// Build and run: tests/fuzz/run.sh (see docs/npy.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "errors.hpp"
#include "memfile.hpp"
#include "npy.hpp"

using namespace moekit;

namespace {

void check_message(const std::string& path, const char* what) {
  const std::string m = what;
  if (m.rfind(path + ": ", 0) != 0) __builtin_trap();
  for (const unsigned char c : m)
    if (c < 0x20 || c == 0x7f) __builtin_trap();
}

void check(const MemFile& in, const MemFile& back, const npy::ReadOptions& opt) {
  npy::Info info;
  bool inspected = false;
  try {
    info = npy::inspect(in.path, opt);
    inspected = true;
  } catch (const InputError& e) {
    check_message(in.path, e.what());
  }
  npy::Array a;
  try {
    a = npy::read(in.path, opt);
  } catch (const InputError& e) {
    check_message(in.path, e.what());
    if (inspected) __builtin_trap();  // inspect accepted what read refused
    return;
  }
  if (!inspected || a.dtype != info.dtype || a.shape != info.shape) __builtin_trap();
  if (a.shape.size() > 64) __builtin_trap();
  std::uint64_t numel = 1;
  for (const auto d : a.shape) numel *= static_cast<std::uint64_t>(d);
  if (a.data.size() != numel * npy::dtype_size(a.dtype)) __builtin_trap();

  const std::string file = npy::encode_header(back.path, a) +
                           std::string(reinterpret_cast<const char*>(a.data.data()), a.data.size());
  back.set(file.data(), file.size());
  const npy::Array b = npy::read(back.path);
  if (b.dtype != a.dtype || b.shape != a.shape || b.data != a.data) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const MemFile in("fuzz-in.npy"), back("fuzz-back.npy");
  in.set(data, size);
  check(in, back, {});
  npy::ReadOptions bf16;
  bf16.reinterpret = npy::DType::bf16;  // the 2-byte override path
  check(in, back, bf16);
  return 0;
}
