#pragma once
// Windows BMP images, strictly: BITMAPINFOHEADER and its V2-V5 extensions; 1, 4 and 8 bits per pixel
// with a palette, 24 bits, 16 and 32 bits (BI_RGB or BI_BITFIELDS); bottom-up or top-down (negative
// height). Palette, masks and pixel rows are checked to lie inside the file before they are read;
// RLE compression, OS/2 headers and embedded PNG/JPEG are refused. Alpha is ignored (opaque).
#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "image_bytes.hpp"

namespace ctnn::io {

inline GrayImage decode_bmp(std::span<const std::uint8_t> bytes, const std::string& name,
                            const ImageLimits& limits = {}) {
  ImageBytes in(bytes, name, "BMP");
  if (in.le(0, 2, "magic") != 0x4d42) in.fail_at(0, "expected the magic \"BM\"");
  const std::uint32_t pixels_at = in.le(10, 4, "the pixel data offset");
  const std::uint32_t dib = in.le(14, 4, "the header size");
  if (dib != 40 && dib != 52 && dib != 56 && dib != 108 && dib != 124)
    in.fail_at(14, "header size " + std::to_string(dib) +
                       " is not supported; expected 40, 52, 56, 108 or 124 (BITMAPINFOHEADER to BITMAPV5HEADER)");
  in.need(14, dib, "the BITMAPINFOHEADER");
  const auto width = std::int32_t(in.le(18, 4, "the width"));
  const auto raw_height = std::int32_t(in.le(22, 4, "the height"));
  const bool top_down = raw_height < 0;
  const std::int64_t height = top_down ? -std::int64_t(raw_height) : raw_height;
  in.check_size(width, height, limits);
  if (in.le(26, 2, "planes") != 1) in.fail_at(26, "planes must be 1");
  const std::uint32_t bpp = in.le(28, 2, "bits per pixel");
  const std::uint32_t compression = in.le(30, 4, "the compression");
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32)
    in.fail_at(28, std::to_string(bpp) + " bits per pixel is not supported; expected 1, 4, 8, 16, 24 or 32");
  const bool bitfields = compression == 3 || compression == 6;
  if (compression == 1 || compression == 2)
    in.fail_at(30, "RLE-compressed BMP is not supported; save it uncompressed");
  if (compression != 0 && !(bitfields && (bpp == 16 || bpp == 32)))
    in.fail_at(30,
               "compression " + std::to_string(compression) + " with " + std::to_string(bpp) +
                   " bits per pixel is not supported; expected BI_RGB (0), or BI_BITFIELDS (3) at 16 or 32 bits");

  // Channel masks: from the header (V2+) or the 12 bytes after a BITMAPINFOHEADER.
  std::uint32_t masks[3] = {0x7c00, 0x03e0, 0x001f};  // 16-bit BI_RGB is 5-5-5
  if (bpp == 32) masks[0] = 0xff0000, masks[1] = 0x00ff00, masks[2] = 0x0000ff;
  std::uint64_t after_header = 14 + std::uint64_t(dib);
  if (bitfields) {
    const std::uint64_t m = dib >= 52 ? 54 : after_header;
    for (int c = 0; c < 3; ++c) masks[c] = in.le(m + 4 * std::uint64_t(c), 4, "the channel masks");
    if (dib < 52) after_header += compression == 6 ? 16 : 12;
    for (int c = 0; c < 3; ++c) {
      const std::uint32_t v = masks[c];
      // Non-empty, contiguous (all ones once shifted down), within the pixel's bits.
      const std::uint32_t run = v ? v >> std::countr_zero(v) : 0;
      if (v == 0 || (bpp == 16 && v > 0xffff) || (run & (run + 1)) != 0)
        in.fail("channel mask " + std::to_string(v) + " is not a non-empty run of bits within the pixel");
    }
  }

  std::vector<std::uint8_t> palette;  // gray level per entry
  if (bpp <= 8) {
    const std::uint32_t used = in.le(46, 4, "the palette size");
    const std::uint32_t entries = used ? used : 1u << bpp;
    if (entries > (1u << bpp))
      in.fail_at(46, "palette of " + std::to_string(used) + " entries; at most " + std::to_string(1u << bpp) +
                         " at " + std::to_string(bpp) + " bits per pixel");
    in.need(after_header, 4 * std::uint64_t(entries), "the palette");
    if (after_header + 4 * std::uint64_t(entries) > pixels_at)
      in.fail_at(after_header, "the palette runs past the pixel data offset " + std::to_string(pixels_at));
    for (std::uint32_t k = 0; k < entries; ++k) {
      const std::uint8_t* q = in.data() + after_header + 4 * k;  // B, G, R, reserved
      palette.push_back(detail::image::luma(q[2], q[1], q[0]));
    }
  }
  if (pixels_at < after_header)
    in.fail_at(10, "pixel data offset " + std::to_string(pixels_at) + " is inside the header");
  const std::uint64_t stride = (std::uint64_t(width) * bpp + 31) / 32 * 4;
  in.need(pixels_at, stride * std::uint64_t(height),
          "pixel rows (" + std::to_string(height) + " of " + std::to_string(stride) + " bytes)");

  GrayImage g{width, int(height), std::vector<std::uint8_t>(std::size_t(width) * std::size_t(height))};
  auto channel = [&](std::uint32_t v, std::uint32_t mask) {
    const int shift = std::countr_zero(mask);
    return detail::image::scale_to_8bit((v & mask) >> shift, mask >> shift);
  };
  for (std::int64_t y = 0; y < height; ++y) {
    const std::uint64_t row_at = pixels_at + stride * std::uint64_t(top_down ? y : height - 1 - y);
    const std::uint8_t* row = in.data() + row_at;
    std::uint8_t* out = g.pixels.data() + std::size_t(y) * std::size_t(width);
    for (std::int32_t x = 0; x < width; ++x) {
      if (bpp <= 8) {
        const unsigned bit = unsigned(x) * bpp;
        const unsigned index = (row[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
        if (index >= palette.size())
          in.fail_at(row_at + bit / 8, "palette index " + std::to_string(index) + " is beyond the " +
                                           std::to_string(palette.size()) + "-entry palette");
        out[x] = palette[index];
      } else if (bpp == 24) {
        const std::uint8_t* p = row + 3 * x;
        out[x] = detail::image::luma(p[2], p[1], p[0]);
      } else {
        const std::uint8_t* p = row + std::size_t(x) * (bpp / 8);
        const std::uint32_t v = bpp == 16 ? std::uint32_t(p[0] | p[1] << 8)
                                          : std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 |
                                                std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
        out[x] = detail::image::luma(channel(v, masks[0]), channel(v, masks[1]), channel(v, masks[2]));
      }
    }
  }
  return g;
}

}  // namespace ctnn::io
