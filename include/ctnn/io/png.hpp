#pragma once
// PNG images, strictly, with zlib (already ctnn's dependency) for the inflation: every chunk's length
// and CRC checked, IHDR first and valid, PLTE/tRNS checked against the colour type, IDAT consecutive
// and inflating to exactly the bytes the header implies (not one more or less), IEND last with
// nothing after it, unknown critical chunks refused. All colour types and bit depths; transparency
// (alpha, tRNS) composited over white; 16-bit samples rounded to 8; interlaced (Adam7) or not.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "image_bytes.hpp"

namespace ctnn::io {

namespace detail::png {

struct Pass {
  std::uint32_t x0, y0, dx, dy;  // first column and row, steps
};
inline constexpr Pass adam7[7] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                  {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
// Columns (or rows) of a pass over `size` pixels.
inline std::size_t pass_size(std::uint32_t size, std::uint32_t first, std::uint32_t step) {
  return size > first ? (size - first + step - 1) / step : 0;
}

}  // namespace detail::png

inline GrayImage decode_png(std::span<const std::uint8_t> bytes, const std::string& name,
                            const ImageLimits& limits = {}) {
  namespace di = detail::image;
  using detail::png::Pass, detail::png::adam7, detail::png::pass_size;
  ImageBytes in(bytes, name, "PNG");
  static constexpr std::uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  in.need(0, 8, "the PNG signature");
  if (!std::equal(signature, signature + 8, in.data()))
    in.fail_at(0, "expected the PNG signature 89 50 4E 47 0D 0A 1A 0A");

  std::uint32_t width = 0, height = 0;
  int depth = 0, color = 0, channels = 0;
  std::uint64_t expected = 0;
  bool interlaced = false;
  std::vector<Pass> passes = {Pass{0, 0, 1, 1}};
  std::vector<std::uint8_t> rgb_palette, alpha_palette;  // PLTE (3 per entry), tRNS for palettes
  int key[3] = {-1, -1, -1};                             // tRNS colour key for gray / RGB
  std::vector<std::uint8_t> raw;                         // the inflated, filtered scanlines
  z_stream zs{};
  struct ZEnd {
    z_stream* z;
    bool on = false;
    ~ZEnd() {
      if (on) inflateEnd(z);
    }
  } zend{&zs};
  bool stream_end = false, idat_seen = false, idat_over = false;
  std::string previous;

  for (std::uint64_t at = 8;;) {
    if (at == in.size()) in.fail_at(at, "file truncated: expected another chunk (a PNG ends with IEND)");
    const std::uint32_t length = in.be(at, 4, "a chunk length");
    in.need(at + 4, 4, "a chunk type");
    const std::string type(reinterpret_cast<const char*>(in.data() + at + 4), 4);
    for (const char c : type)
      if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
        in.fail_at(at + 4, "invalid chunk type \"" + printable(type) + "\"");
    if (length > 0x7fffffffu)
      in.fail_at(at, "chunk " + type + " length " + std::to_string(length) + " is over 2^31-1");
    in.need(at + 8, std::uint64_t(length) + 4, "chunk " + type + " data and CRC");
    const std::uint8_t* data = in.data() + at + 8;
    const std::uint32_t crc = in.be(at + 8 + length, 4, "a CRC");
    if (crc != std::uint32_t(crc32(crc32(0, in.data() + at + 4, 4), data, length)))
      in.fail_at(at + 8 + length, "CRC mismatch in chunk " + type + ": the file is corrupt");
    const bool critical = type[0] >= 'A' && type[0] <= 'Z';
    if (previous.empty() && type != "IHDR") in.fail_at(at, "expected the IHDR chunk first, found " + type);
    if (idat_seen && type != "IDAT") idat_over = true;

    if (type == "IHDR") {
      if (!previous.empty()) in.fail_at(at, "a second IHDR chunk");
      if (length != 13) in.fail_at(at, "IHDR is " + std::to_string(length) + " bytes, expected 13");
      width = in.be(at + 8, 4, "the width");
      height = in.be(at + 12, 4, "the height");
      depth = data[8], color = data[9];
      in.check_size(std::int64_t(width), std::int64_t(height), limits);
      const bool ok = (color == 0 && (depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16)) ||
                      (color == 3 && (depth == 1 || depth == 2 || depth == 4 || depth == 8)) ||
                      ((color == 2 || color == 4 || color == 6) && (depth == 8 || depth == 16));
      if (!ok)
        in.fail_at(at + 16,
                   "invalid colour type " + std::to_string(color) + " with bit depth " + std::to_string(depth));
      if (data[10] != 0 || data[11] != 0) in.fail_at(at + 18, "unknown compression or filter method");
      if (data[12] > 1) in.fail_at(at + 20, "unknown interlace method " + std::to_string(data[12]));
      interlaced = data[12] == 1;
      if (interlaced) passes.assign(std::begin(adam7), std::end(adam7));
      channels = color == 0 || color == 3 ? 1 : color == 4 ? 2 : color == 2 ? 3 : 4;
      // The inflated size: each pass's rows, a filter byte each; <= 16 Mi pixels × 8 bytes + rows.
      for (const Pass& pass : passes) {
        const std::uint64_t pw = pass_size(width, pass.x0, pass.dx), ph = pass_size(height, pass.y0, pass.dy);
        if (pw && ph) expected += ph * (1 + (pw * std::uint64_t(channels * depth) + 7) / 8);
      }
    } else if (type == "PLTE") {
      if (idat_seen || !rgb_palette.empty()) in.fail_at(at, "PLTE after IDAT or repeated");
      if (color == 0 || color == 4) in.fail_at(at, "PLTE in a gray image");
      if (length == 0 || length % 3 != 0 || length / 3 > 256)
        in.fail_at(at, "PLTE is " + std::to_string(length) + " bytes, expected 3 per entry, 1 to 256 entries");
      if (color == 3 && length / 3 > (1u << depth))
        in.fail_at(at, "PLTE has " + std::to_string(length / 3) + " entries, more than bit depth " +
                           std::to_string(depth) + " allows");
      rgb_palette.assign(data, data + length);
    } else if (type == "tRNS") {
      if (idat_seen) in.fail_at(at, "tRNS after IDAT");
      if (color == 3) {
        if (rgb_palette.empty() || length > rgb_palette.size() / 3)
          in.fail_at(
              at, "tRNS has " + std::to_string(length) + " entries, more than the palette (or no PLTE before it)");
        alpha_palette.assign(data, data + length);
      } else if ((color == 0 && length == 2) || (color == 2 && length == 6)) {
        for (std::uint32_t c = 0; c < length / 2; ++c) key[c] = data[2 * c] << 8 | data[2 * c + 1];
      } else {
        in.fail_at(
            at, "tRNS of " + std::to_string(length) + " bytes does not fit colour type " + std::to_string(color));
      }
    } else if (type == "IDAT") {
      if (idat_over) in.fail_at(at, "IDAT chunks must be consecutive");
      if (color == 3 && rgb_palette.empty()) in.fail_at(at, "a palette image without PLTE before IDAT");
      if (!idat_seen) {
        if (inflateInit(&zs) != Z_OK) in.fail("zlib inflateInit failed");
        zend.on = true;
        raw.resize(std::size_t(expected) + 1);  // one spare byte shows a stream that is too long
        zs.next_out = raw.data();
        zs.avail_out = uInt(raw.size());
        idat_seen = true;
      }
      if (stream_end && length > 0) in.fail_at(at, "IDAT data after the end of the compressed image data");
      zs.next_in = const_cast<std::uint8_t*>(data);
      zs.avail_in = length;
      while (zs.avail_in > 0 && !stream_end) {
        const int rc = inflate(&zs, Z_NO_FLUSH);
        if (zs.total_out > expected)  // the spare byte was written
          in.fail_at(at, "the compressed image data inflates to more than the " + std::to_string(expected) +
                             " bytes a " + std::to_string(width) + "x" + std::to_string(height) + " image needs");
        if (rc == Z_STREAM_END)
          stream_end = true;
        else if (rc != Z_OK)
          in.fail_at(at + 8 + (length - zs.avail_in),
                     std::string("corrupt compressed image data (zlib: ") + (zs.msg ? zs.msg : zError(rc)) + ")");
      }
      if (stream_end && zs.avail_in > 0)
        in.fail_at(at + 8 + (length - zs.avail_in), "bytes after the end of the compressed image data");
    } else if (type == "IEND") {
      if (length != 0) in.fail_at(at, "IEND must be empty");
      if (!idat_seen) in.fail_at(at, "no IDAT chunk: the image has no pixel data");
      if (!stream_end || zs.total_out != expected)
        in.fail_at(at, "image data truncated: the compressed data inflates to " + std::to_string(zs.total_out) +
                           " of the " + std::to_string(expected) + " bytes a " + std::to_string(width) + "x" +
                           std::to_string(height) + " image needs" + (stream_end ? "" : " and does not end"));
      if (at + 12 != in.size())
        in.fail_at(at + 12, std::to_string(in.size() - at - 12) + " trailing bytes after IEND");
      break;
    } else if (critical) {
      in.fail_at(at + 4, "unknown critical chunk " + type + "; the image cannot be decoded safely");
    }
    previous = type;
    at += 12 + std::uint64_t(length);
  }

  // Each pass (one, or Adam7's seven) is a small image of its own: undo its filters row by row (PNG
  // spec section 9), then convert its samples to gray over white and put them in their places.
  GrayImage g{int(width), int(height), std::vector<std::uint8_t>(std::size_t(width) * height)};
  const std::size_t bpp = std::size_t(std::max(1, channels * depth / 8));  // bytes per complete pixel
  const std::uint32_t maxval = (1u << depth) - 1;
  std::uint8_t* block = raw.data();
  for (const Pass& pass : passes) {
    const std::size_t pw = pass_size(width, pass.x0, pass.dx), ph = pass_size(height, pass.y0, pass.dy);
    if (pw == 0 || ph == 0) continue;
    const std::size_t rb = (pw * std::size_t(channels * depth) + 7) / 8;
    for (std::size_t y = 0; y < ph; ++y) {
      std::uint8_t* row = block + y * (rb + 1);
      const std::uint8_t* up = y ? row - (rb + 1) + 1 : nullptr;
      const std::uint8_t filter = row[0];
      std::uint8_t* p = row + 1;
      if (filter > 4)
        in.fail("filter type " + std::to_string(filter) + " of row " + std::to_string(y) +
                (interlaced ? " of an Adam7 pass" : "") + " is not 0-4 (decompressed data)");
      for (std::size_t i = 0; i < rb; ++i) {
        const int a = i >= bpp ? p[i - bpp] : 0, b = up ? up[i] : 0, c = up && i >= bpp ? up[i - bpp] : 0;
        int pred = 0;
        if (filter == 1) pred = a;
        if (filter == 2) pred = b;
        if (filter == 3) pred = (a + b) / 2;
        if (filter == 4) {
          const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
        }
        p[i] = std::uint8_t(p[i] + pred);
      }
      auto sample = [&](std::size_t k) -> std::uint32_t {  // sample k of the row, at full precision
        if (depth == 16) return std::uint32_t(p[2 * k] << 8 | p[2 * k + 1]);
        if (depth == 8) return p[k];
        const std::size_t bit = k * std::size_t(depth);
        return (p[bit / 8] >> (8 - depth - int(bit % 8))) & maxval;
      };
      const std::size_t out_y = pass.y0 + y * pass.dy;
      for (std::size_t x = 0; x < pw; ++x) {
        const std::size_t s = x * std::size_t(channels);
        unsigned v = 0, alpha = 255;
        if (color == 3) {
          const std::uint32_t index = sample(s);
          if (index >= rgb_palette.size() / 3)
            in.fail("palette index " + std::to_string(index) + " at row " + std::to_string(out_y) +
                    " is beyond the " + std::to_string(rgb_palette.size() / 3) + "-entry palette");
          const std::uint8_t* e = &rgb_palette[3 * index];
          v = di::luma(e[0], e[1], e[2]);
          if (index < alpha_palette.size()) alpha = alpha_palette[index];
        } else if (color == 0 || color == 4) {
          v = di::scale_to_8bit(sample(s), maxval);
          if (color == 4)
            alpha = di::scale_to_8bit(sample(s + 1), maxval);
          else if (key[0] == int(sample(s)))
            alpha = 0;
        } else {
          const std::uint32_t r = sample(s), gr = sample(s + 1), b = sample(s + 2);
          v = di::luma(di::scale_to_8bit(r, maxval), di::scale_to_8bit(gr, maxval), di::scale_to_8bit(b, maxval));
          if (color == 6)
            alpha = di::scale_to_8bit(sample(s + 3), maxval);
          else if (key[0] == int(r) && key[1] == int(gr) && key[2] == int(b))
            alpha = 0;
        }
        g.pixels[out_y * width + pass.x0 + x * pass.dx] = di::over_white(v, alpha);
      }
    }
    block += ph * (rb + 1);
  }
  return g;
}

}  // namespace ctnn::io
