// NumPy .npy reader/writer. See docs/npy.md for what is accepted and written.
//
// Reading is done in two steps on purpose: the header is parsed and the exact
// data size is derived from it and compared with the file size BEFORE any data
// buffer is allocated, so a hostile header cannot make us allocate terabytes.
#include "npy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cctype>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "display.hpp"
#include "errors.hpp"
#include "half.hpp"
#include "host_memory.hpp"
#include "outputs.hpp"

namespace moekit::npy {

namespace {

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
// NumPy limits headers to 10 000 bytes by default; we allow more (padding) but
// still bound the allocation for the header text.
constexpr std::size_t kMaxHeaderBytes = std::size_t{1} << 20;
// NumPy's NPY_MAXDIMS (64 since NumPy 2.0, 32 before).
constexpr std::size_t kMaxRank = 64;
constexpr char kMagic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
constexpr bool kHostLittle = std::endian::native == std::endian::little;

struct DTypeRow {
  DType t;
  std::string_view name;
  std::size_t size;
  char kind;  // NumPy kind letter used in descr: b, i, u, f, V (bf16)
};

// One row per DType, in enum order.
constexpr std::array<DTypeRow, 13> kDTypes = {{
    {DType::b1, "bool", 1, 'b'},
    {DType::i1, "int8", 1, 'i'},
    {DType::u1, "uint8", 1, 'u'},
    {DType::i2, "int16", 2, 'i'},
    {DType::u2, "uint16", 2, 'u'},
    {DType::i4, "int32", 4, 'i'},
    {DType::u4, "uint32", 4, 'u'},
    {DType::i8, "int64", 8, 'i'},
    {DType::u8, "uint64", 8, 'u'},
    {DType::f2, "float16", 2, 'f'},
    {DType::bf16, "bfloat16", 2, 'V'},
    {DType::f4, "float32", 4, 'f'},
    {DType::f8, "float64", 8, 'f'},
}};

const DTypeRow& row(DType t) { return kDTypes.at(static_cast<std::size_t>(t)); }

// Printable, one-line, bounded rendering of untrusted header text for messages.
std::string escape(std::string_view s, std::size_t max_len = 40) { return printable(s, max_len); }

[[noreturn]] void fail(const std::string& path, std::string_view what) {
  throw InputError(fmt::format("{}: {}", display_path(path), what));
}

std::string errno_text(int e) { return std::strerror(e); }

// ---------------------------------------------------------------------------
// Header dict parser: the subset of Python literal syntax NumPy writes.
// ---------------------------------------------------------------------------

struct Value {
  enum Kind { Str, Bool, None, Int, Tuple, List, Dict, Paren } kind = None;
  std::string str;             // Str
  bool b = false;              // Bool
  std::int64_t i = 0;          // Int
  std::string text;            // source text of an Int (for messages)
  std::vector<Value> items;    // Tuple, List; Paren holds its single item
};

std::string_view kind_name(Value::Kind k) {
  switch (k) {
    case Value::Str: return "a string";
    case Value::Bool: return "a bool";
    case Value::None: return "None";
    case Value::Int: return "an integer";
    case Value::Tuple: return "a tuple";
    case Value::List: return "a list";
    case Value::Dict: return "a dict";
    case Value::Paren: return "a parenthesized value";
  }
  return "?";
}

class HeaderParser {
 public:
  HeaderParser(const std::string& path, std::string_view s) : path_(path), s_(s) {}

  // Parses `{key: value, ...}` followed only by whitespace.
  std::vector<std::pair<std::string, Value>> parse_dict_document() {
    skip_ws();
    if (at_end() || s_[pos_] != '{') {
      fail_here(fmt::format("header is not a dict: expected '{{', found {}", next_token_text()));
    }
    ++pos_;
    std::vector<std::pair<std::string, Value>> entries;
    skip_ws();
    while (!at_end() && s_[pos_] != '}') {
      if (s_[pos_] != '\'' && s_[pos_] != '"') {
        fail_here(fmt::format("expected a quoted key or '}}', found {}", next_token_text()));
      }
      std::string key = parse_string();
      skip_ws();
      expect(':');
      skip_ws();
      Value v = parse_value(0);
      for (const auto& e : entries) {
        if (e.first == key) fail_here(fmt::format("duplicate key '{}'", escape(key)));
      }
      entries.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (!at_end() && s_[pos_] == ',') {
        ++pos_;
        skip_ws();
      } else if (at_end() || s_[pos_] != '}') {
        fail_here(fmt::format("expected ',' or '}}' in dict, found {}", next_token_text()));
      }
    }
    if (at_end()) fail_here("header dict is not closed (missing '}')");
    ++pos_;  // '}'
    skip_ws();
    if (!at_end()) fail_here(fmt::format("unexpected text after the header dict: {}", next_token_text()));
    return entries;
  }

 private:
  [[noreturn]] void fail_here(std::string_view what) const {
    fail(path_, fmt::format("bad header: {} (header offset {})", what, pos_));
  }
  bool at_end() const { return pos_ >= s_.size(); }
  void skip_ws() {
    while (!at_end() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  std::string next_token_text() const {
    if (at_end()) return "end of header";
    return fmt::format("'{}'", escape(s_.substr(pos_, 12), 12));
  }
  void expect(char c) {
    if (at_end() || s_[pos_] != c) fail_here(fmt::format("expected '{}', found {}", c, next_token_text()));
    ++pos_;
  }
  static bool is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }

  std::string parse_string() {
    const char q = s_[pos_++];
    std::string out;
    while (true) {
      if (at_end() || s_[pos_] == '\n') fail_here("unterminated string");
      const char c = s_[pos_++];
      if (c == q) break;
      if (c == '\\') fail_here("escape sequences in strings are not supported");
      out += c;
    }
    return out;
  }

  Value parse_int() {
    const std::size_t start = pos_;
    bool neg = false;
    if (s_[pos_] == '-' || s_[pos_] == '+') {
      neg = s_[pos_] == '-';
      ++pos_;
      skip_ws();
    }
    const std::size_t digits = pos_;
    unsigned __int128 mag = 0;
    bool overflow = false;
    while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      mag = mag * 10 + static_cast<unsigned>(s_[pos_] - '0');
      if (mag > static_cast<unsigned __int128>(kI64Max) + 1) overflow = true, mag = 0;
      ++pos_;
    }
    if (pos_ == digits) fail_here(fmt::format("expected a value, found {}", next_token_text()));
    // Python 3 forbids leading zeros ("007"); Python 2 NumPy wrote longs as "3L".
    if (pos_ - digits > 1 && s_[digits] == '0') fail_here("integer with leading zeros");
    if (!at_end() && (s_[pos_] == 'L' || s_[pos_] == 'l')) ++pos_;
    if (!at_end() && (is_ident(s_[pos_]) || s_[pos_] == '.')) {
      std::size_t end = pos_;
      while (end < s_.size() && (is_ident(s_[end]) || s_[end] == '.')) ++end;
      pos_ = start;
      fail_here(fmt::format("'{}' is not an integer", escape(s_.substr(start, end - start))));
    }
    Value v;
    v.kind = Value::Int;
    v.text = std::string(s_.substr(start, pos_ - start));
    if (overflow || (!neg && mag > static_cast<unsigned __int128>(kI64Max))) {
      pos_ = start;
      fail_here(fmt::format("integer {} does not fit in 64 bits", escape(v.text)));
    }
    v.i = neg ? static_cast<std::int64_t>(-static_cast<__int128>(mag)) : static_cast<std::int64_t>(mag);
    return v;
  }

  // Tuple "(...)", list "[...]"; "(x)" without a comma is just x in Python, kept
  // as Paren so the shape check can say what is wrong.
  Value parse_sequence(int depth, char close, Value::Kind kind) {
    ++pos_;
    Value v;
    v.kind = kind;
    bool saw_comma = false;
    skip_ws();
    while (!at_end() && s_[pos_] != close) {
      // Only 'shape' holds a sequence we accept; stop a 500 000-item one early.
      if (v.items.size() == kMaxRank) {
        fail_here(fmt::format("a tuple or list of more than {} items (a shape has at most {} dimensions, as in NumPy)",
                              kMaxRank, kMaxRank));
      }
      v.items.push_back(parse_value(depth + 1));
      skip_ws();
      if (!at_end() && s_[pos_] == ',') {
        saw_comma = true;
        ++pos_;
        skip_ws();
      } else if (at_end() || s_[pos_] != close) {
        fail_here(fmt::format("expected ',' or '{}', found {}", close, next_token_text()));
      }
    }
    if (at_end()) fail_here(fmt::format("missing '{}'", close));
    ++pos_;
    if (kind == Value::Tuple && v.items.size() == 1 && !saw_comma) v.kind = Value::Paren;
    return v;
  }

  Value parse_value(int depth) {
    if (depth > 16) fail_here("values nested too deeply");
    skip_ws();
    if (at_end()) fail_here("expected a value, found end of header");
    const char c = s_[pos_];
    Value v;
    if (c == '\'' || c == '"') {
      v.kind = Value::Str;
      v.str = parse_string();
    } else if (c == '(') {
      v = parse_sequence(depth, ')', Value::Tuple);
    } else if (c == '[') {
      v = parse_sequence(depth, ']', Value::List);
    } else if (c == '{') {
      fail_here("nested dicts are not supported");
    } else if (c == '-' || c == '+' || (c >= '0' && c <= '9')) {
      v = parse_int();
    } else if (is_ident(c)) {
      std::size_t end = pos_;
      while (end < s_.size() && is_ident(s_[end])) ++end;
      const std::string_view word = s_.substr(pos_, end - pos_);
      if (word == "True" || word == "False") {
        v.kind = Value::Bool;
        v.b = word == "True";
      } else if (word == "None") {
        v.kind = Value::None;
      } else {
        fail_here(fmt::format("unexpected word '{}'", escape(word)));
      }
      pos_ = end;
    } else {
      fail_here(fmt::format("expected a value, found {}", next_token_text()));
    }
    return v;
  }

  const std::string& path_;
  std::string_view s_;
  std::size_t pos_ = 0;
};

// descr -> (dtype, stored byte order is big-endian).
std::pair<DType, bool> parse_descr(const std::string& path, const Value& v) {
  if (v.kind == Value::List) fail(path, "structured (record) dtypes are not supported");
  if (v.kind != Value::Str) fail(path, fmt::format("bad header: 'descr' must be a string, got {}", kind_name(v.kind)));
  const std::string& d = v.str;
  // The named form some ml_dtypes users write by hand (str(arr.dtype)).
  if (d == "bfloat16") return {DType::bf16, !kHostLittle};
  const auto unsupported = [&]() -> std::pair<DType, bool> {
    fail(path, fmt::format("unsupported dtype '{}' (supported: |b1 i1 u1 i2 u2 i4 u4 i8 u8 f2 f4 f8, V2 as bfloat16, "
                           "each with byte order < > | =)",
                           escape(d)));
  };
  if (d.size() < 3 || std::string_view("<>|=").find(d[0]) == std::string_view::npos) {
    if (d.empty() || d.size() > 64) fail(path, fmt::format("bad descr '{}'", escape(d)));
    return unsupported();
  }
  const char order = d[0];
  const char kind = d[1];
  const std::string_view size_text = std::string_view(d).substr(2);
  if (!std::all_of(size_text.begin(), size_text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      size_text.size() > 3) {
    return unsupported();
  }
  const std::size_t size = static_cast<std::size_t>(std::atoi(std::string(size_text).c_str()));
  std::optional<DType> t;
  if (kind == 'V') {
    if (size == 2) t = DType::bf16;  // what np.save writes for an ml_dtypes.bfloat16 array
  } else {
    for (const auto& r : kDTypes) {
      if (r.kind == kind && r.size == size && r.t != DType::bf16) t = r.t;
    }
  }
  if (!t) return unsupported();
  bool big = false;
  if (order == '>') big = true;
  else if (order == '=') big = !kHostLittle;
  else if (order == '|') big = !kHostLittle;  // no byte order: treat as native
  return {*t, big && row(*t).size > 1};
}

std::vector<std::int64_t> parse_shape(const std::string& path, const Value& v) {
  if (v.kind == Value::Paren) {
    const Value& in = v.items[0];
    if (in.kind == Value::Int) {
      fail(path, fmt::format("bad header: 'shape' must be a tuple, got ({}) -- a 1-d shape is written ({},)", in.text,
                             in.text));
    }
    fail(path, fmt::format("bad header: 'shape' must be a tuple, got {} in parentheses", kind_name(in.kind)));
  }
  if (v.kind != Value::Tuple) fail(path, fmt::format("bad header: 'shape' must be a tuple, got {}", kind_name(v.kind)));
  if (v.items.size() > kMaxRank) {
    fail(path, fmt::format("bad header: shape has {} dimensions, more than {} (NumPy's limit)", v.items.size(), kMaxRank));
  }
  std::vector<std::int64_t> shape;
  shape.reserve(v.items.size());
  for (const auto& it : v.items) {
    if (it.kind != Value::Int) {
      fail(path, fmt::format("bad header: 'shape' entries must be integers, got {}", kind_name(it.kind)));
    }
    if (it.i < 0) fail(path, fmt::format("bad header: negative dimension {} in shape", it.i));
    shape.push_back(it.i);
  }
  return shape;
}

// Bytes of data for `shape`, or an error if the element or byte count overflows
// int64. Like NumPy, non-zero dimensions must not overflow even when another
// dimension is 0.
std::int64_t data_bytes(const std::string& path, const std::vector<std::int64_t>& shape, std::size_t item) {
  std::int64_t nonzero = 1;
  bool zero = false;
  for (const auto d : shape) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (nonzero > kI64Max / d) fail(path, fmt::format("shape {} has too many elements (overflows int64)", format_shape(shape)));
    nonzero *= d;
  }
  if (nonzero > kI64Max / static_cast<std::int64_t>(item)) {
    fail(path, fmt::format("shape {} is too large: its byte count overflows int64", format_shape(shape)));
  }
  return zero ? 0 : nonzero * static_cast<std::int64_t>(item);
}

std::string_view file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a file";
}

// An open file that closes itself.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at the current position (n was checked against the size).
void read_exact(const std::string& path, int fd, void* dst, std::size_t n) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::read(fd, p, std::min<std::size_t>(n, std::size_t{1} << 30));
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path, fmt::format("read error: {}", errno_text(errno)));
    }
    if (got == 0) fail(path, "file shrank while being read");
    p += got;
    n -= static_cast<std::size_t>(got);
  }
}

struct Parsed {
  Info info;
  DType file_dtype = DType::f4;
  bool swap = false;
};

// Opens, parses and validates everything but the data. Leaves `fd` positioned at
// the first data byte.
Parsed parse_file(const std::string& path, int fd, const ReadOptions& opt) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(path, fmt::format("cannot stat: {}", errno_text(errno)));
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a .npy file");
  if (!S_ISREG(st.st_mode)) fail(path, fmt::format("not a regular file ({})", file_kind(st.st_mode)));
  const std::int64_t file_size = st.st_size;

  if (file_size < 10) fail(path, fmt::format("not a .npy file: only {} bytes, too short for a .npy header", file_size));
  unsigned char pre[12] = {};
  read_exact(path, fd, pre, 10);
  if (std::memcmp(pre, kMagic, sizeof kMagic) != 0) fail(path, "not a .npy file (bad magic bytes)");
  Parsed p;
  p.info.version_major = pre[6];
  p.info.version_minor = pre[7];
  if (!((pre[6] == 1 || pre[6] == 2 || pre[6] == 3) && pre[7] == 0)) {
    fail(path, fmt::format("unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", pre[6], pre[7]));
  }
  std::int64_t prefix = 10;
  std::uint64_t header_len = pre[8] | (pre[9] << 8);
  if (pre[6] >= 2) {
    if (file_size < 12) fail(path, "truncated: file ends inside the header length");
    read_exact(path, fd, pre + 10, 2);
    prefix = 12;
    header_len = std::uint64_t{pre[8]} | std::uint64_t{pre[9]} << 8 | std::uint64_t{pre[10]} << 16 |
                 std::uint64_t{pre[11]} << 24;
  }
  if (static_cast<std::int64_t>(header_len) > file_size - prefix) {
    fail(path, fmt::format("header length {} runs past the end of the file ({} bytes)", header_len, file_size));
  }
  if (header_len > kMaxHeaderBytes) fail(path, fmt::format("header length {} is too large (limit {})", header_len, kMaxHeaderBytes));
  if (header_len == 0) fail(path, "empty header");
  std::string header(header_len, '\0');
  read_exact(path, fd, header.data(), header.size());
  // Version 3.0 headers are UTF-8, but nothing we accept needs non-ASCII, and
  // rejecting bytes up front keeps messages one printable line.
  for (std::size_t i = 0; i < header.size(); ++i) {
    const auto c = static_cast<unsigned char>(header[i]);
    if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c >= 0x7f) {
      fail(path, fmt::format("bad header: non-ASCII or control byte 0x{:02x} at header offset {}", c, i));
    }
  }

  HeaderParser parser(path, header);
  const auto entries = parser.parse_dict_document();
  const Value* descr = nullptr;
  const Value* fortran = nullptr;
  const Value* shape = nullptr;
  for (const auto& [k, v] : entries) {
    if (k == "descr") descr = &v;
    else if (k == "fortran_order") fortran = &v;
    else if (k == "shape") shape = &v;
    else fail(path, fmt::format("bad header: unexpected key '{}' (expected descr, fortran_order, shape)", escape(k)));
  }
  for (const auto& [name, v] : {std::pair{"descr", descr}, {"fortran_order", fortran}, {"shape", shape}}) {
    if (v == nullptr) fail(path, fmt::format("bad header: missing key '{}'", name));
  }
  if (fortran->kind != Value::Bool) {
    fail(path, fmt::format("bad header: 'fortran_order' must be True or False, got {}", kind_name(fortran->kind)));
  }
  const auto [file_dtype, big] = parse_descr(path, *descr);
  p.file_dtype = file_dtype;
  p.swap = big == kHostLittle && dtype_size(file_dtype) > 1;
  p.info.descr = descr->str;
  p.info.fortran_order = fortran->b;
  p.info.shape = parse_shape(path, *shape);
  p.info.data_offset = prefix + static_cast<std::int64_t>(header_len);
  p.info.dtype = file_dtype;
  if (opt.reinterpret) {
    if (dtype_size(*opt.reinterpret) != dtype_size(file_dtype)) {
      fail(path, fmt::format("cannot reinterpret {} data ({} bytes per element) as {} ({} bytes)", dtype_name(file_dtype),
                             dtype_size(file_dtype), dtype_name(*opt.reinterpret), dtype_size(*opt.reinterpret)));
    }
    p.info.dtype = *opt.reinterpret;
  }

  const std::int64_t need = data_bytes(path, p.info.shape, dtype_size(file_dtype));
  const std::int64_t have = file_size - p.info.data_offset;
  if (have < need) {
    fail(path, fmt::format("truncated: shape {} of {} needs {} data bytes, the file has {}", format_shape(p.info.shape),
                           dtype_name(file_dtype), need, have));
  }
  if (have > need) {
    fail(path, fmt::format("{} bytes of trailing data after the array (shape {} of {} is {} bytes)", have - need,
                           format_shape(p.info.shape), dtype_name(file_dtype), need));
  }
  return p;
}

void byteswap_items(std::vector<std::byte>& data, std::size_t item) {
  std::byte* p = data.data();
  const std::size_t n = data.size() / item;
  for (std::size_t i = 0; i < n; ++i, p += item) std::reverse(p, p + item);
}

// Column-major (Fortran) -> row-major (C) copy for any rank, in time linear in
// the element count: size-1 dimensions do not change the layout and are
// dropped, so every carry of the index odometer below passes dimensions of size
// >= 2 and the carries cost O(1) per element amortized.
template <class T>
void fortran_to_c_typed(const std::byte* src, std::byte* dst, std::size_t n, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> dims, fstride;
  std::int64_t s = 1;
  for (const auto d : shape) {
    if (d != 1) dims.push_back(d), fstride.push_back(s);
    s *= d;
  }
  const std::size_t rank = dims.size();
  if (rank == 0) {
    std::memcpy(dst, src, n * sizeof(T));
    return;
  }
  // Innermost C dimension in a plain strided loop; the odometer runs per row.
  const std::int64_t inner = dims[rank - 1], inner_stride = fstride[rank - 1];
  std::vector<std::int64_t> idx(rank, 0);
  std::int64_t off = 0;  // source element offset of the C row start
  for (std::size_t i = 0; i < n; i += static_cast<std::size_t>(inner)) {
    for (std::int64_t j = 0; j < inner; ++j) {
      T v;
      std::memcpy(&v, src + static_cast<std::size_t>(off + j * inner_stride) * sizeof(T), sizeof(T));
      std::memcpy(dst + (i + static_cast<std::size_t>(j)) * sizeof(T), &v, sizeof(T));
    }
    for (std::size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < dims[d]) {
        off += fstride[d];
        break;
      }
      off -= fstride[d] * (dims[d] - 1);
      idx[d] = 0;
    }
  }
}

std::vector<std::byte> fortran_to_c(const std::vector<std::byte>& src, const std::vector<std::int64_t>& shape,
                                    std::size_t item) {
  std::vector<std::byte> dst(src.size());
  const std::size_t n = src.size() / item;
  if (n == 0) return dst;
  switch (item) {
    case 1: fortran_to_c_typed<std::uint8_t>(src.data(), dst.data(), n, shape); break;
    case 2: fortran_to_c_typed<std::uint16_t>(src.data(), dst.data(), n, shape); break;
    case 4: fortran_to_c_typed<std::uint32_t>(src.data(), dst.data(), n, shape); break;
    default: fortran_to_c_typed<std::uint64_t>(src.data(), dst.data(), n, shape); break;
  }
  return dst;
}

// Type first, then a non-blocking open: a FIFO with no writer, or a device,
// must not hang the reader. O_NONBLOCK has no effect on regular files.
int open_for_read(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) fail(path, fmt::format("cannot open: {}", errno_text(errno)));
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a .npy file");
  if (!S_ISREG(st.st_mode)) fail(path, fmt::format("not a regular file ({})", file_kind(st.st_mode)));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) fail(path, fmt::format("cannot open: {}", errno_text(errno)));
  return fd;
}

std::string descr_for_write(DType t) {
  if (t == DType::bf16) return kHostLittle ? "<V2" : ">V2";
  const auto& r = row(t);
  const char order = r.size == 1 ? '|' : (kHostLittle ? '<' : '>');
  return fmt::format("{}{}{}", order, r.kind, r.size);
}

}  // namespace

std::string_view dtype_name(DType t) { return row(t).name; }
std::size_t dtype_size(DType t) { return row(t).size; }

float float_at(const Array& a, std::size_t i) {
  switch (a.dtype) {
    case DType::f4: return reinterpret_cast<const float*>(a.data.data())[i];
    case DType::bf16: return bf16_bits_to_f32(reinterpret_cast<const std::uint16_t*>(a.data.data())[i]);
    case DType::f2: return f16_bits_to_f32(reinterpret_cast<const std::uint16_t*>(a.data.data())[i]);
    default: throw InputError(fmt::format("float_at: {} is not a float32, bfloat16 or float16 dtype", dtype_name(a.dtype)));
  }
}

std::optional<std::size_t> first_non_finite(const Array& a) {
  const std::size_t n = static_cast<std::size_t>(a.numel());
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(float_at(a, i))) return i;
  return std::nullopt;
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  struct Alias {
    std::string_view name;
    DType t;
  };
  // User-facing names. Note "f16" means float16 here (as in torch/CUDA talk),
  // not NumPy's typestr 'f16' (float128, unsupported).
  static constexpr Alias kAliases[] = {
      {"bool", DType::b1},      {"b1", DType::b1},       {"int8", DType::i1},     {"i1", DType::i1},
      {"uint8", DType::u1},     {"u1", DType::u1},       {"int16", DType::i2},    {"i2", DType::i2},
      {"uint16", DType::u2},    {"u2", DType::u2},       {"int32", DType::i4},    {"i4", DType::i4},
      {"uint32", DType::u4},    {"u4", DType::u4},       {"int64", DType::i8},    {"i8", DType::i8},
      {"uint64", DType::u8},    {"u8", DType::u8},       {"float16", DType::f2},  {"f16", DType::f2},
      {"half", DType::f2},      {"f2", DType::f2},       {"fp16", DType::f2},     {"bfloat16", DType::bf16},
      {"bf16", DType::bf16},    {"float32", DType::f4},  {"f32", DType::f4},      {"float", DType::f4},
      {"f4", DType::f4},        {"fp32", DType::f4},     {"float64", DType::f8},  {"f64", DType::f8},
      {"double", DType::f8},    {"f8", DType::f8},       {"fp64", DType::f8},
  };
  for (const auto& a : kAliases) {
    if (a.name == n) return a.t;
  }
  return std::nullopt;
}

std::int64_t Array::numel() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

std::string format_shape(std::span<const std::int64_t> shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  out += shape.size() == 1 ? ",)" : ")";
  return out;
}

Info inspect(const std::string& path, const ReadOptions& opt) {
  Fd f(open_for_read(path));
  return parse_file(path, f.fd, opt).info;
}

Array read(const std::string& path, const ReadOptions& opt) {
  Fd f(open_for_read(path));
  Parsed p = parse_file(path, f.fd, opt);
  const std::size_t item = dtype_size(p.file_dtype);
  Array a;
  a.dtype = p.info.dtype;
  a.shape = p.info.shape;
  // Size already validated against the file, so this allocation is bounded by
  // it; a Fortran-order file needs a second copy for the reordering.
  const std::int64_t bytes = data_bytes(path, a.shape, item);
  require_host_memory(double(bytes) * (p.info.fortran_order && a.shape.size() > 1 ? 2 : 1),
                      fmt::format("{}: reading its data", display_path(path)));
  a.data.resize(static_cast<std::size_t>(bytes));
  read_exact(path, f.fd, a.data.data(), a.data.size());
  if (p.swap) byteswap_items(a.data, item);
  if (p.info.fortran_order && a.shape.size() > 1) a.data = fortran_to_c(a.data, a.shape, item);
  return a;
}

std::string encode_header(const std::string& path, const Array& a) {
  if (a.shape.size() > kMaxRank) {
    fail(path, fmt::format("cannot write: {} dimensions, more than {} (NumPy's limit)", a.shape.size(), kMaxRank));
  }
  for (const auto d : a.shape) {
    if (d < 0) fail(path, fmt::format("cannot write: negative dimension in shape {}", format_shape(a.shape)));
  }
  const std::int64_t need = data_bytes(path, a.shape, dtype_size(a.dtype));
  if (static_cast<std::uint64_t>(need) != a.data.size()) {
    fail(path, fmt::format("cannot write: shape {} of {} needs {} bytes, the array holds {}", format_shape(a.shape),
                           dtype_name(a.dtype), need, a.data.size()));
  }
  // Header: dict, then spaces and '\n' so the data starts at a multiple of 64.
  // At most 64 dimensions keep it far below version 1.0's 65535-byte limit.
  const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                       descr_for_write(a.dtype), format_shape(a.shape));
  constexpr std::size_t prefix = 10;
  const std::size_t hlen = (prefix + dict.size() + 1 + 63) / 64 * 64 - prefix;
  std::string head(kMagic, sizeof kMagic);
  head += '\x01';
  head += '\0';
  head += static_cast<char>(hlen & 0xff);
  head += static_cast<char>(hlen >> 8);
  head += dict;
  head.append(hlen - dict.size() - 1, ' ');
  head += '\n';
  return head;
}

void write(const std::string& path, const Array& a) { outputs::write_file(path, a); }

}  // namespace moekit::npy
