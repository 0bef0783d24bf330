#pragma once
// Small writers for the image formats ctnn reads, for tests and fuzz seeds: PNG of any colour type
// and bit depth (every filter type used, chunks split), BMP of any depth, either row order, and
// binary PGM/PPM of any maxval. They write what the specifications say, independently of ctnn's readers.
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ctnn_test {

using Bytes = std::vector<std::uint8_t>;

// The callback for stb_image_write's *_to_func writers: appends each chunk to the Bytes at `context`.
inline void append_bytes(void* context, void* data, int n) {
  auto* out = static_cast<Bytes*>(context);
  out->insert(out->end(), static_cast<const std::uint8_t*>(data), static_cast<const std::uint8_t*>(data) + n);
}

inline void put_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(std::uint8_t(v >> s));
}
inline void put_le(Bytes& b, std::uint32_t v, int n) {
  for (int k = 0; k < n; ++k) b.push_back(std::uint8_t(v >> (8 * k)));
}

inline void png_chunk(Bytes& out, const char* type, const Bytes& data) {
  put_be32(out, std::uint32_t(data.size()));
  const std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put_be32(out, std::uint32_t(crc32(0, out.data() + start, uInt(data.size() + 4))));
}

// `rows`: height rows of packed samples (row_bytes each, as PNG stores them before filtering).
// Row y is filtered with filter type y % 5; the compressed data is split into IDATs of `idat` bytes.
inline Bytes png(std::uint32_t w, std::uint32_t h, int color, int depth, const Bytes& rows, const Bytes& plte = {},
                 const Bytes& trns = {}, std::size_t idat = 1000) {
  const int channels = color == 0 || color == 3 ? 1 : color == 4 ? 2 : color == 2 ? 3 : 4;
  const std::size_t rb = (std::size_t(w) * std::size_t(channels * depth) + 7) / 8;
  const std::size_t bpp = std::size_t(channels * depth >= 8 ? channels * depth / 8 : 1);
  Bytes filtered;
  for (std::size_t y = 0; y < h; ++y) {
    const int f = int(y % 5);
    filtered.push_back(std::uint8_t(f));
    for (std::size_t i = 0; i < rb; ++i) {
      const int x = rows[y * rb + i];
      const int a = i >= bpp ? rows[y * rb + i - bpp] : 0, b = y ? rows[(y - 1) * rb + i] : 0,
                c = y && i >= bpp ? rows[(y - 1) * rb + i - bpp] : 0;
      const int p = a + b - c, pa = p > a ? p - a : a - p, pb = p > b ? p - b : b - p, pc = p > c ? p - c : c - p;
      const int pred = f == 0   ? 0
                       : f == 1 ? a
                       : f == 2 ? b
                       : f == 3 ? (a + b) / 2
                                : (pa <= pb && pa <= pc ? a
                                   : pb <= pc           ? b
                                                        : c);
      filtered.push_back(std::uint8_t(x - pred));
    }
  }
  uLongf zn = compressBound(uLong(filtered.size()));
  Bytes z(zn);
  compress2(z.data(), &zn, filtered.data(), uLong(filtered.size()), 9);
  z.resize(zn);
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  put_be32(ihdr, w);
  put_be32(ihdr, h);
  ihdr.insert(ihdr.end(), {std::uint8_t(depth), std::uint8_t(color), 0, 0, 0});
  png_chunk(out, "IHDR", ihdr);
  png_chunk(out, "tEXt", Bytes{'C', 'o', 'm', 'm', 'e', 'n', 't', 0, 'c', 't', 'n', 'n'});
  if (!plte.empty()) png_chunk(out, "PLTE", plte);
  if (!trns.empty()) png_chunk(out, "tRNS", trns);
  for (std::size_t at = 0; at < z.size(); at += idat)
    png_chunk(out, "IDAT",
              Bytes(z.begin() + std::ptrdiff_t(at), z.begin() + std::ptrdiff_t(std::min(z.size(), at + idat))));
  png_chunk(out, "IEND", {});
  return out;
}

// A PNG from samples (channels per pixel, row-major, full precision), interlaced with Adam7 when
// `adam7`: each pass's pixels packed and filtered as an image of its own.
inline Bytes png_from_samples(std::uint32_t w, std::uint32_t h, int color, int depth,
                              const std::vector<std::uint32_t>& samples, bool adam7, const Bytes& plte = {}) {
  const int channels = color == 0 || color == 3 ? 1 : color == 4 ? 2 : color == 2 ? 3 : 4;
  struct Pass {
    std::uint32_t x0, y0, dx, dy;
  };
  std::vector<Pass> passes = {{0, 0, 1, 1}};
  if (adam7)
    passes = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
  Bytes filtered;
  for (const auto& p : passes) {
    const std::uint32_t pw = w > p.x0 ? (w - p.x0 + p.dx - 1) / p.dx : 0,
                        ph = h > p.y0 ? (h - p.y0 + p.dy - 1) / p.dy : 0;
    if (!pw || !ph) continue;
    const std::size_t rb = (std::size_t(pw) * std::size_t(channels * depth) + 7) / 8;
    Bytes rows(rb * ph, 0);
    for (std::uint32_t y = 0; y < ph; ++y)
      for (std::uint32_t x = 0; x < pw; ++x)
        for (int c = 0; c < channels; ++c) {
          const std::uint32_t v =
              samples[(std::size_t(p.y0 + y * p.dy) * w + p.x0 + x * p.dx) * std::size_t(channels) +
                      std::size_t(c)];
          const std::size_t k = std::size_t(x) * std::size_t(channels) + std::size_t(c);
          std::uint8_t* row = &rows[y * rb];
          if (depth == 16)
            row[2 * k] = std::uint8_t(v >> 8), row[2 * k + 1] = std::uint8_t(v);
          else if (depth == 8)
            row[k] = std::uint8_t(v);
          else
            row[k * std::size_t(depth) / 8] |= std::uint8_t(v << (8 - depth - int(k * std::size_t(depth) % 8)));
        }
    // Filter with type (row % 5), as png() does.
    const std::size_t bpp = std::size_t(channels * depth >= 8 ? channels * depth / 8 : 1);
    for (std::size_t y = 0; y < ph; ++y) {
      const int f = int(y % 5);
      filtered.push_back(std::uint8_t(f));
      for (std::size_t i = 0; i < rb; ++i) {
        const int x = rows[y * rb + i];
        const int a = i >= bpp ? rows[y * rb + i - bpp] : 0, b = y ? rows[(y - 1) * rb + i] : 0,
                  c = y && i >= bpp ? rows[(y - 1) * rb + i - bpp] : 0;
        const int q = a + b - c, pa = q > a ? q - a : a - q, pb = q > b ? q - b : b - q,
                  pc = q > c ? q - c : c - q;
        const int pred = f == 0   ? 0
                         : f == 1 ? a
                         : f == 2 ? b
                         : f == 3 ? (a + b) / 2
                                  : (pa <= pb && pa <= pc ? a
                                     : pb <= pc           ? b
                                                          : c);
        filtered.push_back(std::uint8_t(x - pred));
      }
    }
  }
  uLongf zn = compressBound(uLong(filtered.size()));
  Bytes z(zn);
  compress2(z.data(), &zn, filtered.data(), uLong(filtered.size()), 9);
  z.resize(zn);
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  Bytes ihdr;
  put_be32(ihdr, w);
  put_be32(ihdr, h);
  ihdr.insert(ihdr.end(), {std::uint8_t(depth), std::uint8_t(color), 0, 0, std::uint8_t(adam7 ? 1 : 0)});
  png_chunk(out, "IHDR", ihdr);
  if (!plte.empty()) png_chunk(out, "PLTE", plte);
  png_chunk(out, "IDAT", z);
  png_chunk(out, "IEND", {});
  return out;
}

// BMP with a BITMAPINFOHEADER. `rows`: |h| rows of packed pixels top row first, row_bytes each (no
// padding); written bottom-up unless top_down. palette: B,G,R,0 per entry.
inline Bytes bmp(std::int32_t w, std::int32_t h, int bpp, bool top_down, const Bytes& rows,
                 const Bytes& palette = {}, std::uint32_t compression = 0,
                 const std::vector<std::uint32_t>& masks = {}) {
  const std::size_t rb = (std::size_t(w) * std::size_t(bpp) + 7) / 8,
                    stride = (std::size_t(w) * std::size_t(bpp) + 31) / 32 * 4;
  const std::uint32_t off = std::uint32_t(14 + 40 + 4 * masks.size() + palette.size());
  Bytes out = {'B', 'M'};
  put_le(out, std::uint32_t(off + stride * std::size_t(h)), 4);
  put_le(out, 0, 4);
  put_le(out, off, 4);
  put_le(out, 40, 4);
  put_le(out, std::uint32_t(w), 4);
  put_le(out, std::uint32_t(top_down ? -h : h), 4);
  put_le(out, 1, 2);
  put_le(out, std::uint32_t(bpp), 2);
  put_le(out, compression, 4);
  put_le(out, std::uint32_t(stride * std::size_t(h)), 4);
  put_le(out, 2835, 4);
  put_le(out, 2835, 4);
  put_le(out, std::uint32_t(palette.size() / 4), 4);
  put_le(out, 0, 4);
  for (const auto m : masks) put_le(out, m, 4);
  out.insert(out.end(), palette.begin(), palette.end());
  for (std::int32_t k = 0; k < h; ++k) {
    const std::size_t y = std::size_t(top_down ? k : h - 1 - k);
    out.insert(out.end(), rows.begin() + std::ptrdiff_t(y * rb), rows.begin() + std::ptrdiff_t((y + 1) * rb));
    out.insert(out.end(), stride - rb, 0);
  }
  return out;
}

// Binary PGM (channels 1) or PPM (channels 3); samples big-endian 2 bytes above maxval 255.
inline Bytes pnm(int channels, std::uint32_t w, std::uint32_t h, std::uint32_t maxval,
                 const std::vector<std::uint32_t>& samples, const std::string& comment = "") {
  std::string head = std::string(channels == 1 ? "P5" : "P6") + "\n" +
                     (comment.empty() ? "" : "# " + comment + "\n") + std::to_string(w) + " " + std::to_string(h) +
                     "\n" + std::to_string(maxval) + "\n";
  Bytes out(head.begin(), head.end());
  for (const auto s : samples) {
    if (maxval > 255) out.push_back(std::uint8_t(s >> 8));
    out.push_back(std::uint8_t(s));
  }
  return out;
}

}  // namespace ctnn_test
