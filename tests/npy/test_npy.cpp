// Unit tests of src/npy: round trips, header parsing, byte order, Fortran
// order, the writer's layout and atomicity, and rejection of malformed files.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "errors.hpp"
#include "npy.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using moekit::InputError;
using moekit::testing::TempDir;
using namespace moekit::npy;
using namespace std::string_literals;

namespace {

constexpr DType kAll[] = {DType::b1, DType::i1, DType::u1, DType::i2, DType::u2,   DType::i4, DType::u4,
                          DType::i8, DType::u8, DType::f2, DType::bf16, DType::f4, DType::f8};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// magic + version + header length + header (padded with spaces and '\n' to 64
// bytes when `pad`) + data, like NumPy lays a file out.
std::string raw_npy(const std::string& dict, const std::string& data, int major = 1, bool pad = true) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  if (pad) {
    const std::size_t total = prefix + header.size() + 1;
    header.append((total + 63) / 64 * 64 - total, ' ');
    header += '\n';
  }
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

template <class T>
std::string big_endian_bytes(const std::vector<T>& v) {
  std::string s = bytes_of(v);
  for (std::size_t i = 0; i < s.size(); i += sizeof(T)) std::reverse(s.begin() + i, s.begin() + i + sizeof(T));
  return s;
}

Array random_array(DType t, std::vector<std::int64_t> shape, std::uint32_t seed) {
  Array a;
  a.dtype = t;
  a.shape = std::move(shape);
  a.data.resize(static_cast<std::size_t>(a.numel()) * dtype_size(t));
  std::mt19937 rng(seed);
  for (auto& b : a.data) b = static_cast<std::byte>(t == DType::b1 ? rng() & 1 : rng() & 0xff);
  return a;
}

struct Layout {
  int major = 0, minor = 0;
  std::size_t header_len = 0, data_offset = 0;
  std::string header;
};

Layout layout_of(const std::string& bytes) {
  Layout l;
  REQUIRE(bytes.size() >= 10);
  REQUIRE(bytes.compare(0, 6, "\x93NUMPY") == 0);
  l.major = bytes[6];
  l.minor = bytes[7];
  const auto u = [&](std::size_t i) { return static_cast<std::size_t>(static_cast<unsigned char>(bytes[i])); };
  const std::size_t prefix = l.major == 1 ? 10 : 12;
  l.header_len = l.major == 1 ? u(8) | u(9) << 8 : u(8) | u(9) << 8 | u(10) << 16 | u(11) << 24;
  l.data_offset = prefix + l.header_len;
  REQUIRE(bytes.size() >= l.data_offset);
  l.header = bytes.substr(prefix, l.header_len);
  return l;
}

// Reading `bytes` must throw InputError with a one-line message naming the file.
void expect_rejected(const TempDir& dir, const std::string& name, const std::string& bytes,
                     const std::string& needle = "") {
  CAPTURE(name);
  const std::string path = dir.file(name + ".npy");
  spit(path, bytes);
  std::string msg;
  try {
    (void)read(path);
    FAIL("accepted a malformed file: ", name);
  } catch (const InputError& e) {
    msg = e.what();
  }
  CAPTURE(msg);
  CHECK(msg.rfind(path + ": ", 0) == 0);
  CHECK(msg.find('\n') == std::string::npos);
  if (!needle.empty()) CHECK(msg.find(needle) != std::string::npos);
  CHECK_THROWS_AS((void)inspect(path), InputError);
}

}  // namespace

TEST_CASE("dtype names, sizes and user-facing aliases") {
  for (const DType t : kAll) {
    CAPTURE(dtype_name(t));
    REQUIRE(parse_dtype(dtype_name(t)).has_value());
    CHECK(*parse_dtype(dtype_name(t)) == t);
  }
  CHECK(dtype_size(DType::b1) == 1);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::f2) == 2);
  CHECK(dtype_size(DType::u4) == 4);
  CHECK(dtype_size(DType::f8) == 8);
  const std::pair<const char*, DType> aliases[] = {
      {"bool", DType::b1},    {"int8", DType::i1},   {"uint8", DType::u1},    {"int16", DType::i2},
      {"uint16", DType::u2},  {"int32", DType::i4},  {"i4", DType::i4},       {"uint32", DType::u4},
      {"int64", DType::i8},   {"i8", DType::i8},     {"uint64", DType::u8},   {"u8", DType::u8},
      {"float16", DType::f2}, {"f16", DType::f2},    {"half", DType::f2},     {"f2", DType::f2},
      {"bfloat16", DType::bf16}, {"bf16", DType::bf16}, {"BF16", DType::bf16}, {"float32", DType::f4},
      {"f32", DType::f4},     {"float", DType::f4},  {"f4", DType::f4},       {"float64", DType::f8},
      {"f64", DType::f8},     {"double", DType::f8}, {"f8", DType::f8},       {"i1", DType::i1},
      {"u1", DType::u1},      {"i2", DType::i2},     {"u2", DType::u2},       {"u4", DType::u4},
  };
  for (const auto& [name, t] : aliases) {
    CAPTURE(name);
    REQUIRE(parse_dtype(name).has_value());
    CHECK(*parse_dtype(name) == t);
  }
  for (const char* bad : {"", "int", "float128", "<f4", "c8", "complex64", "int33", "bf", "f16 "}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_dtype(bad).has_value());
  }
}

TEST_CASE("format_shape uses Python tuple notation") {
  CHECK(format_shape(std::vector<std::int64_t>{}) == "()");
  CHECK(format_shape(std::vector<std::int64_t>{5}) == "(5,)");
  CHECK(format_shape(std::vector<std::int64_t>{2, 3}) == "(2, 3)");
  CHECK(format_shape(std::vector<std::int64_t>{0, 3, 1}) == "(0, 3, 1)");
}

TEST_CASE("round trip: every dtype, ranks 0-4, empty dimensions, 64-byte aligned data") {
  TempDir dir;
  const std::vector<std::vector<std::int64_t>> shapes = {
      {}, {7}, {0}, {3, 5}, {4, 0}, {2, 3, 4}, {2, 0, 4}, {2, 3, 1, 5}, {1, 1, 1, 1}, {0, 0, 0, 0}, {1000}};
  std::uint32_t seed = 1;
  for (const DType t : kAll) {
    for (const auto& shape : shapes) {
      const Array a = random_array(t, shape, seed++);
      CAPTURE(dtype_name(t));
      CAPTURE(format_shape(shape));
      const std::string path = dir.file("rt.npy");
      write(path, a);
      const Array b = read(path);
      CHECK(b.dtype == t);
      CHECK(b.shape == shape);
      CHECK(b.numel() == a.numel());
      CHECK(b.data == a.data);

      const Info info = inspect(path);
      CHECK(info.dtype == t);
      CHECK(info.shape == shape);
      CHECK_FALSE(info.fortran_order);

      const std::string bytes = slurp(path);
      const Layout l = layout_of(bytes);
      CHECK(l.major == 1);
      CHECK(l.minor == 0);
      CHECK(l.data_offset % 64 == 0);
      CHECK(static_cast<std::int64_t>(l.data_offset) == info.data_offset);
      CHECK(l.header.back() == '\n');
      CHECK(bytes.size() == l.data_offset + a.data.size());
      const std::string want_descr =
          t == DType::bf16 ? "'<V2'" : (dtype_size(t) == 1 ? "'|" : "'<");
      CHECK(l.header.find("'descr': " + want_descr) != std::string::npos);
      CHECK(l.header.find("'fortran_order': False") != std::string::npos);
      CHECK(l.header.find("'shape': " + format_shape(shape)) != std::string::npos);
    }
  }
  CHECK(dir.entries() == std::vector<std::string>{"rt.npy"});  // no temp files left behind
}

TEST_CASE("header forms NumPy and friends write are accepted") {
  TempDir dir;
  const std::string six_i4 = bytes_of(std::vector<std::int32_t>{1, 2, 3, 4, 5, 6});
  struct Case {
    const char* dict;
    std::vector<std::int64_t> shape;
  };
  const Case cases[] = {
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", {2, 3}},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}", {2, 3}},
      {"{'shape': (2, 3), 'fortran_order': False, 'descr': '<i4'}", {2, 3}},
      {"{'fortran_order': False, 'descr': '<i4', 'shape': (6,), }", {6}},
      {"{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (6,)}", {6}},
      {"{'descr':'<i4','fortran_order':False,'shape':(1,6,)}", {1, 6}},
      {"  {  'descr' :  '<i4' ,\n 'fortran_order' : False ,\t'shape' : ( 3 , 2 ) , }  ", {3, 2}},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (6L,), }", {6}},  // Python 2 NumPy
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1, 1, 2, 3), }", {1, 1, 2, 3}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.dict);
    const std::string path = dir.file("h.npy");
    spit(path, raw_npy(c.dict, six_i4));
    const Array a = read(path);
    CHECK(a.dtype == DType::i4);
    CHECK(a.shape == c.shape);
    CHECK(a.data.size() == 24);
    CHECK(a.as<std::int32_t>()[5] == 6);
  }
  SUBCASE("0-d scalar") {
    const std::string path = dir.file("s.npy");
    spit(path, raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", bytes_of(std::vector<double>{2.5})));
    const Array a = read(path);
    CHECK(a.shape.empty());
    CHECK(a.numel() == 1);
    CHECK(a.as<double>()[0] == 2.5);
  }
  SUBCASE("empty dimensions need no data") {
    const std::string path = dir.file("e.npy");
    spit(path, raw_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (0, 3), }", ""));
    const Array a = read(path);
    CHECK(a.shape == std::vector<std::int64_t>{0, 3});
    CHECK(a.data.empty());
  }
  SUBCASE("unpadded header (other writers) is fine: alignment is not required on read") {
    const std::string path = dir.file("u.npy");
    spit(path, raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (6,)}", six_i4, 1, false));
    CHECK(read(path).shape == std::vector<std::int64_t>{6});
  }
  SUBCASE("versions 2.0 and 3.0") {
    for (const int major : {2, 3}) {
      const std::string path = dir.file("v.npy");
      spit(path, raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", six_i4, major));
      const Info info = inspect(path);
      CHECK(info.version_major == major);
      CHECK(info.data_offset % 64 == 0);
      const Array a = read(path);
      CHECK(a.shape == std::vector<std::int64_t>{2, 3});
      CHECK(a.data.size() == 24);
      CHECK(a.as<std::int32_t>()[0] == 1);
    }
  }
}

TEST_CASE("big-endian and explicit byte orders are converted to native") {
  TempDir dir;
  const std::string path = dir.file("be.npy");
  const auto check = [&](const char* descr, const std::string& data, DType t, auto values) {
    CAPTURE(descr);
    spit(path, raw_npy(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" +
                           std::to_string(values.size()) + ",), }",
                       data));
    const Array a = read(path);
    CHECK(a.dtype == t);
    using T = typename decltype(values)::value_type;
    const auto got = a.as<T>();
    REQUIRE(got.size() == values.size());
    for (std::size_t i = 0; i < values.size(); ++i) CHECK(std::memcmp(&got[i], &values[i], sizeof(T)) == 0);
  };
  const std::vector<std::int16_t> i2{1, -2, 0x0102, -32768};
  const std::vector<std::uint16_t> u2{1, 0xfffe, 0x0102, 0x8000};
  const std::vector<std::int32_t> i4{1, -2, 0x01020304, 2147483647};
  const std::vector<std::uint32_t> u4{1, 0xfffffffeu, 0x01020304u};
  const std::vector<std::int64_t> i8{1, -2, 0x0102030405060708LL};
  const std::vector<std::uint64_t> u8{1, 0xfffffffffffffffeULL, 0x0102030405060708ULL};
  const std::vector<float> f4{1.5f, -2.25f, 3.0e30f};
  const std::vector<double> f8{1.5, -2.25, 1e300};
  const std::vector<std::uint16_t> f2{0x3c00, 0xc000, 0x7bff};  // 1.0, -2.0, 65504 as binary16
  check(">i2", big_endian_bytes(i2), DType::i2, i2);
  check(">u2", big_endian_bytes(u2), DType::u2, u2);
  check(">i4", big_endian_bytes(i4), DType::i4, i4);
  check(">u4", big_endian_bytes(u4), DType::u4, u4);
  check(">i8", big_endian_bytes(i8), DType::i8, i8);
  check(">u8", big_endian_bytes(u8), DType::u8, u8);
  check(">f4", big_endian_bytes(f4), DType::f4, f4);
  check(">f8", big_endian_bytes(f8), DType::f8, f8);
  check(">f2", big_endian_bytes(f2), DType::f2, f2);
  check(">V2", big_endian_bytes(f2), DType::bf16, f2);
  check("=i4", bytes_of(i4), DType::i4, i4);
  check("<i4", bytes_of(i4), DType::i4, i4);
  check("|u2", bytes_of(u2), DType::u2, u2);
  const std::vector<std::int8_t> i1{1, -2, 127};
  check("|i1", bytes_of(i1), DType::i1, i1);
  check(">i1", bytes_of(i1), DType::i1, i1);  // byte order is meaningless for one byte
  const std::vector<std::uint8_t> b1{0, 1, 1};
  check("|b1", bytes_of(b1), DType::b1, b1);
}

TEST_CASE("Fortran order is converted to C order") {
  TempDir dir;
  const std::string path = dir.file("f.npy");
  // Size-1 dimensions anywhere (the conversion drops them), a 1-long innermost
  // row, and the 64-dimension maximum.
  std::vector<std::int64_t> rank64(64, 1);
  rank64[0] = 3, rank64[17] = 2, rank64[63] = 2;
  const std::vector<std::vector<std::int64_t>> shapes = {{2, 3},          {3, 1}, {2, 3, 4}, {3, 2, 2, 5}, {1, 4, 1, 3},
                                                         {2, 1, 1, 3, 1}, {1, 1}, {5, 1},    rank64};
  for (const auto& shape : shapes) {
    CAPTURE(format_shape(shape));
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<std::int32_t> fdata(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) fdata[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i * 7 + 3);
    for (const bool big : {false, true}) {
      CAPTURE(big);
      spit(path, raw_npy(std::string("{'descr': '") + (big ? ">i4" : "<i4") + "', 'fortran_order': True, 'shape': " +
                             format_shape(shape) + ", }",
                         big ? big_endian_bytes(fdata) : bytes_of(fdata)));
      CHECK(inspect(path).fortran_order);
      const Array a = read(path);
      REQUIRE(a.shape == shape);
      const auto c = a.as<std::int32_t>();
      // Walk C order; the Fortran offset of index (i0..ik) is sum(i_d * prod(shape[<d])).
      std::vector<std::int64_t> idx(shape.size(), 0);
      for (std::int64_t lin = 0; lin < n; ++lin) {
        std::int64_t foff = 0, stride = 1;
        for (std::size_t d = 0; d < shape.size(); ++d) {
          foff += idx[d] * stride;
          stride *= shape[d];
        }
        CHECK(c[static_cast<std::size_t>(lin)] == fdata[static_cast<std::size_t>(foff)]);
        for (std::size_t d = shape.size(); d-- > 0;) {
          if (++idx[d] < shape[d]) break;
          idx[d] = 0;
        }
      }
    }
  }
  SUBCASE("every item size") {
    // [[0,1,2],[3,4,5]] stored column-major as 0,3,1,4,2,5.
    const std::vector<int> f = {0, 3, 1, 4, 2, 5};
    for (const auto& [descr, item] : {std::pair{"|u1", 1}, {"<u2", 2}, {"<u4", 4}, {"<u8", 8}}) {
      CAPTURE(descr);
      std::string data;
      for (int v : f) data += std::string(1, static_cast<char>(v)) + std::string(static_cast<std::size_t>(item - 1), '\0');
      spit(path, raw_npy(std::string("{'descr': '") + descr + "', 'fortran_order': True, 'shape': (2, 3), }", data));
      const Array a = read(path);
      for (std::size_t i = 0; i < 6; ++i) CHECK(static_cast<int>(a.data[i * static_cast<std::size_t>(item)]) == int(i));
    }
  }
  SUBCASE("2x3 by hand") {
    // Fortran layout of [[1,2,3],[4,5,6]] is 1,4,2,5,3,6.
    spit(path, raw_npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                       bytes_of(std::vector<float>{1, 4, 2, 5, 3, 6})));
    const Array a = read(path);
    const auto v = a.as<float>();
    CHECK(std::vector<float>(v.begin(), v.end()) == std::vector<float>{1, 2, 3, 4, 5, 6});
  }
}

TEST_CASE("bfloat16: V2 descr, the named form, and the reinterpret override") {
  TempDir dir;
  const std::string path = dir.file("bf.npy");
  const std::vector<std::uint16_t> bits{0x3f80, 0xc000, 0x7f80, 0x0001};  // 1, -2, inf, tiny
  for (const char* descr : {"<V2", "|V2", "=V2", "bfloat16"}) {
    CAPTURE(descr);
    spit(path, raw_npy(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (4,), }",
                       bytes_of(bits)));
    const Array a = read(path);
    CHECK(a.dtype == DType::bf16);
    CHECK(a.data.size() == 8);
    CHECK(std::memcmp(a.data.data(), bits.data(), 8) == 0);
  }
  SUBCASE("torch users: int16 view + --dtype bf16") {
    for (const char* descr : {"<i2", "<u2", "<f2"}) {
      CAPTURE(descr);
      spit(path, raw_npy(std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (2, 2), }",
                         bytes_of(bits)));
      const Array a = read(path, ReadOptions{DType::bf16});
      CHECK(a.dtype == DType::bf16);
      CHECK(a.shape == std::vector<std::int64_t>{2, 2});
      CHECK(std::memcmp(a.data.data(), bits.data(), 8) == 0);
      CHECK(inspect(path, ReadOptions{DType::bf16}).dtype == DType::bf16);
    }
    // Big-endian int16 is swapped per 2-byte element before the reinterpretation.
    spit(path, raw_npy("{'descr': '>i2', 'fortran_order': False, 'shape': (4,), }", big_endian_bytes(bits)));
    const Array a = read(path, ReadOptions{DType::bf16});
    CHECK(std::memcmp(a.data.data(), bits.data(), 8) == 0);
  }
  SUBCASE("reinterpret needs the same element size") {
    spit(path, raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", bytes_of(std::vector<float>{1, 2})));
    CHECK_THROWS_AS((void)read(path, ReadOptions{DType::bf16}), InputError);
    CHECK(read(path, ReadOptions{DType::i4}).dtype == DType::i4);
  }
  SUBCASE("written as <V2") {
    Array a;
    a.dtype = DType::bf16;
    a.shape = {4};
    a.data.resize(8);
    std::memcpy(a.data.data(), bits.data(), 8);
    write(path, a);
    CHECK(layout_of(slurp(path)).header.find("'descr': '<V2'") != std::string::npos);
    CHECK(read(path).dtype == DType::bf16);
  }
}

TEST_CASE("writer: alignment for every header size, at most 64 dimensions") {
  TempDir dir;
  const std::string path = dir.file("w.npy");
  // Ranks 0..64 of ones walk the header length across several 64-byte steps.
  for (std::size_t rank = 0; rank <= 64; ++rank) {
    const Array a = random_array(DType::u2, std::vector<std::int64_t>(rank, 1), 7);
    write(path, a);
    const Layout l = layout_of(slurp(path));
    CAPTURE(rank);
    CHECK(l.major == 1);
    CHECK(l.data_offset % 64 == 0);
    CHECK(l.header.back() == '\n');
    CHECK(l.header.find('\n') == l.header.size() - 1);
    CHECK(read(path).shape.size() == rank);
  }
  // 64 dimensions of the largest sizes still fit version 1.0 (what NumPy writes).
  Array wide;
  wide.dtype = DType::u1;
  wide.shape.assign(64, 0);
  wide.shape[0] = std::int64_t{1} << 62;
  write(path, wide);
  CHECK(layout_of(slurp(path)).major == 1);
  CHECK(read(path).shape == wide.shape);
  // NumPy's limit: a 65-dimension array is refused and nothing is written.
  const Array over = random_array(DType::f4, std::vector<std::int64_t>(65, 1), 9);
  try {
    write(dir.file("over.npy"), over);
    FAIL("wrote 65 dimensions");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("more than 64") != std::string::npos);
  }
  CHECK(!fs::exists(dir.file("over.npy")));
}

TEST_CASE("writer: atomic replace, errors leave nothing behind") {
  TempDir dir;
  const std::string path = dir.file("a.npy");
  write(path, random_array(DType::i4, {10}, 1));
  const Array second = random_array(DType::f8, {3, 3}, 2);
  write(path, second);  // replaces the existing file
  CHECK(read(path).data == second.data);
  CHECK(dir.entries() == std::vector<std::string>{"a.npy"});

  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));

  const auto rejects = [&](const std::string& p, const Array& a) {
    CAPTURE(p);
    try {
      write(p, a);
      FAIL("write succeeded");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).rfind(p + ": ", 0) == 0);
    }
  };
  rejects(dir.file("no/such/dir/x.npy"), second);
  fs::create_directory(dir.path / "sub");
  rejects(dir.file("sub"), second);  // a directory is in the way: rename fails
  Array bad = second;
  bad.data.pop_back();
  rejects(dir.file("b.npy"), bad);
  bad = second;
  bad.shape = {-3, -3};
  rejects(dir.file("c.npy"), bad);
  auto left = dir.entries();
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"a.npy", "sub"});
  CHECK(fs::is_empty(dir.path / "sub"));
}

TEST_CASE("malformed files are rejected with a one-line message naming the file") {
  TempDir dir;
  const std::string ok_dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string d24(24, '\x01');
  const auto with = [&](const std::string& dict, const std::string& data = std::string(24, '\x01')) {
    return raw_npy(dict, data);
  };
  // Sanity: the base case is accepted, so each defect below is what gets rejected.
  spit(dir.file("ok.npy"), with(ok_dict));
  CHECK(read(dir.file("ok.npy")).numel() == 6);

  expect_rejected(dir, "empty", "", "too short");
  expect_rejected(dir, "short", "\x93NUM", "too short");
  expect_rejected(dir, "bad_magic", "\x93NUMPZ" + with(ok_dict).substr(6), "magic");
  expect_rejected(dir, "text", "hello, this is not an array at all\n", "magic");
  std::string v4 = with(ok_dict);
  v4[6] = 4;
  expect_rejected(dir, "version_4", v4, "version 4.0");
  std::string v11 = with(ok_dict);
  v11[7] = 1;
  expect_rejected(dir, "version_1_1", v11, "version 1.1");
  std::string past = with(ok_dict);
  past[8] = '\xff';
  past[9] = '\x7f';
  expect_rejected(dir, "header_past_eof", past, "past the end");
  expect_rejected(dir, "v2_short", std::string("\x93NUMPY\x02\x00\x05\x00", 10), "truncated");
  expect_rejected(dir, "zero_header", std::string("\x93NUMPY\x01\x00\x00\x00", 10), "empty header");
  expect_rejected(dir, "not_dict_list", with("['descr', '<i4']"), "not a dict");
  expect_rejected(dir, "not_dict_string", with("'<i4'"), "not a dict");
  expect_rejected(dir, "unclosed_dict", with("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), "), "");
  expect_rejected(dir, "missing_shape", with("{'descr': '<i4', 'fortran_order': False}"), "missing key 'shape'");
  expect_rejected(dir, "missing_descr", with("{'fortran_order': False, 'shape': (2, 3)}"), "missing key 'descr'");
  expect_rejected(dir, "missing_fortran", with("{'descr': '<i4', 'shape': (2, 3)}"), "missing key 'fortran_order'");
  expect_rejected(dir, "extra_key", with("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}"),
                  "unexpected key 'x'");
  expect_rejected(dir, "duplicate_key",
                  with("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}"), "duplicate");
  expect_rejected(dir, "bad_descr", with("{'descr': 'hello', 'fortran_order': False, 'shape': (2, 3)}"), "dtype");
  expect_rejected(dir, "complex", with("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3)}"), "unsupported dtype");
  expect_rejected(dir, "float128", with("{'descr': '<f16', 'fortran_order': False, 'shape': (2, 3)}"), "unsupported");
  expect_rejected(dir, "object", with("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3)}"), "unsupported");
  expect_rejected(dir, "unicode", with("{'descr': '<U3', 'fortran_order': False, 'shape': (2, 3)}"), "unsupported");
  expect_rejected(dir, "void4", with("{'descr': '|V4', 'fortran_order': False, 'shape': (2, 3)}"), "unsupported");
  expect_rejected(dir, "structured", with("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2, 3)}"),
                  "structured");
  expect_rejected(dir, "descr_not_string", with("{'descr': 4, 'fortran_order': False, 'shape': (2, 3)}"), "string");
  expect_rejected(dir, "fortran_int", with("{'descr': '<i4', 'fortran_order': 0, 'shape': (2, 3)}"), "True or False");
  expect_rejected(dir, "shape_list", with("{'descr': '<i4', 'fortran_order': False, 'shape': [2, 3]}"), "tuple");
  expect_rejected(dir, "shape_paren_int", with("{'descr': '<i4', 'fortran_order': False, 'shape': (6)}"), "(6,)");
  expect_rejected(dir, "shape_int", with("{'descr': '<i4', 'fortran_order': False, 'shape': 6}"), "tuple");
  expect_rejected(dir, "negative_dim", with("{'descr': '<i4', 'fortran_order': False, 'shape': (-2, -3)}"), "negative");
  expect_rejected(dir, "float_dim", with("{'descr': '<i4', 'fortran_order': False, 'shape': (2.5, 3)}"), "integer");
  expect_rejected(dir, "huge_literal",
                  with("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}"), "64 bits");
  expect_rejected(dir, "numel_overflow",
                  with("{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}"), "overflow");
  expect_rejected(dir, "numel_overflow_with_zero",
                  with("{'descr': '<i4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296)}", ""),
                  "overflow");
  expect_rejected(dir, "bytes_overflow",
                  with("{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,)}"), "overflow");
  expect_rejected(dir, "huge_but_valid_shape",
                  with("{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000000,)}"), "truncated");
  expect_rejected(dir, "truncated", with(ok_dict, d24.substr(0, 23)), "truncated");
  expect_rejected(dir, "trailing", with(ok_dict, d24 + "xx"), "trailing");
  expect_rejected(dir, "non_ascii", with("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), \xff\xfe}"),
                  "0xff");
  expect_rejected(dir, "nul_in_header", with("{'descr': '<i4',\0 'fortran_order': False, 'shape': (2, 3)}"s),
                  "0x00");
  expect_rejected(dir, "garbage_after_dict", with(ok_dict + " junk"), "after the header dict");
  expect_rejected(dir, "unterminated_string", with("{'descr: '<i4', 'fortran_order': False, 'shape': (2, 3)}"), "");
  expect_rejected(dir, "escape_in_string", with("{'descr': '<i\\x34', 'fortran_order': False, 'shape': (2, 3)}"),
                  "escape");
  expect_rejected(dir, "nested_dict", with("{'descr': {}, 'fortran_order': False, 'shape': (2, 3)}"), "nested");
  expect_rejected(dir, "unknown_word", with("{'descr': '<i4', 'fortran_order': false, 'shape': (2, 3)}"), "false");
  expect_rejected(dir, "leading_zero", with("{'descr': '<i4', 'fortran_order': False, 'shape': (02, 3)}"),
                  "leading zeros");
  std::string dims65;
  for (int i = 0; i < 65; ++i) dims65 += "1, ";
  expect_rejected(dir, "rank_65", with("{'descr': '<i4', 'fortran_order': False, 'shape': (" + dims65 + "6)}"),
                  "more than 64");
  expect_rejected(dir, "deep_nesting",
                  with("{'descr': '<i4', 'fortran_order': False, 'shape': " + std::string(100, '(') + "}"), "deeply");

  SUBCASE("paths that are not files") {
    CHECK_THROWS_AS((void)read(dir.file("missing.npy")), InputError);
    CHECK_THROWS_AS((void)read(dir.path.string()), InputError);
  }
}

TEST_CASE("hostile paths: FIFOs and devices are refused without blocking") {
  TempDir dir;
  const std::string fifo = dir.file("f.npy");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  // A blocking open of a FIFO without a writer would hang here forever.
  for (const auto& p : {fifo, std::string("/dev/null"), std::string("/dev/zero")}) {
    CAPTURE(p);
    try {
      (void)read(p);
      FAIL("read a special file");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find("not a regular file") != std::string::npos);
    }
    CHECK_THROWS_AS((void)inspect(p), InputError);
  }
}

TEST_CASE("hostile paths: output targets that are not writable regular files are left alone") {
  TempDir dir;
  const Array a = random_array(DType::i4, {4}, 3);
  const auto refused = [&](const std::string& p, const char* needle) {
    CAPTURE(p);
    try {
      write(p, a);
      FAIL("write succeeded");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  const std::string fifo = dir.file("fifo.npy");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  refused(fifo, "a FIFO");
  // Never /dev/null itself: a regression run as root would replace it. A copy
  // of its device node (root only) and a symlink to it are safe to lose.
  const std::string dev = dir.file("dev.npy");
  const bool have_dev = ::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  if (have_dev) refused(dev, "a character device");
  const std::string link = dir.file("null.npy");
  REQUIRE(::symlink("/dev/null", link.c_str()) == 0);
  refused(link, "a character device");
  struct stat st {};
  REQUIRE(::stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
  REQUIRE(::lstat(fifo.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));

  // Read-only: refused (even for root), content and mode kept.
  const std::string ro = dir.file("ro.npy");
  write(ro, random_array(DType::f4, {2}, 1));
  const std::string before = slurp(ro);
  REQUIRE(::chmod(ro.c_str(), 0444) == 0);
  refused(ro, "read-only");
  CHECK(slurp(ro) == before);
  REQUIRE(::stat(ro.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0444);
  auto left = dir.entries();
  std::sort(left.begin(), left.end());
  if (have_dev) {
    REQUIRE(::lstat(dev.c_str(), &st) == 0);
    CHECK(S_ISCHR(st.st_mode));
    left.erase(std::find(left.begin(), left.end(), "dev.npy"));
  }
  CHECK(left == std::vector<std::string>{"fifo.npy", "null.npy", "ro.npy"});
}

TEST_CASE("hostile paths: messages show file names on one printable line") {
  TempDir dir;
  const std::string weird = dir.file("a\nb\x1b[31m\\c\xff.npy");
  spit(weird, "not an npy file at all");
  try {
    (void)read(weird);
    FAIL("accepted");
  } catch (const InputError& e) {
    const std::string msg = e.what();
    CAPTURE(msg);
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(msg.find('\x1b') == std::string::npos);
    CHECK(msg.find("a\\x0ab\\x1b[31m\\x5cc\\xff.npy: not a .npy file") != std::string::npos);
  }
  // Printable UTF-8 stays readable.
  const std::string utf8 = dir.file("donn\xc3\xa9" "es.npy");
  try {
    (void)read(utf8);
    FAIL("read a missing file");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).rfind(utf8 + ": cannot open", 0) == 0);
  }
}

TEST_CASE("hostile headers: a huge rank is refused in time linear in the header") {
  // 500 000 dimensions of size 1 in Fortran order (2 MB): refused at the 65th.
  TempDir dir;
  std::string dims;
  for (int i = 0; i < 500000; ++i) dims += "1,";
  std::string dict = "{'descr': '<i4', 'fortran_order': True, 'shape': (" + dims + "), }";
  std::string bytes = "\x93NUMPY\x02";
  bytes += '\0';
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((dict.size() >> (8 * i)) & 0xff);
  bytes += dict + std::string(4, '\0');
  spit(dir.file("r.npy"), bytes);
  try {
    (void)read(dir.file("r.npy"));
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("more than 64 items") != std::string::npos);
  }
}
