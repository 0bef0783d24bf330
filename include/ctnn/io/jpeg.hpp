#pragma once
// Baseline JPEG images. ctnn first walks the whole file itself and checks every marker segment the
// decoder will trust: quantisation and Huffman tables (counts, code lengths that form a prefix
// code: a bad table made stb_image write out of bounds), the frame (8-bit baseline or extended
// Huffman, 1 or 3 components, sampling 1-4, size within the limits), every scan's components and
// tables, and that each scan's entropy-coded data ends in a marker and the file in EOI (a truncated
// file is refused, not padded with gray). Only then does stb_image decode the pixels; decoding time
// is then linear in the pixels. Progressive, arithmetic-coded, lossless, hierarchical, 12-bit and
// CMYK files are refused with a message.
//
// stb_image's implementation must be compiled in one translation unit: see image.hpp.
#include <stb/stb_image.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "image_bytes.hpp"

namespace ctnn::io {

namespace detail::jpeg {

struct Frame {
  int components = 0;
  int id[3] = {}, h[3] = {}, v[3] = {}, tq[3] = {};
  bool scanned[3] = {};
};

// Checks the structure; returns the frame's width and height.
inline std::pair<int, int> validate(const ImageBytes& in, const ImageLimits& limits) {
  if (in.size() < 2 || in.data()[0] != 0xff || in.data()[1] != 0xd8)
    in.fail_at(0, "expected the SOI marker FF D8");
  bool quant[4] = {}, dc[4] = {}, ac[4] = {};
  Frame f;
  int width = 0, height = 0, scans = 0;
  std::uint64_t at = 2;
  for (;;) {
    // A marker: FF, optional FF fill bytes, the code.
    if (in.u8(at, "a marker") != 0xff) in.fail_at(at, "expected a marker (FF xx)");
    while (in.u8(at + 1, "a marker code") == 0xff) ++at;
    const std::uint8_t m = in.u8(at + 1, "a marker code");
    const std::uint64_t seg = at + 2;  // the segment's length field
    char code[8];
    std::snprintf(code, sizeof code, "FF %02X", m);
    if (m == 0xd9) {  // EOI; bytes after it (camera trailers) are ignored
      if (scans == 0) in.fail_at(at, "EOI before any image data (SOS)");
      for (int c = 0; c < f.components; ++c)
        if (!f.scanned[c]) in.fail_at(at, "no scan holds component " + std::to_string(f.id[c]));
      return {width, height};
    }
    if (m == 0xd8 || (m >= 0xd0 && m <= 0xd7) || m == 0x01 || m < 0xc0)
      in.fail_at(at, std::string("unexpected marker ") + code);
    const std::uint32_t length = in.be(seg, 2, "a segment length");
    if (length < 2) in.fail_at(seg, "segment length " + std::to_string(length) + " is below 2");
    in.need(seg, length, std::string("the segment of marker ") + code);
    const std::uint8_t* s = in.data() + seg + 2;  // the segment's payload
    const std::uint32_t n = length - 2;
    auto bad = [&](const std::string& what) { in.fail_at(seg, std::string("marker ") + code + ": " + what); };

    if (m == 0xc0 || m == 0xc1) {  // SOF0 baseline, SOF1 extended sequential (Huffman)
      if (f.components) bad("a second frame header");
      if (n < 6) bad("frame header too short");
      if (s[0] != 8) bad(std::to_string(s[0]) + "-bit samples are not supported; expected 8");
      height = s[1] << 8 | s[2], width = s[3] << 8 | s[4];
      if (height == 0) bad("height 0 (defined by a later DNL marker) is not supported");
      in.check_size(width, height, limits);
      f.components = s[5];
      if (f.components == 4) bad("CMYK JPEG is not supported; save the image as RGB or gray");
      if (f.components != 1 && f.components != 3)
        bad(std::to_string(f.components) + " components; expected 1 or 3");
      if (n != 6 + 3u * std::uint32_t(f.components)) bad("frame header length does not match its components");
      for (int c = 0; c < f.components; ++c) {
        f.id[c] = s[6 + 3 * c], f.h[c] = s[7 + 3 * c] >> 4, f.v[c] = s[7 + 3 * c] & 15, f.tq[c] = s[8 + 3 * c];
        if (f.h[c] < 1 || f.h[c] > 4 || f.v[c] < 1 || f.v[c] > 4) bad("sampling factors must be 1 to 4");
        if (f.tq[c] > 3) bad("quantisation table number above 3");
        for (int d = 0; d < c; ++d)
          if (f.id[d] == f.id[c]) bad("two components with id " + std::to_string(f.id[c]));
      }
    } else if (m == 0xc2 || m == 0xc6 || m == 0xca || m == 0xce) {
      bad("progressive JPEG is not supported; save the image as baseline JPEG, PNG or BMP");
    } else if (m >= 0xc3 && m <= 0xcf && m != 0xc4 && m != 0xcc) {
      bad("lossless, hierarchical or arithmetic-coded JPEG is not supported; save it as baseline JPEG");
    } else if (m == 0xcc) {
      bad("arithmetic coding is not supported");
    } else if (m == 0xdb) {  // DQT
      for (std::uint32_t i = 0; i < n;) {
        const int precision = s[i] >> 4, table = s[i] & 15;
        if (precision > 1 || table > 3) bad("bad quantisation table header");
        const std::uint32_t size = precision ? 128 : 64;
        if (n - i - 1 < size) bad("quantisation table runs past its segment");
        quant[table] = true;
        i += 1 + size;
      }
    } else if (m == 0xc4) {  // DHT
      for (std::uint32_t i = 0; i < n;) {
        if (n - i < 17) bad("Huffman table header runs past its segment");
        const int klass = s[i] >> 4, table = s[i] & 15;
        if (klass > 1 || table > 3) bad("bad Huffman table class or number");
        std::uint32_t count = 0, code = 0;
        for (int len = 1; len <= 16; ++len) {
          count += s[i + std::uint32_t(len)];
          code = (code << 1) + s[i + std::uint32_t(len)];
          if (code > (1u << len)) bad("Huffman code lengths do not form a prefix code");
        }
        if (count > 256) bad("Huffman table of " + std::to_string(count) + " symbols; at most 256");
        if (n - i - 17 < count) bad("Huffman table values run past their segment");
        (klass ? ac : dc)[table] = true;
        i += 17 + count;
      }
    } else if (m == 0xdd) {  // DRI
      if (n != 2) bad("restart interval segment must be 4 bytes");
    } else if (m == 0xda) {  // SOS
      if (!f.components) bad("scan before the frame header (SOF)");
      if (n < 1) bad("scan header too short");
      const int ns = s[0];
      if (ns < 1 || ns > f.components || n != 4 + 2u * std::uint32_t(ns)) bad("bad number of scan components");
      int blocks = 0;
      for (int k = 0; k < ns; ++k) {
        const int id = s[1 + 2 * k], td = s[2 + 2 * k] >> 4, ta = s[2 + 2 * k] & 15;
        int c = 0;
        while (c < f.components && f.id[c] != id) ++c;
        if (c == f.components) bad("scan component " + std::to_string(id) + " is not in the frame");
        if (f.scanned[c]) bad("component " + std::to_string(id) + " is in two scans");
        f.scanned[c] = true;
        if (td > 3 || ta > 3 || !dc[td] || !ac[ta]) bad("scan uses an undefined Huffman table");
        if (!quant[f.tq[c]]) bad("component " + std::to_string(id) + " uses an undefined quantisation table");
        blocks += f.h[c] * f.v[c];
      }
      if (ns > 1 && blocks > 10) bad("more than 10 blocks per MCU");
      const std::uint8_t* t = s + 1 + 2 * ns;
      if (t[0] != 0 || t[1] != 63 || t[2] != 0) bad("spectral selection must be 0-63 in a sequential JPEG");
      ++scans;
      // The entropy-coded data: up to the next marker that is not a stuffed 00 or a restart marker.
      at = seg + length;
      for (;;) {
        if (at >= in.size())
          in.fail_at(at, "file truncated: the image data of scan " + std::to_string(scans) +
                             " has no end (no EOI marker)");
        if (in.data()[at] != 0xff) {
          ++at;
          continue;
        }
        const std::uint8_t next = in.u8(at + 1, "a marker after the image data");
        if (next == 0x00 || (next >= 0xd0 && next <= 0xd7))
          at += 2;
        else if (next == 0xff)
          ++at;
        else
          break;
      }
      continue;
    } else if (!((m >= 0xe0 && m <= 0xef) || m == 0xfe)) {  // APPn and COM are skipped
      bad("unexpected marker");
    }
    at = seg + length;
  }
}

}  // namespace detail::jpeg

inline GrayImage decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& name,
                             const ImageLimits& limits = {}) {
  ImageBytes in(bytes, name, "JPEG");
  const auto [width, height] = detail::jpeg::validate(in, limits);
  if (in.size() > std::size_t(INT32_MAX)) in.fail("file too large");
  int w = 0, h = 0, channels = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> data(
      stbi_load_from_memory(in.data(), int(in.size()), &w, &h, &channels, 1), stbi_image_free);
  if (!data) {
    const char* reason = stbi_failure_reason();
    in.fail(std::string("cannot decode (stb_image: ") + (reason ? reason : "unknown error") + ")");
  }
  if (w != width || h != height)
    in.fail("decoded " + std::to_string(w) + "x" + std::to_string(h) + ", but the frame header says " +
            std::to_string(width) + "x" + std::to_string(height));
  GrayImage g{w, h, std::vector<std::uint8_t>(data.get(), data.get() + std::size_t(w) * std::size_t(h))};
  return g;
}

}  // namespace ctnn::io
