// The one JSON string escaper: every string moekit prints in JSON goes through
// json_quote(), so any bytes (file names included) give valid JSON.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

#include "utf8.hpp"

namespace moekit {

// `s` as a quoted JSON string. Control characters (C0, DEL, C1) and U+2028/9
// are \u-escaped. Bytes that are not valid UTF-8 become the lone surrogates
// \udc80-\udcff (Python's "surrogateescape"): lossless, and in Python
// os.fsencode(json.loads(text)) gives the original bytes back.
inline std::string json_quote(std::string_view s) {
  std::string o;
  o.reserve(s.size() + 2);
  o += '"';
  for (std::size_t i = 0; i < s.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8::decode(s, i, cp);
    if (n == 0) {
      o += fmt::format("\\u{:04x}", 0xdc00 + static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    switch (cp) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      case '\r': o += "\\r"; break;
      case '\b': o += "\\b"; break;
      case '\f': o += "\\f"; break;
      default:
        if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029)
          o += fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
        else
          o.append(s.substr(i, n));
    }
    i += n;
  }
  o += '"';
  return o;
}

}  // namespace moekit
