// One-line, terminal-safe rendering of untrusted text (file names, header
// bytes) for messages: no newline or escape sequence reaches the terminal.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "utf8.hpp"

namespace moekit {

namespace display_detail {
// Whether the character of `n` bytes (0: an invalid byte) is shown as it is:
// printable ASCII and printable UTF-8. Not: controls, ESC, DEL, C1 controls,
// bidi overrides, the BOM, the noncharacters U+FFFE/U+FFFF (not XML
// characters: an SVG holding one is invalid) and invalid UTF-8.
inline bool shown(std::size_t n, char32_t cp) {
  if (n > 1)
    return cp >= 0xa0 && !(cp >= 0x200e && cp <= 0x200f) && !(cp >= 0x2028 && cp <= 0x202e) &&
           !(cp >= 0x2066 && cp <= 0x2069) && cp != 0xfeff && (cp & 0xfffe) != 0xfffe;
  return n == 1 && cp >= 0x20 && cp < 0x7f;
}

// Copies s, writing each byte of a character shown() refuses (and of a
// backslash unless `keep_backslash`) as \xNN; cut with "..." past `max_len`.
inline std::string escape(std::string_view s, bool keep_backslash, std::size_t max_len) {
  std::string o;
  for (std::size_t i = 0; i < s.size();) {
    if (o.size() >= max_len) {
      o += "...";
      break;
    }
    char32_t cp = 0;
    const std::size_t n = utf8::decode(s, i, cp);
    if (shown(n, cp) && (keep_backslash || cp != '\\')) {
      o.append(s.substr(i, n));
      i += n;
    } else {
      o += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    }
  }
  return o;
}
}  // namespace display_detail

// Every character display_detail::shown() refuses, and the backslash itself,
// is written as \xNN per byte, so the text is one terminal-safe line and the
// escape is unambiguous. Longer than `max_len` output bytes: cut (between
// characters) with "...". Every user-given string in a message or a label
// goes through it (or display_path) once.
inline std::string printable(std::string_view s, std::size_t max_len = std::string_view::npos) {
  return display_detail::escape(s, false, max_len);
}

// A file path as error lines and text reports show it.
inline std::string display_path(std::string_view path) { return printable(path); }

// The last guard before a message reaches the terminal (main's `moekit:`
// line): like printable(), but a backslash is kept, so text already made
// printable passes unchanged and a message built from a raw string somewhere
// still cannot split the line or send an escape sequence.
inline std::string one_line(std::string_view s) {
  return display_detail::escape(s, true, std::string_view::npos);
}

}  // namespace moekit
