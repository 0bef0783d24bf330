#pragma once
// Text from outside (file names, header strings, keys) made safe to put into an error message: a
// terminal must not receive raw escape sequences or control characters from a crafted file. Valid
// UTF-8 is kept; control characters, DEL and invalid bytes become \xNN; very long text is cut.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ctnn::io {

// Length of the valid UTF-8 sequence starting at s[i] (1 to 4), or 0 when none starts there.
// Rejects overlong encodings, surrogates and code points above U+10FFFF.
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0, min = 0;
  if ((c & 0xe0) == 0xc0)
    n = 1, cp = c & 0x1f, min = 0x80;
  else if ((c & 0xf0) == 0xe0)
    n = 2, cp = c & 0x0f, min = 0x800;
  else if ((c & 0xf8) == 0xf0)
    n = 3, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (i + n >= s.size()) return 0;
  for (std::size_t k = 1; k <= n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (byte(i + k) & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n + 1;
}

// s with control characters (C0, DEL, C1) and bytes that are not UTF-8 written as \xNN (a backslash
// as \\), cut after max_bytes of input with "...".
inline std::string printable(std::string_view s, std::size_t max_bytes = 300) {
  std::string out;
  const std::size_t end = s.size() < max_bytes ? s.size() : max_bytes;
  for (std::size_t i = 0; i < end;) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    std::size_t n = utf8_sequence_length(s, i);
    // U+0080..U+009F (C1 controls, e.g. CSI) are 0xc2 0x80..0x9f in UTF-8.
    const bool c1 = n == 2 && c == 0xc2 && static_cast<unsigned char>(s[i + 1]) < 0xa0;
    if (n == 1 && c >= 0x20 && c != 0x7f && c != '\\') {
      out += char(c);
    } else if (n == 1 && c == '\\') {
      out += "\\\\";
    } else if (n > 1 && !c1) {
      out.append(s.substr(i, n));
    } else {
      if (n == 0) n = 1;
      for (std::size_t k = 0; k < n; ++k) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i + k]));
        out += buf;
      }
    }
    i += n;
  }
  if (end < s.size()) out += "...";
  return out;
}

}  // namespace ctnn::io
