#pragma once
// Binary PGM (P5) and PPM (P6) images, strictly: header numbers checked for overflow and against the
// limits before anything is allocated, maxval 1..65535 (two big-endian bytes per sample above 255),
// samples scaled from maxval to 0..255, and the raster exactly as long as the header says.
#include <cstdint>
#include <span>
#include <string>

#include "image_bytes.hpp"

namespace ctnn::io {

inline GrayImage decode_pnm(std::span<const std::uint8_t> bytes, const std::string& name,
                            const ImageLimits& limits = {}) {
  ImageBytes in(bytes, name, "PNM");
  in.need(0, 2, "magic");
  const char kind = char(in.u8(1, "magic"));
  if (in.u8(0, "magic") != 'P' || (kind != '5' && kind != '6')) {
    if (in.u8(0, "magic") == 'P' && kind >= '1' && kind <= '7')
      in.fail(std::string("P") + kind +
              " (ASCII, bitmap or PAM) is not supported; ctnn reads binary PGM (P5) and PPM (P6)");
    in.fail_at(0, "expected the magic P5 or P6");
  }
  const int channels = kind == '5' ? 1 : 3;
  std::size_t at = 2;
  // A header number after whitespace and # comments, refused as soon as it passes `max`.
  auto number = [&](const char* what, std::uint32_t max) {
    const auto space = [](std::uint8_t c) {
      return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
    };
    if (!space(in.u8(at, "whitespace after the previous header field")))
      in.fail_at(at, std::string("expected whitespace before the ") + what);
    for (;;) {
      const std::uint8_t c = in.u8(at, what);
      if (space(c))
        ++at;
      else if (c == '#')
        while (in.u8(at, "the end of a header comment") != '\n') ++at;
      else
        break;
    }
    const std::size_t start = at;
    std::uint64_t v = 0;
    while (at < in.size() && in.u8(at, what) >= '0' && in.u8(at, what) <= '9') {
      v = v * 10 + (in.u8(at, what) - '0');
      if (v > max) in.fail_at(start, std::string("the ") + what + " is over " + std::to_string(max));
      ++at;
    }
    if (at == start) in.fail_at(at, std::string("expected the ") + what + " (decimal digits)");
    return std::uint32_t(v);
  };
  const std::uint32_t width = number("width", limits.side);
  const std::uint32_t height = number("height", limits.side);
  const std::uint32_t maxval = number("maxval", 65535);
  in.check_size(width, height, limits);
  if (maxval == 0) in.fail("maxval is 0; expected 1 to 65535");
  const std::uint8_t sep = in.u8(at, "the whitespace after maxval");
  if (sep != ' ' && sep != '\t' && sep != '\n' && sep != '\r')
    in.fail_at(at, "expected one whitespace character after maxval");
  ++at;
  const std::uint64_t sample_bytes = maxval > 255 ? 2 : 1;
  const std::uint64_t raster = std::uint64_t(width) * height * std::uint64_t(channels) * sample_bytes;
  const std::uint64_t found = in.size() - at;
  if (found < raster)
    in.fail_at(at, "file truncated: expected " + std::to_string(raster) + " bytes of pixels (" +
                       std::to_string(width) + "x" + std::to_string(height) + ", maxval " +
                       std::to_string(maxval) + "), found " + std::to_string(found));
  if (found > raster)
    in.fail_at(at + raster, std::to_string(found - raster) + " trailing bytes after the " +
                                std::to_string(raster) + "-byte raster");

  GrayImage g{int(width), int(height), std::vector<std::uint8_t>(std::size_t(width) * height)};
  const std::uint8_t* p = in.data() + at;
  auto sample = [&]() -> std::uint32_t {
    std::uint32_t v = *p++;
    if (sample_bytes == 2) v = v << 8 | *p++;
    if (v > maxval)
      in.fail_at(std::uint64_t(p - in.data()) - sample_bytes,
                 "sample " + std::to_string(v) + " is above maxval " + std::to_string(maxval));
    return v;
  };
  for (auto& px : g.pixels) {
    if (channels == 1) {
      px = detail::image::scale_to_8bit(sample(), maxval);
    } else {
      const std::uint32_t r = sample(), gr = sample(), b = sample();
      px = detail::image::luma(detail::image::scale_to_8bit(r, maxval), detail::image::scale_to_8bit(gr, maxval),
                               detail::image::scale_to_8bit(b, maxval));
    }
  }
  return g;
}

}  // namespace ctnn::io
