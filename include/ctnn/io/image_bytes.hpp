#pragma once
// What the image decoders (png.hpp, bmp.hpp, pnm.hpp, jpeg.hpp) share: the decoded GrayImage, the
// limits a caller may set, and ImageBytes, bounds-checked reads from an image file held in memory
// whose errors name the file, the format, the byte offset and what was expected.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "printable.hpp"

namespace ctnn::io {

struct GrayImage {
  int width = 0, height = 0;
  std::vector<std::uint8_t> pixels;  // width × height, row-major, 0 = black
};

// Bounds on what an image may cost. The defaults fit a phone photo of a digit (12 MP) and refuse
// what no digit or small-image classifier needs; decoding time and memory are linear in the pixels
// (at most ~8 bytes per pixel while decoding), so these bound both.
struct ImageLimits {
  std::uintmax_t file_bytes = std::uintmax_t{32} << 20;  // 32 MiB
  std::uint64_t pixels = std::uint64_t{16} << 20;        // 16 Mi pixels (4096 × 4096)
  std::uint32_t side = 16384;                            // width or height
};

// An image file's bytes, for one decoder. `format` names it in messages ("PNG", "BMP", ...).
class ImageBytes {
 public:
  ImageBytes(std::span<const std::uint8_t> bytes, const std::string& name, const char* format)
      : b_(bytes), where_(printable(name) + ": " + format) {}

  std::size_t size() const { return b_.size(); }
  const std::uint8_t* data() const { return b_.data(); }
  const std::string& where() const { return where_; }

  [[noreturn]] void fail(const std::string& what) const { throw io_error(where_ + ": " + what); }
  [[noreturn]] void fail_at(std::uint64_t at, const std::string& what) const {
    throw io_error(where_ + ": at byte offset " + std::to_string(at) + ": " + what);
  }

  // Throws unless n bytes of `what` are there at `at`.
  void need(std::uint64_t at, std::uint64_t n, const std::string& what) const {
    if (at > b_.size() || n > b_.size() - at)
      fail_at(at, "file truncated: expected " + std::to_string(n) + " bytes of " + what + ", found only " +
                      std::to_string(at > b_.size() ? 0 : b_.size() - at));
  }
  std::uint8_t u8(std::uint64_t at, const char* what) const {
    need(at, 1, what);
    return b_[at];
  }
  std::uint32_t be(std::uint64_t at, int n, const char* what) const {  // big-endian, n <= 4 bytes
    need(at, std::uint64_t(n), what);
    std::uint32_t v = 0;
    for (int k = 0; k < n; ++k) v = v << 8 | b_[at + std::uint64_t(k)];
    return v;
  }
  std::uint32_t le(std::uint64_t at, int n, const char* what) const {  // little-endian, n <= 4 bytes
    need(at, std::uint64_t(n), what);
    std::uint32_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = v << 8 | b_[at + std::uint64_t(k)];
    return v;
  }

  // Throws unless width × height is within the limits.
  void check_size(std::int64_t width, std::int64_t height, const ImageLimits& limits) const {
    const std::string dims = std::to_string(width) + "x" + std::to_string(height);
    if (width <= 0 || height <= 0) fail("image is " + dims + ": expected a width and height of at least 1");
    if (width > limits.side || height > limits.side)
      fail("image is " + dims + ", a side over the " + std::to_string(limits.side) + "-pixel limit");
    if (std::uint64_t(width) * std::uint64_t(height) > limits.pixels)
      fail("image is " + dims + ", more than the " + std::to_string(limits.pixels) + "-pixel limit");
  }

 private:
  std::span<const std::uint8_t> b_;
  std::string where_;
};

namespace detail::image {

// ITU-R BT.601 luma, as JPEG's YCbCr and most gray conversions use.
inline std::uint8_t luma(unsigned r, unsigned g, unsigned b) {
  return std::uint8_t((299 * r + 587 * g + 114 * b + 500) / 1000);
}
// A gray level with alpha composited over white, as a viewer shows it.
inline std::uint8_t over_white(unsigned v, unsigned a) {
  return std::uint8_t((v * a + 255 * (255 - a) + 127) / 255);
}
// A sample of maxval levels scaled to 0..255, rounded.
inline std::uint8_t scale_to_8bit(std::uint32_t v, std::uint32_t maxval) {
  return std::uint8_t((std::uint64_t(v) * 255 + maxval / 2) / maxval);
}

}  // namespace detail::image

}  // namespace ctnn::io
