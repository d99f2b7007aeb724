// One-line, terminal-safe rendering of untrusted text (file names, header
// bytes) for messages: no newline or escape sequence reaches the terminal.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "utf8.hpp"

namespace moekit {

// Printable ASCII and printable UTF-8 characters are kept; every other byte
// (controls, ESC, DEL, C1 controls, bidi overrides, invalid UTF-8) and the
// backslash itself are written as \xNN. Longer than `max_len` output bytes: cut
// with "...".
inline std::string printable(std::string_view s, std::size_t max_len = std::string_view::npos) {
  std::string o;
  for (std::size_t i = 0; i < s.size();) {
    if (o.size() >= max_len) {
      o += "...";
      break;
    }
    char32_t cp = 0;
    const std::size_t n = utf8::decode(s, i, cp);
    const bool keep = n > 1 ? cp >= 0xa0 && !(cp >= 0x200e && cp <= 0x200f) && !(cp >= 0x2028 && cp <= 0x202e) &&
                                  !(cp >= 0x2066 && cp <= 0x2069) && cp != 0xfeff
                            : n == 1 && cp >= 0x20 && cp < 0x7f && cp != '\\';
    if (keep) {
      o.append(s.substr(i, n));
      i += n;
    } else {
      o += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[i]));
      ++i;
    }
  }
  return o;
}

// A file path as error lines and text reports show it.
inline std::string display_path(std::string_view path) { return printable(path); }

}  // namespace moekit
