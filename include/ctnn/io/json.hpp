#pragma once
// A small, strict JSON reader for file headers (safetensors). RFC 8259 syntax with one restriction:
// numbers must be integers (a fraction or exponent is rejected), which is all headers need.
// Strict: the text must be valid UTF-8, object keys must be unique, nothing but whitespace may follow
// the value, nesting is limited to 64 levels. Errors throw json::syntax_error with the byte offset.
// Duplicate keys are found by sorting (n log n: 200k keys take milliseconds, not a minute).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "printable.hpp"

namespace ctnn::io::json {

struct syntax_error : std::runtime_error {
  syntax_error(std::size_t at, const std::string& what) : std::runtime_error(what), offset(at) {}
  std::size_t offset;  // byte offset in the text where the problem was found
};

struct Member;  // {key, value}; defined after Value, which must be complete first (clang + libstdc++)

struct Value {
  enum class Kind { null, boolean, integer, string, array, object };
  Kind kind = Kind::null;
  std::size_t offset = 0;  // byte offset of the value's first character
  bool boolean = false;
  std::int64_t integer = 0;
  std::string string;
  std::vector<Value> array;
  std::vector<Member> object;  // in text order; keys are unique

  // The member named key, or nullptr (objects only). Linear: meant for small objects.
  const Value* find(std::string_view key) const;
};

struct Member {
  std::string key;
  Value value;
  std::size_t key_offset = 0;  // byte offset of the key's opening quote
};

inline const Value* Value::find(std::string_view key) const {
  for (const auto& m : object)
    if (m.key == key) return &m.value;
  return nullptr;
}

inline const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::null: return "null";
    case Value::Kind::boolean: return "a boolean";
    case Value::Kind::integer: return "an integer";
    case Value::Kind::string: return "a string";
    case Value::Kind::array: return "an array";
    case Value::Kind::object: return "an object";
  }
  return "?";
}

namespace detail {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Value document() {
    check_utf8();
    skip_ws();
    Value v = value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("expected the end of the text after the JSON value, found " + here());
    return v;
  }

 private:
  static constexpr int max_depth = 64;
  std::string_view s_;
  std::size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const { throw syntax_error(pos_, what); }
  [[noreturn]] void fail_at(std::size_t at, const std::string& what) const { throw syntax_error(at, what); }

  // The character at the cursor, for messages.
  std::string here() const {
    if (pos_ >= s_.size()) return "the end of the text";
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + char(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }

  void expect(char c, const char* context) {
    if (pos_ >= s_.size() || s_[pos_] != c)
      fail(std::string("expected '") + c + "' " + context + ", found " + here());
    ++pos_;
  }

  // Rejects overlong encodings, surrogates and code points above U+10FFFF.
  void check_utf8() {
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    for (std::size_t i = 0; i < s_.size();) {
      const unsigned c = p[i];
      std::size_t n = 0;
      std::uint32_t cp = 0, min = 0;
      if (c < 0x80) {
        ++i;
        continue;
      }
      if ((c & 0xe0) == 0xc0) n = 1, cp = c & 0x1f, min = 0x80;
      else if ((c & 0xf0) == 0xe0) n = 2, cp = c & 0x0f, min = 0x800;
      else if ((c & 0xf8) == 0xf0) n = 3, cp = c & 0x07, min = 0x10000;
      else fail_at(i, "invalid UTF-8 lead byte");
      if (i + n >= s_.size()) fail_at(i, "truncated UTF-8 sequence");
      for (std::size_t k = 1; k <= n; ++k) {
        if ((p[i + k] & 0xc0) != 0x80) fail_at(i, "invalid UTF-8 continuation byte");
        cp = cp << 6 | (p[i + k] & 0x3f);
      }
      if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail_at(i, "invalid UTF-8 sequence");
      i += n + 1;
    }
  }

  // Reports the duplicate key that comes first in the text (at its second occurrence).
  void check_unique_keys(const Value& v) const {
    std::vector<std::size_t> order(v.object.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    // By key, equal keys in text order. Not std::stable_sort: libstdc++ 12's calls the deprecated
    // std::get_temporary_buffer, which clang >= 18 reports (-Wdeprecated-declarations).
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const int c = v.object[a].key.compare(v.object[b].key);
      return c != 0 ? c < 0 : a < b;
    });
    std::size_t first = order.size();  // index of the earliest repeated occurrence
    for (std::size_t k = 1; k < order.size(); ++k)
      if (v.object[order[k]].key == v.object[order[k - 1]].key) first = std::min(first, order[k]);
    if (first < order.size())
      fail_at(v.object[first].key_offset, "duplicate key \"" + printable(v.object[first].key) + "\" in object");
  }

  Value value(int depth) {
    if (depth > max_depth) fail("nesting deeper than 64 levels");
    Value v;
    v.offset = pos_;
    if (pos_ >= s_.size()) fail("expected a JSON value, found the end of the text");
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Value::Kind::object;
      ++pos_;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return v;
      }
      for (;;) {
        skip_ws();
        const std::size_t key_at = pos_;
        if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key in object, found " + here());
        std::string key = string();
        skip_ws();
        expect(':', "after object key");
        skip_ws();
        Value member = value(depth + 1);
        v.object.push_back(Member{std::move(key), std::move(member), key_at});
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        expect('}', "or ',' after object member");
        check_unique_keys(v);
        return v;
      }
    }
    if (c == '[') {
      v.kind = Value::Kind::array;
      ++pos_;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return v;
      }
      for (;;) {
        skip_ws();
        v.array.push_back(value(depth + 1));
        skip_ws();
        if (pos_ < s_.size() && s_[pos_] == ',') {
          ++pos_;
          continue;
        }
        expect(']', "or ',' after array element");
        return v;
      }
    }
    if (c == '"') {
      v.kind = Value::Kind::string;
      v.string = string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Value::Kind::integer;
      v.integer = integer();
      return v;
    }
    for (const char* word : {"true", "false", "null"})
      if (s_.substr(pos_, std::string_view(word).size()) == word) {
        v.kind = word[0] == 'n' ? Value::Kind::null : Value::Kind::boolean;
        v.boolean = word[0] == 't';
        pos_ += std::string_view(word).size();
        return v;
      }
    fail("expected a JSON value, found " + here());
  }

  std::int64_t integer() {
    const std::size_t start = pos_;
    const bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') fail("expected a digit, found " + here());
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' && s_[pos_ + 1] <= '9')
      fail("leading zeros are not allowed in JSON numbers");
    const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
    std::uint64_t magnitude = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const unsigned d = unsigned(s_[pos_] - '0');
      if (magnitude > (limit - d) / 10) fail_at(start, "integer out of the 64-bit range");
      magnitude = magnitude * 10 + d;
      ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
      fail_at(start, "expected an integer, found a number with a fraction or exponent");
    return negative ? std::int64_t(0 - magnitude) : std::int64_t(magnitude);
  }

  unsigned hex4() {
    unsigned u = 0;
    for (int k = 0; k < 4; ++k, ++pos_) {
      if (pos_ >= s_.size()) fail("truncated \\u escape");
      const char h = s_[pos_];
      const int d = h >= '0' && h <= '9'   ? h - '0'
                    : h >= 'a' && h <= 'f' ? h - 'a' + 10
                    : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                           : -1;
      if (d < 0) fail("expected a hex digit in \\u escape, found " + here());
      u = u << 4 | unsigned(d);
    }
    return u;
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) out += char(cp);
    else if (cp < 0x800) out += char(0xc0 | cp >> 6), out += char(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
      out += char(0xe0 | cp >> 12), out += char(0x80 | (cp >> 6 & 0x3f)), out += char(0x80 | (cp & 0x3f));
    else
      out += char(0xf0 | cp >> 18), out += char(0x80 | (cp >> 12 & 0x3f)),
          out += char(0x80 | (cp >> 6 & 0x3f)), out += char(0x80 | (cp & 0x3f));
  }

  std::string string() {
    const std::size_t start = pos_;
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail_at(start, "unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character " + here() + " in string (it must be escaped)");
      if (c != '\\') {
        out += char(c);
        ++pos_;
        continue;
      }
      const std::size_t escape_at = pos_++;
      if (pos_ >= s_.size()) fail_at(start, "unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xdc00 && cp <= 0xdfff) fail_at(escape_at, "lone low surrogate in \\u escape");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (s_.substr(pos_, 2) != "\\u")
              fail_at(escape_at, "high surrogate not followed by a low surrogate");
            pos_ += 2;
            const std::uint32_t low = hex4();
            if (low < 0xdc00 || low > 0xdfff)
              fail_at(escape_at, "high surrogate not followed by a low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          append_utf8(out, cp);
          break;
        }
        default: fail_at(escape_at, std::string("invalid escape '\\") + e + "' in string");
      }
    }
  }
};

}  // namespace detail

// Parses a complete JSON text. Throws syntax_error.
inline Value parse(std::string_view text) { return detail::Parser(text).document(); }

// Writes s as a JSON string literal (quotes included), escaping what JSON requires.
inline std::string quote(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else out += ch;
  }
  return out + "\"";
}

}  // namespace ctnn::io::json
