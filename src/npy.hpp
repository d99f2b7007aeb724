// NumPy .npy reader/writer (format versions 1.0, 2.0, 3.0). Host-only.
// Errors throw moekit::InputError with a message "FILE: problem" (FILE as
// display_path() shows it). At most 64 dimensions, like NumPy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moekit::npy {

enum class DType { b1, i1, u1, i2, u2, i4, u4, i8, u8, f2, bf16, f4, f8 };

std::string_view dtype_name(DType t);  // "bool", "int8", ..., "float16", "bfloat16", ...
std::size_t dtype_size(DType t);
// Parses a user-facing name ("int32", "i4", "bf16", "f16", "float32", ...).
std::optional<DType> parse_dtype(std::string_view name);

// A C-ordered array in native byte order.
struct Array {
  DType dtype = DType::f4;
  std::vector<std::int64_t> shape;  // empty = 0-d scalar
  std::vector<std::byte> data;      // numel() * dtype_size(dtype) bytes

  std::int64_t numel() const;
  template <class T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data.data()), data.size() / sizeof(T)};
  }
  template <class T>
  std::span<T> as() {
    return {reinterpret_cast<T*>(data.data()), data.size() / sizeof(T)};
  }
};

struct ReadOptions {
  // Reinterpret 2-byte data (f2/i2/u2/V2) as this dtype, e.g. bf16 from torch's
  // tensor.view(torch.int16).numpy(). Must have the same item size.
  std::optional<DType> reinterpret;
};

Array read(const std::string& path, const ReadOptions& opt = {});

// What a file holds, as read() would return it (after byte-order, Fortran and
// reinterpret handling), validated exactly like read() -- header, dtype, shape
// and file size -- without reading the data.
struct Info {
  DType dtype = DType::f4;
  std::vector<std::int64_t> shape;
  std::string descr;           // the file's descr, e.g. "<f4", ">i8", "<V2"
  bool fortran_order = false;  // the file's layout (read() returns C order)
  int version_major = 1;
  int version_minor = 0;
  std::int64_t data_offset = 0;  // bytes before the array data
};
Info inspect(const std::string& path, const ReadOptions& opt = {});

// Element i of a float32, bfloat16 or float16 array, as float (exact). Other
// dtypes: InputError.
float float_at(const Array& a, std::size_t i);
// The first NaN or infinite element of a float32, bfloat16 or float16 array.
std::optional<std::size_t> first_non_finite(const Array& a);

// Python tuple notation, as NumPy prints a shape: "()", "(5,)", "(2, 3)".
std::string format_shape(std::span<const std::int64_t> shape);
// The header (magic to '\n') written before `a`'s data: format 1.0, data
// offset a multiple of 64. Throws InputError naming `path` when `a` is
// inconsistent (data size, negative dimension, more than 64 dimensions).
std::string encode_header(const std::string& path, const Array& a);
// Writes atomically (outputs::write_file: a temp file in the same folder, then
// rename; a target that is not a writable regular file is refused).
void write(const std::string& path, const Array& a);

}  // namespace moekit::npy
