#pragma once
// A photo or scan of one handwritten digit → a 28×28 image made the way MNIST's were:
//
//   GrayImage g = ctnn::io::load_gray_image("seven.png");       // PNG, JPEG, BMP, binary PGM/PPM
//   ctnn::io::Digit d = ctnn::io::mnist_digit(g, "seven.png");   // 784 bytes, ink bright on black
//   std::vector<float> x = ctnn::io::normalize_digit(d);         // (x/255 − mean)/std, as training
//   // or in one step: ctnn::io::load_digit("seven.png")
//
// Images come from outside, so every decoder is strict and bounded (ImageLimits: 32 MiB files,
// 16 Mi pixels, sides up to 16384, all caller-configurable; docs/limits.md). A truncated, corrupt or
// unsupported file is an io_error naming the file, the format, the byte offset and what was
// expected. Every decoder is ctnn's own: PNG (png.hpp, zlib inflates), JPEG (jpeg.hpp, baseline),
// BMP (bmp.hpp) and PNM (pnm.hpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/normalize.hpp"
#include "bmp.hpp"
#include "file.hpp"
#include "image_bytes.hpp"
#include "jpeg.hpp"
#include "png.hpp"
#include "pnm.hpp"
#include "printable.hpp"

namespace ctnn::io {

inline constexpr int digit_side = 28;  // MNIST's canvas
inline constexpr int digit_box = 20;   // the digit is scaled to fit this box
using Digit = std::array<std::uint8_t, digit_side * digit_side>;

namespace detail::image {

inline constexpr double invert_above = 127.0;  // border mean above this: light background, invert
inline constexpr int min_contrast = 32;        // ink must differ from the background by this much
inline constexpr double ink_threshold = 0.15;  // fraction of the ink contrast below which is background

// Names the format from its magic bytes, for messages.
inline std::string sniff(std::span<const std::uint8_t> b) {
  auto starts = [&](std::initializer_list<int> m) {
    if (b.size() < m.size()) return false;
    std::size_t k = 0;
    for (const int c : m)
      if (b[k++] != c) return false;
    return true;
  };
  if (starts({0x89, 'P', 'N', 'G'})) return "PNG";
  if (starts({0xff, 0xd8, 0xff})) return "JPEG";
  if (starts({'B', 'M'})) return "BMP";
  if (starts({'P', '5'}) || starts({'P', '6'})) return "PNM";
  if (starts({'P', '1'}) || starts({'P', '2'}) || starts({'P', '3'}) || starts({'P', '4'}) || starts({'P', '7'}))
    return "ASCII, bitmap or PAM PNM";
  if (starts({'G', 'I', 'F', '8'})) return "GIF";
  if (starts({'R', 'I', 'F', 'F'})) return "RIFF (WebP?)";
  if (starts({'I', 'I', '*', 0}) || starts({'M', 'M', 0, '*'})) return "TIFF";
  return "";
}

// Per output index along one axis, the source indices and weights that make it. Shrinking averages
// the source over the output pixel's footprint (exact box coverage: anti-aliased, as MNIST's
// normalisation was); enlarging interpolates linearly.
inline std::vector<std::vector<std::pair<int, double>>> resample_weights(int in, int out) {
  std::vector<std::vector<std::pair<int, double>>> w(static_cast<std::size_t>(out));
  const double scale = double(in) / out;  // source pixels per output pixel
  for (int o = 0; o < out; ++o) {
    if (out <= in) {
      const double lo = o * scale, hi = (o + 1) * scale;
      for (int i = int(lo); i < in && i < hi; ++i) {
        const double overlap = std::min(hi, i + 1.0) - std::max(lo, double(i));
        if (overlap > 0) w[o].emplace_back(i, overlap / scale);
      }
    } else {
      const double c = std::clamp((o + 0.5) * scale - 0.5, 0.0, in - 1.0);
      const int i = int(c);
      const double t = c - i;
      w[o].emplace_back(i, 1 - t);
      if (t > 0) w[o].emplace_back(i + 1, t);
    }
  }
  return w;
}

}  // namespace detail::image

// Decodes an image held in memory to 8-bit gray, choosing the decoder by the magic bytes. Colour
// is converted to luma; transparency is composited over white (as a viewer shows it). `name` names
// the image in messages. Throws io_error: unsupported format, corrupt, truncated, over the limits.
inline GrayImage decode_gray_image(std::span<const std::uint8_t> bytes, const std::string& name,
                                   const ImageLimits& limits = {}) {
  const std::string format = detail::image::sniff(bytes);
  if (format == "PNG") return decode_png(bytes, name, limits);
  if (format == "JPEG") return decode_jpeg(bytes, name, limits);
  if (format == "BMP") return decode_bmp(bytes, name, limits);
  if (format == "PNM" || format == "ASCII, bitmap or PAM PNM") return decode_pnm(bytes, name, limits);
  if (bytes.empty()) throw io_error(printable(name) + ": empty file (0 bytes); expected a PNG, JPEG, BMP or PGM image");
  throw io_error(printable(name) + ": " + (format.empty() ? "unrecognised format" : format + " is not supported") +
                 "; ctnn reads PNG, JPEG (baseline), BMP and binary PGM/PPM images");
}

// Reads and decodes an image file (see decode_gray_image); files over limits.file_bytes are refused
// before they are read.
inline GrayImage load_gray_image(const std::string& path, const ImageLimits& limits = {}) {
  const std::vector<std::uint8_t> bytes = read_file(path, limits.file_bytes);
  return decode_gray_image(bytes, path, limits);
}

// MNIST's preprocessing of one digit image. `source` names the image in error messages.
//   1. Polarity: if the border is light on average (mean > 127), invert, so ink is bright on dark.
//   2. Contrast: the background level is the median border pixel, the ink level the brightest pixel;
//      pixels are mapped so that levels below 15% of the way to the ink become 0 (paper
//      texture, JPEG ringing) and the ink becomes 1.
//   3. Crop to the bounding box of what is left, scale it to fit 20×20 keeping the aspect ratio
//      (area averaging when shrinking: anti-aliased grays), and stretch so the brightest pixel is
//      255 (as in MNIST, where every digit peaks at 254-255).
//   4. Place it in a 28×28 black canvas so that the ink's centre of mass (intensity-weighted, in
//      pixel indices) lands on (14, 14), shifting by the rounded offset; the shift is limited so that
//      no ink leaves the canvas.
// Throws io_error when the image is empty or has no ink (nothing stands out from the background).
inline Digit mnist_digit(const GrayImage& image, const std::string& source = "image") {
  namespace di = detail::image;
  const int W = image.width, H = image.height;
  if (W <= 0 || H <= 0 || image.pixels.size() != std::size_t(W) * std::size_t(H))
    throw io_error(printable(source) + ": empty image (" + std::to_string(W) + "x" + std::to_string(H) + ", " +
                   std::to_string(image.pixels.size()) + " pixels)");
  auto at = [&](int x, int y) { return image.pixels[std::size_t(y) * W + x]; };

  // 1. Polarity, from the border.
  std::vector<int> border;
  for (int x = 0; x < W; ++x) {
    border.push_back(at(x, 0));
    if (H > 1) border.push_back(at(x, H - 1));
  }
  for (int y = 1; y + 1 < H; ++y) {
    border.push_back(at(0, y));
    if (W > 1) border.push_back(at(W - 1, y));
  }
  double mean = 0;
  for (const int v : border) mean += v;
  mean /= double(border.size());
  const bool invert = mean > di::invert_above;
  auto value = [&](int x, int y) { return invert ? 255 - at(x, y) : int(at(x, y)); };
  for (int& v : border) v = invert ? 255 - v : v;

  // 2. Background and ink levels.
  std::nth_element(border.begin(), border.begin() + std::ptrdiff_t(border.size() / 2), border.end());
  const int background = border[border.size() / 2];
  int peak = 0;
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) peak = std::max(peak, value(x, y));
  if (peak - background < di::min_contrast)
    throw io_error(printable(source) + ": no ink found: nothing in the " + std::to_string(W) + "x" + std::to_string(H) +
                   " image stands out from its background (level " +
                   std::to_string(invert ? 255 - background : background) + ", strongest ink " +
                   std::to_string(invert ? 255 - peak : peak) +
                   "); expected a dark digit on a light background or a light digit on a dark one");
  const double cut = background + di::ink_threshold * (peak - background);
  std::vector<float> ink(std::size_t(W) * std::size_t(H));
  int x0 = W, x1 = -1, y0 = H, y1 = -1;  // bounding box of the ink, inclusive
  for (int y = 0; y < H; ++y)
    for (int x = 0; x < W; ++x) {
      const double s = std::max(0.0, (value(x, y) - cut) / (peak - cut));
      ink[std::size_t(y) * W + x] = float(s);
      if (s > 0) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }

  // 3. Crop, scale into the 20×20 box.
  const int bw = x1 - x0 + 1, bh = y1 - y0 + 1;  // the peak pixel is ink, so the box is not empty
  const double scale = double(digit_box) / std::max(bw, bh);
  const int nw = std::clamp(int(std::lround(bw * scale)), 1, digit_box);
  const int nh = std::clamp(int(std::lround(bh * scale)), 1, digit_box);
  const auto wx = di::resample_weights(bw, nw), wy = di::resample_weights(bh, nh);
  std::vector<double> rows(std::size_t(bh) * nw, 0.0);  // bh × nw: rows resampled horizontally
  for (int y = 0; y < bh; ++y)
    for (int o = 0; o < nw; ++o)
      for (const auto& [i, w] : wx[o])
        rows[std::size_t(y) * nw + o] += w * ink[std::size_t(y0 + y) * W + x0 + i];
  std::vector<double> box(std::size_t(nh) * nw, 0.0);  // nh × nw
  for (int o = 0; o < nh; ++o)
    for (const auto& [i, w] : wy[o])
      for (int x = 0; x < nw; ++x) box[std::size_t(o) * nw + x] += w * rows[std::size_t(i) * nw + x];
  const double top = *std::max_element(box.begin(), box.end());
  std::vector<std::uint8_t> scaled(box.size());
  double mass = 0, mx = 0, my = 0;
  for (int y = 0; y < nh; ++y)
    for (int x = 0; x < nw; ++x) {
      const auto v =
          std::uint8_t(std::lround(std::clamp(box[std::size_t(y) * nw + x] / top, 0.0, 1.0) * 255));
      scaled[std::size_t(y) * nw + x] = v;
      mass += v, mx += double(x) * v, my += double(y) * v;
    }

  // 4. Centre of mass to (14, 14).
  const int ox = std::clamp(int(std::lround(digit_side / 2 - mx / mass)), 0, digit_side - nw);
  const int oy = std::clamp(int(std::lround(digit_side / 2 - my / mass)), 0, digit_side - nh);
  Digit d{};
  for (int y = 0; y < nh; ++y)
    for (int x = 0; x < nw; ++x)
      d[std::size_t(oy + y) * digit_side + ox + x] = scaled[std::size_t(y) * nw + x];
  return d;
}

// load_gray_image + mnist_digit.
inline Digit load_digit(const std::string& path, const ImageLimits& limits = {}) {
  return mnist_digit(load_gray_image(path, limits), path);
}

// The network's input for a digit: (x/255 − mean)/std per pixel, MNIST's statistics by default
// (the same as TrainOptions').
inline std::vector<float> normalize_digit(const Digit& d, float mean = 0.1307f, float std = 0.3081f) {
  std::vector<float> x(d.size());
  normalize_pixels(d.data(), d.size(), mean, std, x.data());
  return x;
}

}  // namespace ctnn::io
