// The image decoders on bytes made here: every PNG colour type and bit depth, BMP depths and row
// orders, PGM/PPM maxvals, baseline JPEG; and issue 10's hostile files: every truncation refused,
// overflowing headers, bad Huffman tables, progressive JPEG, limits the caller sets.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctnn/io/image.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "image_writers.hpp"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>
// stb_image's JPEG decoder, private to this file, as the reference ctnn's own decoder is checked against.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO
#include <stb/stb_image.h>

namespace {

using ctnn::io::GrayImage;
using ctnn::io::ImageLimits;
using ctnn_test::Bytes;

std::string error_of(const Bytes& b, const ImageLimits& limits = {}) {
  try {
    ctnn::io::decode_gray_image(b, "x.img", limits);
  } catch (const ctnn::io_error& e) {
    return e.what();
  }
  return "no error";
}
std::uint8_t scaled(std::uint32_t v, std::uint32_t maxval) {
  return std::uint8_t(std::lround(v * 255.0 / maxval));
}
std::uint8_t luma(unsigned r, unsigned g, unsigned b) {
  return std::uint8_t((299 * r + 587 * g + 114 * b + 500) / 1000);
}

// Pseudo-random samples in [0, maxval].
std::vector<std::uint32_t> samples(std::size_t n, std::uint32_t maxval, std::uint32_t seed) {
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = (seed = seed * 1664525u + 1013904223u) >> 8, x %= maxval + 1;
  return v;
}
// Packs samples of `depth` bits into rows of `per_row` samples (PNG and BMP order: high bits first).
Bytes pack(const std::vector<std::uint32_t>& s, std::size_t per_row, int depth) {
  Bytes out;
  const std::size_t rb = (per_row * std::size_t(depth) + 7) / 8;
  for (std::size_t r = 0; r * per_row < s.size(); ++r) {
    Bytes row(rb, 0);
    for (std::size_t k = 0; k < per_row; ++k) {
      const std::uint32_t v = s[r * per_row + k];
      if (depth == 16)
        row[2 * k] = std::uint8_t(v >> 8), row[2 * k + 1] = std::uint8_t(v);
      else if (depth == 8)
        row[k] = std::uint8_t(v);
      else
        row[k * depth / 8] |= std::uint8_t(v << (8 - depth - int(k * depth % 8)));
    }
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}
// Every proper prefix of a valid file is refused (issue 10, item 2: truncated files were accepted).
void check_prefixes_refused(const Bytes& b) {
  REQUIRE_NOTHROW(ctnn::io::decode_gray_image(b, "whole"));
  for (std::size_t n = 0; n < b.size(); ++n) {
    const std::string e = error_of(Bytes(b.begin(), b.begin() + std::ptrdiff_t(n)));
    INFO("prefix of " << n << " of " << b.size() << " bytes: " << e);
    REQUIRE(e != "no error");
  }
}

}  // namespace

TEST_CASE("PNG: every colour type and bit depth decodes to the expected gray", "[image][png]") {
  const std::uint32_t w = 13, h = 7;
  for (const int depth : {1, 2, 4, 8, 16}) {
    const std::uint32_t maxval = (1u << depth) - 1;
    // Gray.
    auto s = samples(w * h, maxval, std::uint32_t(depth));
    GrayImage g = ctnn::io::decode_png(ctnn_test::png(w, h, 0, depth, pack(s, w, depth)), "g");
    REQUIRE(g.width == int(w));
    REQUIRE(g.height == int(h));
    for (std::size_t i = 0; i < s.size(); ++i) CHECK(int(g.pixels[i]) == scaled(s[i], maxval));
    if (depth == 16) continue;
    // Palette: entry k is (k, 2k, 3k) mod 256; entry 1 is transparent (white).
    const std::uint32_t entries = 1u << depth;
    Bytes plte;
    for (std::uint32_t k = 0; k < entries; ++k)
      plte.insert(plte.end(), {std::uint8_t(k), std::uint8_t(2 * k), std::uint8_t(3 * k)});
    g = ctnn::io::decode_png(ctnn_test::png(w, h, 3, depth, pack(s, w, depth), plte, Bytes{255, 0}), "p");
    for (std::size_t i = 0; i < s.size(); ++i) {
      const std::uint32_t k = s[i];
      CHECK(int(g.pixels[i]) == (k == 1 ? 255 : luma(k & 255, 2 * k & 255, 3 * k & 255)));
    }
  }
  for (const int depth : {8, 16}) {
    const std::uint32_t maxval = (1u << depth) - 1;
    auto s = samples(w * h * 4, maxval, 99);
    // RGB, gray + alpha, RGBA.
    GrayImage g = ctnn::io::decode_png(
        ctnn_test::png(w, h, 2, depth,
                       pack(std::vector<std::uint32_t>(s.begin(), s.begin() + w * h * 3), w * 3, depth)),
        "rgb");
    for (std::size_t i = 0; i < w * h; ++i)
      CHECK(int(g.pixels[i]) ==
            luma(scaled(s[3 * i], maxval), scaled(s[3 * i + 1], maxval), scaled(s[3 * i + 2], maxval)));
    g = ctnn::io::decode_png(
        ctnn_test::png(w, h, 4, depth,
                       pack(std::vector<std::uint32_t>(s.begin(), s.begin() + w * h * 2), w * 2, depth)),
        "ga");
    for (std::size_t i = 0; i < w * h; ++i) {
      const unsigned v = scaled(s[2 * i], maxval), a = scaled(s[2 * i + 1], maxval);
      CHECK(int(g.pixels[i]) == int((v * a + 255 * (255 - a) + 127) / 255));
    }
    g = ctnn::io::decode_png(ctnn_test::png(w, h, 6, depth, pack(s, w * 4, depth)), "rgba");
    for (std::size_t i = 0; i < w * h; ++i) {
      const unsigned v =
          luma(scaled(s[4 * i], maxval), scaled(s[4 * i + 1], maxval), scaled(s[4 * i + 2], maxval));
      const unsigned a = scaled(s[4 * i + 3], maxval);
      CHECK(int(g.pixels[i]) == int((v * a + 255 * (255 - a) + 127) / 255));
    }
  }
  // Adam7 interlacing: every colour type and depth, sizes that leave some passes empty.
  for (const auto& [color, depth] : std::vector<std::pair<int, int>>{
           {0, 1}, {0, 4}, {0, 8}, {0, 16}, {2, 8}, {2, 16}, {4, 8}, {6, 16}, {3, 2}}) {
    for (const auto& [iw, ih] :
         std::vector<std::pair<std::uint32_t, std::uint32_t>>{{1, 1}, {3, 2}, {9, 10}, {17, 5}}) {
      const int channels = color == 0 || color == 3 ? 1 : color == 4 ? 2 : color == 2 ? 3 : 4;
      const std::uint32_t maxval = (1u << depth) - 1;
      const auto s = samples(std::size_t(iw) * ih * std::size_t(channels), maxval, iw * 31 + ih);
      Bytes plte(color == 3 ? 12 : 0);  // 4 gray entries
      for (std::size_t k = 0; k < plte.size(); ++k) plte[k] = std::uint8_t(60 * (k / 3));
      const GrayImage a =
          ctnn::io::decode_png(ctnn_test::png_from_samples(iw, ih, color, depth, s, true, plte), "adam7");
      const GrayImage b =
          ctnn::io::decode_png(ctnn_test::png_from_samples(iw, ih, color, depth, s, false, plte), "plain");
      INFO("colour " << color << " depth " << depth << " size " << iw << "x" << ih);
      CHECK(a.pixels == b.pixels);
      if (color == 0)
        for (std::size_t i = 0; i < s.size(); ++i) CHECK(int(a.pixels[i]) == scaled(s[i], maxval));
    }
  }
  check_prefixes_refused(ctnn_test::png_from_samples(9, 10, 0, 8, samples(90, 255, 1), true));

  // A gray colour key (tRNS) makes that level transparent.
  const GrayImage k = ctnn::io::decode_png(ctnn_test::png(2, 1, 0, 8, Bytes{10, 20}, {}, Bytes{0, 10}), "key");
  CHECK(k.pixels == std::vector<std::uint8_t>{255, 20});
}

TEST_CASE("PNG: hostile and broken files are refused with the offset and what was expected", "[image][png]") {
  const Bytes good = ctnn_test::png(20, 10, 0, 8, Bytes(200, 77), {}, {}, 16);
  check_prefixes_refused(good);
  auto with = [&](std::size_t at, std::uint8_t v) {
    Bytes b = good;
    b[at] = v;
    return error_of(b);
  };
  CHECK_THAT(with(42, 0xff), Catch::Contains("at byte offset 53: CRC mismatch in chunk tEXt"));
  CHECK_THAT(error_of([&] {
               Bytes b = good;
               b.push_back(0);
               return b;
             }()),
             Catch::Contains("1 trailing bytes after IEND"));
  // Interlaced, bad depth, a chunk before IHDR, an unknown critical chunk: rebuilt with valid CRCs.
  Bytes ihdr;
  ctnn_test::put_be32(ihdr, 4);
  ctnn_test::put_be32(ihdr, 4);
  auto file = [](std::vector<std::pair<const char*, Bytes>> chunks) {
    Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    for (const auto& [t, d] : chunks) ctnn_test::png_chunk(out, t, d);
    return out;
  };
  Bytes interlaced = ihdr, depth3 = ihdr;
  interlaced.insert(interlaced.end(), {8, 0, 0, 0, 1});
  depth3.insert(depth3.end(), {3, 0, 0, 0, 0});
  CHECK_THAT(error_of(file({{"IHDR", interlaced}, {"IEND", {}}})), Catch::Contains("no IDAT chunk"));
  CHECK_THAT(error_of(file({{"IHDR", depth3}})), Catch::Contains("invalid colour type 0 with bit depth 3"));
  CHECK_THAT(error_of(file({{"tEXt", Bytes{'a', 0}}})),
             Catch::Contains("expected the IHDR chunk first, found tEXt"));
  Bytes ok_ihdr = ihdr;
  ok_ihdr.insert(ok_ihdr.end(), {8, 0, 0, 0, 0});
  CHECK_THAT(error_of(file({{"IHDR", ok_ihdr}, {"ZZZZ", {}}})), Catch::Contains("unknown critical chunk ZZZZ"));
  CHECK_THAT(error_of(file({{"IHDR", ok_ihdr}, {"IEND", {}}})), Catch::Contains("no IDAT chunk"));
  // Image data too long (a 4x4 image's rows for 4x5), too short, a bad filter byte.
  auto idat = [](const Bytes& raw) {
    uLongf n = compressBound(uLong(raw.size()));
    Bytes z(n);
    compress(z.data(), &n, raw.data(), uLong(raw.size()));
    z.resize(n);
    return z;
  };
  CHECK_THAT(error_of(file({{"IHDR", ok_ihdr}, {"IDAT", idat(Bytes(25, 0))}, {"IEND", {}}})),
             Catch::Contains("inflates to more than the 20 bytes a 4x4 image needs"));
  CHECK_THAT(error_of(file({{"IHDR", ok_ihdr}, {"IDAT", idat(Bytes(15, 0))}, {"IEND", {}}})),
             Catch::Contains("image data truncated: the compressed data inflates to 15 of the 20 bytes"));
  Bytes bad_filter(20, 0);
  bad_filter[5] = 7;
  CHECK_THAT(error_of(file({{"IHDR", ok_ihdr}, {"IDAT", idat(bad_filter)}, {"IEND", {}}})),
             Catch::Contains("filter type 7 of row 1 is not 0-4"));
  // Palette index beyond the palette.
  Bytes pal_ihdr = ihdr;
  pal_ihdr.insert(pal_ihdr.end(), {8, 3, 0, 0, 0});
  CHECK_THAT(error_of(file({{"IHDR", pal_ihdr},
                            {"PLTE", Bytes(6, 0)},
                            {"IDAT", idat(Bytes{0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})},
                            {"IEND", {}}})),
             Catch::Contains("palette index 2 at row 0 is beyond the 2-entry palette"));
  // Dimensions over the limits are refused from the header, before any allocation.
  Bytes huge;
  ctnn_test::put_be32(huge, 0x7fffffff);
  ctnn_test::put_be32(huge, 0x7fffffff);
  huge.insert(huge.end(), {8, 6, 0, 0, 0});
  CHECK_THAT(error_of(file({{"IHDR", huge}})),
             Catch::Contains("image is 2147483647x2147483647, a side over the 16384-pixel limit"));
}

TEST_CASE("BMP: depths, bit fields, and top-down rows (issue 10, item 6)", "[image][bmp]") {
  const std::int32_t w = 11, h = 5;
  const auto s = samples(std::size_t(w * h), 255, 5);
  std::vector<std::uint8_t> gray(s.begin(), s.end());
  // 24-bit, both row orders.
  Bytes bgr;
  for (const auto v : s) bgr.insert(bgr.end(), {std::uint8_t(v), std::uint8_t(255 - v), std::uint8_t(v / 2)});
  std::vector<std::uint8_t> want(std::size_t(w * h));
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = luma(s[i] / 2, 255 - s[i], s[i]);
  CHECK(ctnn::io::decode_bmp(ctnn_test::bmp(w, h, 24, false, bgr), "b").pixels == want);
  CHECK(ctnn::io::decode_bmp(ctnn_test::bmp(w, h, 24, true, bgr), "t").pixels == want);
  // 8, 4 and 1 bits with a gray palette (entry k = level k * 255 / (entries - 1)).
  for (const int bpp : {1, 4, 8}) {
    const std::uint32_t entries = 1u << bpp;
    const auto idx = samples(std::size_t(w * h), entries - 1, std::uint32_t(bpp));
    Bytes palette;
    for (std::uint32_t k = 0; k < entries; ++k) {
      const auto v = std::uint8_t(k * 255 / (entries - 1));
      palette.insert(palette.end(), {v, v, v, 0});
    }
    const GrayImage g =
        ctnn::io::decode_bmp(ctnn_test::bmp(w, h, bpp, bpp == 4, pack(idx, std::size_t(w), bpp), palette), "p");
    for (std::size_t i = 0; i < idx.size(); ++i) CHECK(int(g.pixels[i]) == int(idx[i] * 255 / (entries - 1)));
  }
  // 16-bit 5-6-5 bit fields, 32-bit BI_RGB.
  Bytes p565, p32;
  for (const auto v : s) {
    const std::uint32_t r = v >> 3, g6 = v >> 2, b = 31 - (v >> 3);
    ctnn_test::put_le(p565, r << 11 | g6 << 5 | b, 2);
    p32.insert(p32.end(), {std::uint8_t(v), std::uint8_t(v), std::uint8_t(v), 0});
  }
  const GrayImage g565 =
      ctnn::io::decode_bmp(ctnn_test::bmp(w, h, 16, false, p565, {}, 3, {0xf800, 0x07e0, 0x001f}), "565");
  for (std::size_t i = 0; i < s.size(); ++i)
    CHECK(int(g565.pixels[i]) == luma(scaled(s[i] >> 3, 31), scaled(s[i] >> 2, 63), scaled(31 - (s[i] >> 3), 31)));
  CHECK(ctnn::io::decode_bmp(ctnn_test::bmp(w, h, 32, true, p32), "32").pixels == gray);

  check_prefixes_refused(ctnn_test::bmp(w, h, 24, true, bgr));
  CHECK_THAT(error_of(ctnn_test::bmp(w, h, 8, false, Bytes(std::size_t(w * h), 1), Bytes(4, 0), 1)),
             Catch::Contains("RLE-compressed BMP is not supported"));
  CHECK_THAT(error_of(ctnn_test::bmp(w, h, 8, false, Bytes(std::size_t(w * h), 3), Bytes(8, 0))),
             Catch::Contains("palette index 3 is beyond the 2-entry palette"));
  CHECK_THAT(error_of(ctnn_test::bmp(w, h, 16, false, p565, {}, 3, {0xf0f0, 0x07e0, 0x001f})),
             Catch::Contains("channel mask 61680 is not a non-empty run of bits"));
  CHECK_THAT(error_of(ctnn_test::bmp(w, std::int32_t(0x80000000), 24, false, {})),
             Catch::Contains("a side over the"));
}

TEST_CASE("PNM: maxval other than 255, 16-bit samples, comments (issue 10, items 1, 4, 6)", "[image][pnm]") {
  for (const std::uint32_t maxval : {1u, 15u, 255u, 1000u, 65535u}) {
    const auto s = samples(7 * 3, maxval, maxval);
    const GrayImage g = ctnn::io::decode_pnm(ctnn_test::pnm(1, 7, 3, maxval, s, "made by ctnn"), "g");
    for (std::size_t i = 0; i < s.size(); ++i) CHECK(int(g.pixels[i]) == scaled(s[i], maxval));
    const auto rgb = samples(7 * 3 * 3, maxval, maxval + 1);
    const GrayImage c = ctnn::io::decode_pnm(ctnn_test::pnm(3, 7, 3, maxval, rgb), "c");
    for (std::size_t i = 0; i < 21; ++i)
      CHECK(int(c.pixels[i]) ==
            luma(scaled(rgb[3 * i], maxval), scaled(rgb[3 * i + 1], maxval), scaled(rgb[3 * i + 2], maxval)));
  }
  // Item 1: a 16-bit 1000x1000 PGM was a heap over-read through stb.
  const auto big = samples(1000 * 1000, 65535, 3);
  const GrayImage g = ctnn::io::decode_pnm(ctnn_test::pnm(1, 1000, 1000, 65535, big), "big");
  CHECK(int(g.pixels.back()) == scaled(big.back(), 65535));
  check_prefixes_refused(ctnn_test::pnm(1, 5, 4, 1000, samples(20, 1000, 1)));
  auto err = [](const std::string& s) { return error_of(Bytes(s.begin(), s.end())); };
  // Item 4: header numbers that overflow int are refused as they are read.
  CHECK_THAT(err("P5 99999999999999999999999 1 255\n"),
             Catch::Contains("at byte offset 3: the width is over 16384"));
  CHECK_THAT(err("P5 4294967297 1 255\n"), Catch::Contains("the width is over 16384"));
  CHECK_THAT(err("P5 1 1 65536\n"), Catch::Contains("the maxval is over 65535"));
  CHECK_THAT(err("P5 1 1 0\n"), Catch::Contains("maxval is 0"));
  CHECK_THAT(err("P5 0 1 255\n"), Catch::Contains("image is 0x1"));
  CHECK_THAT(err("P5 2 1 255\nab!"), Catch::Contains("1 trailing bytes after the 2-byte raster"));
  CHECK_THAT(err("P5 2 1 10\n\x05\x0b"), Catch::Contains("sample 11 is above maxval 10"));
  CHECK_THAT(err("P5 16000 16000 255\n"), Catch::Contains("more than the 16777216-pixel limit"));
  CHECK_THAT(err("P5 1 1 255 "), Catch::Contains("file truncated: expected 1 bytes of pixels"));
}

TEST_CASE("JPEG: baseline decodes, truncated, bad tables, progressive and huge are refused", "[image][jpeg]") {
  // An 8x8-block-friendly gradient, written by stb_image_write (baseline, 4:2:0 colour).
  const int w = 48, h = 32;
  std::vector<std::uint8_t> rgb(std::size_t(w * h * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      std::uint8_t* p = &rgb[std::size_t(3 * (y * w + x))];
      p[0] = std::uint8_t(4 * x), p[1] = std::uint8_t(6 * y), p[2] = 128;
    }
  Bytes jpg;
  stbi_write_jpg_to_func(ctnn_test::append_bytes, &jpg, w, h, 3, rgb.data(), 95);
  const GrayImage g = ctnn::io::decode_jpeg(jpg, "j");
  REQUIRE(g.width == w);
  REQUIRE(g.height == h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const std::uint8_t* p = &rgb[std::size_t(3 * (y * w + x))];
      CHECK(std::abs(int(g.pixels[std::size_t(y * w + x)]) - luma(p[0], p[1], p[2])) <= 6);
    }
  check_prefixes_refused(jpg);

  // Find a marker segment in the file.
  auto find = [&](std::uint8_t marker) {
    for (std::size_t i = 2; i + 1 < jpg.size(); ++i)
      if (jpg[i] == 0xff && jpg[i + 1] == marker) return i;
    FAIL("no marker");
    return std::size_t{0};
  };
  // Item 3: Huffman code counts summing to more than 256 (stb wrote out of bounds) or over-full.
  Bytes b = jpg;
  const std::size_t dht = find(0xc4);
  for (int k = 0; k < 16; ++k) b[dht + 5 + std::size_t(k)] = 255;
  CHECK_THAT(error_of(b), Catch::Contains("marker FF C4: Huffman code lengths do not form a prefix code"));
  b = jpg;
  b[dht + 5] = 3;  // three 1-bit codes
  CHECK_THAT(error_of(b), Catch::Contains("do not form a prefix code"));
  // Item 5: progressive files are refused at their frame header, at once.
  b = jpg;
  b[find(0xc0) + 1] = 0xc2;
  CHECK_THAT(error_of(b), Catch::Contains("progressive JPEG is not supported"));
  b = jpg;
  b[find(0xc0) + 1] = 0xc9;
  CHECK_THAT(error_of(b), Catch::Contains("arithmetic-coded JPEG is not supported"));
  // A frame over the limits, a 12-bit frame, a scan with an undefined table.
  b = jpg;
  const std::size_t sof = find(0xc0);
  b[sof + 5] = 0xff, b[sof + 6] = 0xff, b[sof + 7] = 0xff, b[sof + 8] = 0xff;
  CHECK_THAT(error_of(b), Catch::Contains("image is 65535x65535, a side over the 16384-pixel limit"));
  b = jpg;
  b[sof + 4] = 12;
  CHECK_THAT(error_of(b), Catch::Contains("12-bit samples are not supported"));
  b = jpg;
  b[find(0xda) + 6] = 0x33;  // first scan component: DC and AC table 3
  CHECK_THAT(error_of(b), Catch::Contains("scan uses an undefined Huffman table"));
  // The caller's limits.
  ImageLimits small;
  small.pixels = 1000;
  CHECK_THAT(error_of(jpg, small), Catch::Contains("image is 48x32, more than the 1000-pixel limit"));
}

namespace {

Bytes jpeg_of(int w, int h, int comp, int quality, std::uint32_t seed) {
  // A smooth gradient with noise: blocks with both low and high frequencies.
  std::vector<std::uint32_t> noise = samples(std::size_t(w * h * comp), 60, seed);
  Bytes pixels(noise.size());
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < comp; ++c) {
        const std::size_t i = std::size_t((y * w + x) * comp + c);
        pixels[i] = std::uint8_t((3 * x + 5 * y + 70 * c) % 196 + noise[i]);
      }
  Bytes out;
  stbi_write_jpg_to_func(ctnn_test::append_bytes, &out, w, h, comp, pixels.data(), quality);
  return out;
}

// The largest difference between ctnn's gray image and stb_image's (its luma-only decode).
int difference_from_stb(const Bytes& jpg, const std::string& name) {
  int w = 0, h = 0, channels = 0;
  const std::unique_ptr<stbi_uc, void (*)(void*)> ref(
      stbi_load_from_memory(jpg.data(), int(jpg.size()), &w, &h, &channels, 1), stbi_image_free);
  REQUIRE(ref);
  const GrayImage g = ctnn::io::decode_jpeg(jpg, name);
  REQUIRE(g.width == w);
  REQUIRE(g.height == h);
  int worst = 0;
  for (std::size_t i = 0; i < g.pixels.size(); ++i) worst = std::max(worst, std::abs(int(g.pixels[i]) - ref.get()[i]));
  return worst;
}

const std::filesystem::path jpeg_corpus =
    std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "fuzz" / "corpus" / "jpeg";

Bytes slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("JPEG: ctnn's decoder agrees with stb_image", "[image][jpeg]") {
  // stb_image_write: gray, and YCbCr 4:2:0 (quality <= 90) or 4:4:4; sizes that end mid-block and
  // mid-MCU. Both decoders output the luma component; their IDCTs round differently, by at most 1.
  std::uint32_t seed = 1;
  for (const auto& [w, h] : {std::pair{1, 1}, {7, 9}, {16, 16}, {33, 17}, {100, 75}})
    for (const int comp : {1, 3})
      for (const int quality : {10, 50, 90, 100}) {
        INFO(w << "x" << h << ", " << comp << " components, quality " << quality);
        CHECK(difference_from_stb(jpeg_of(w, h, comp, quality, ++seed), "j") <= 1);
      }
  // Files from libjpeg's cjpeg (fuzz/corpus/jpeg): restart markers after every block, two scans
  // (Y with Cb, then Cr) with restart markers, 4x1 sampling, RGB coding (ids 'R' 'G' 'B'), whose
  // gray is ctnn's BT.601 luma against stb's 8-bit approximation of it (within 2).
  CHECK(difference_from_stb(slurp(jpeg_corpus / "gray_restart.jpg"), "restart") <= 1);
  CHECK(difference_from_stb(slurp(jpeg_corpus / "two_scans_restart.jpg"), "two scans") <= 1);
  CHECK(difference_from_stb(slurp(jpeg_corpus / "sampling_4x1.jpg"), "4x1") <= 1);
  CHECK(difference_from_stb(slurp(jpeg_corpus / "rgb_coded.jpg"), "rgb") <= 2);
}

TEST_CASE("JPEG: corrupt image data is refused where it goes wrong", "[image][jpeg]") {
  const Bytes restart = slurp(jpeg_corpus / "gray_restart.jpg");  // 16x16 gray, a restart every block
  auto find = [](const Bytes& b, std::uint8_t marker) {
    for (std::size_t i = 2; i + 1 < b.size(); ++i)
      if (b[i] == 0xff && b[i + 1] == marker) return i;
    FAIL("no marker");
    return std::size_t{0};
  };
  REQUIRE_NOTHROW(ctnn::io::decode_jpeg(restart, "j"));
  // A restart marker out of sequence, or missing.
  Bytes b = restart;
  b[find(b, 0xd1) + 1] = 0xd5;
  CHECK_THAT(error_of(b), Catch::Contains("scan 1: expected restart marker FF D1"));
  b = restart;
  const std::size_t rst1 = find(b, 0xd1);
  b.erase(b.begin() + std::ptrdiff_t(rst1), b.begin() + std::ptrdiff_t(rst1 + 2));
  CHECK_THAT(error_of(b), Catch::Contains("scan 1: expected restart marker FF D1"));
  // Image data cut short, then EOI: the scan runs out of bits in the middle of a block.
  const Bytes whole = jpeg_of(48, 32, 1, 90, 7);
  const std::size_t sos = find(whole, 0xda), data = sos + 2 + std::size_t(whole[sos + 2] << 8 | whole[sos + 3]);
  for (const std::size_t keep : {std::size_t{1}, std::size_t{20}, (whole.size() - data) / 2}) {
    b = Bytes(whole.begin(), whole.begin() + std::ptrdiff_t(data + keep));
    b.push_back(0xff), b.push_back(0xd9);
    INFO("image data cut to " << keep << " bytes");
    CHECK_THAT(error_of(b), Catch::Contains("x.img: JPEG: at byte offset") &&
                                Catch::Contains(": scan 1: the image data ends in the middle of a block"));
  }
}

TEST_CASE("image: formats ctnn does not read are named, limits apply to every format", "[image]") {
  CHECK_THAT(error_of(Bytes{'G', 'I', 'F', '8', '9', 'a'}), Catch::Contains("x.img: GIF is not supported"));
  CHECK_THAT(error_of(Bytes{'I', 'I', '*', 0, 8, 0}), Catch::Contains("TIFF is not supported"));
  CHECK_THAT(
      error_of(Bytes{'\x1b', '[', '2', 'J'}),
      Catch::Equals("x.img: unrecognised format; ctnn reads PNG, JPEG (baseline), BMP and binary PGM/PPM images"));
  ImageLimits tiny;
  tiny.side = 10;
  CHECK_THAT(error_of(ctnn_test::pnm(1, 11, 1, 255, std::vector<std::uint32_t>(11, 0)), tiny),
             Catch::Contains("the width is over 10"));
  CHECK_THAT(error_of(ctnn_test::bmp(11, 1, 24, false, Bytes(33, 0)), tiny),
             Catch::Contains("a side over the 10-pixel limit"));
  CHECK_THAT(error_of(ctnn_test::png(11, 1, 0, 8, Bytes(11, 0)), tiny),
             Catch::Contains("a side over the 10-pixel limit"));
}
