#pragma once
// Baseline JPEG images, decoded by ctnn itself. One walk over the file checks every marker segment
// before it is used: quantisation and Huffman tables (counts, code lengths that form a prefix code),
// the frame (8-bit baseline or extended Huffman, 1 or 3 components, sampling 1-4, size within the
// limits), every scan's components and tables, and that each scan's entropy-coded data ends in a
// marker and the file in EOI (a truncated file is refused, not padded with gray). Each scan is
// then decoded: Huffman codes, coefficients and restart markers are checked as they are read, and a
// scan that needs a bit past its data, a code no table holds, a coefficient past the block's 64 or
// a missing restart marker is refused at its byte offset. Decoding time is linear in the pixels.
// Progressive, arithmetic-coded, lossless, hierarchical, 12-bit and CMYK files are refused with a
// message.
//
// The gray image is the luma component (Y of YCbCr, the only component of a gray file), or BT.601
// luma of R, G and B for an RGB-coded file (component ids 'R' 'G' 'B', or Adobe's transform 0
// without JFIF). A subsampled component is upsampled by repeating samples.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "image_bytes.hpp"

namespace ctnn::io {

namespace detail::jpeg {

// The natural (row-major) index of the k-th coefficient in the file's zig-zag order.
inline constexpr std::uint8_t zigzag[64] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33, 40, 48,
    41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23,
    30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};

// "FF xx": a marker as messages name it.
inline std::string marker_name(int code) {
  char name[8];
  std::snprintf(name, sizeof name, "FF %02X", code);
  return name;
}

// A Huffman table as canonical codes (ITU T.81 F.2.2.3): per code length, the first and last code
// (last −1: no code of that length) and the index of the first code's value; and for the codes of
// up to fast_bits bits, the length and value found directly from the next fast_bits bits.
struct Huffman {
  static constexpr int fast_bits = 9;
  bool defined = false;
  std::int32_t first_code[17] = {}, last_code[17] = {}, first_index[17] = {};
  std::uint8_t values[256] = {};
  std::uint16_t fast[1 << fast_bits] = {};  // length << 8 | value; 0: a longer code (or none)

  void build_fast() {
    std::fill(std::begin(fast), std::end(fast), std::uint16_t{0});
    for (int length = 1; length <= fast_bits; ++length)
      for (std::int32_t code = first_code[length]; code <= last_code[length]; ++code) {
        const int shift = fast_bits - length, value = values[first_index[length] + code - first_code[length]];
        for (int tail = 0; tail < 1 << shift; ++tail)
          fast[(code << shift) | tail] = std::uint16_t(length << 8 | value);
      }
  }
};

struct Component {
  int id = 0, h = 1, v = 1, tq = 0;
  bool scanned = false;
  int width = 0, height = 0;      // its samples: the image's size scaled by h/hmax, v/vmax
  int blocks_x = 0, blocks_y = 0;  // blocks of the whole MCU grid (the plane's size / 8)
  int dc_prediction = 0;
  std::vector<std::uint8_t> plane;  // its samples, when the gray image needs them
};

struct Frame {
  int width = 0, height = 0, hmax = 1, vmax = 1, mcus_x = 0, mcus_y = 0;
  std::vector<Component> components;
};

// The bits of one scan's entropy-coded data, from `at` up to the marker at `end`. FF 00 is a data
// byte FF; a restart marker stops the bits until restart() passes it. Peeking past the data sees
// 1 bits (as an encoder pads its last byte), but consuming one is an error: a well-formed scan
// never needs a bit its data does not hold.
class ScanBits {
 public:
  ScanBits(const ImageBytes& in, std::uint64_t at, std::uint64_t end, int scan)
      : in_(in), at_(at), end_(end), scan_(scan) {}

  std::uint32_t peek16() {
    fill();
    return buffer_ >> 16;
  }
  int bits_left() const { return bits_ - padding_; }  // of those loaded; more may follow
  void consume(int n) {
    if (n > bits_left()) fail_truncated();
    buffer_ <<= n;
    bits_ -= n;
  }
  int receive(int n) {  // n ≤ 16 bits as an unsigned number
    if (n == 0) return 0;
    fill();
    const int v = int(buffer_ >> (32 - n));
    consume(n);
    return v;
  }
  // Drops the bits left of the current byte and passes restart marker FF D(index mod 8).
  void restart(int index) {
    buffer_ = 0, bits_ = 0, padding_ = 0;
    while (at_ < end_ && !marker_ahead()) ++at_;  // stray bytes before the marker, as libjpeg allows
    while (at_ + 1 < end_ && in_.data()[at_ + 1] == 0xff) ++at_;  // fill bytes
    const int expected = 0xd0 + (index & 7);
    if (at_ >= end_ || in_.data()[at_ + 1] != expected) fail("expected restart marker " + marker_name(expected));
    at_ += 2;
  }
  [[noreturn]] void fail(const std::string& what) const {
    in_.fail_at(at_, "scan " + std::to_string(scan_) + ": " + what);
  }
  [[noreturn]] void fail_truncated() const { fail("the image data ends in the middle of a block (corrupt or truncated)"); }

 private:
  bool marker_ahead() const { return at_ >= end_ || (in_.data()[at_] == 0xff && in_.data()[at_ + 1] != 0); }
  void fill() {
    while (bits_ <= 24) {
      std::uint32_t byte = 0xff;
      if (!marker_ahead()) {
        byte = in_.data()[at_];
        at_ += byte == 0xff ? 2 : 1;  // FF 00 stands for FF
      } else {
        padding_ += 8;
      }
      buffer_ |= byte << (24 - bits_);
      bits_ += 8;
    }
  }

  const ImageBytes& in_;
  std::uint64_t at_, end_;
  int scan_;
  std::uint32_t buffer_ = 0;  // the next bits, most significant first
  int bits_ = 0;              // how many of buffer_'s bits are loaded
  int padding_ = 0;           // how many of those, the last ones, lie past the data
};

inline int decode_huffman(ScanBits& bits, const Huffman& table, const char* kind) {
  const std::uint32_t next16 = bits.peek16();
  if (const int hit = table.fast[next16 >> (16 - Huffman::fast_bits)]) {
    bits.consume(hit >> 8);
    return hit & 255;
  }
  for (int length = Huffman::fast_bits + 1; length <= 16; ++length) {
    const std::int32_t code = std::int32_t(next16 >> (16 - length));
    if (code <= table.last_code[length]) {
      const std::int32_t index = table.first_index[length] + code - table.first_code[length];
      if (index < 0 || index > 255) break;  // cannot happen for a prefix code; kept as a bound
      bits.consume(length);
      return table.values[index];
    }
  }
  if (bits.bits_left() < 16) bits.fail_truncated();  // the pattern ran into the padding
  bits.fail(std::string("a bit pattern that is no code of its ") + kind + " Huffman table");
}

// A coefficient's value from its size category and `size` extra bits (T.81 F.2.2.1).
inline int extend(int v, int size) { return size && v < (1 << (size - 1)) ? v - (1 << size) + 1 : v; }

// Decodes one 8×8 block into dequantised coefficients in natural order; returns 1 + the last row (high
// nibble) and 1 + the last column (low) that hold a coefficient, so that the IDCT skips the rest.
inline int decode_block(ScanBits& bits, const Huffman& dc, const Huffman& ac, const std::uint16_t* quant,
                        int& prediction, std::int32_t* coef) {
  std::fill(coef, coef + 64, 0);
  int rows = 1, cols = 1;
  const int dc_size = decode_huffman(bits, dc, "DC");
  if (dc_size > 11) bits.fail("DC difference of " + std::to_string(dc_size) + " bits; at most 11");
  prediction += extend(bits.receive(dc_size), dc_size);
  // An 8-bit block's DC coefficient is at most 1024 in magnitude; anything far past it is corrupt
  // data, and bounding it keeps the sums below from overflowing.
  if (prediction < -2048 || prediction > 2047)
    bits.fail("DC coefficient " + std::to_string(prediction) + " out of range (corrupt image data)");
  coef[0] = prediction * quant[0];
  for (int k = 1; k < 64;) {
    const int rs = decode_huffman(bits, ac, "AC"), run = rs >> 4, size = rs & 15;
    if (size == 0) {
      if (run != 15) break;  // end of block
      k += 16;               // sixteen zeros
      continue;
    }
    k += run;
    if (k > 63) bits.fail("AC coefficients run past the block's 64");
    if (size > 10) bits.fail("AC coefficient of " + std::to_string(size) + " bits; at most 10");
    const int at = zigzag[k];
    coef[at] = extend(bits.receive(size), size) * quant[k];
    rows = std::max(rows, at / 8 + 1), cols = std::max(cols, at % 8 + 1);
    ++k;
  }
  return rows << 4 | cols;
}

// The inverse DCT of one block (separable, in float), level-shifted and clamped to 0..255. Only the
// first `rows` rows and `cols` columns of coefficients can be nonzero (decode_block's extent): the
// sums skip the zeros, which changes no bit of the result.
inline void idct_block(const std::int32_t* coef, int extent, std::uint8_t* out, std::size_t stride) {
  const int rows = extent >> 4, cols = extent & 15;
  static const std::array<float, 64> basis = [] {  // basis[u*8 + x] = C(u)/2 · cos((2x+1)uπ/16)
    std::array<float, 64> b{};
    for (int u = 0; u < 8; ++u)
      for (int x = 0; x < 8; ++x)
        b[std::size_t(u * 8 + x)] =
            float((u == 0 ? std::sqrt(0.5) : 1.0) * std::cos((2 * x + 1) * u * 3.14159265358979323846 / 16) / 2);
    return b;
  }();
  // The innermost loops run over x, eight independent sums (vectorised), each in u (then v) order.
  float row_sums[64] = {};
  for (int v = 0; v < rows; ++v)
    for (int u = 0; u < cols; ++u) {
      const float c = float(coef[v * 8 + u]);
      for (int x = 0; x < 8; ++x) row_sums[v * 8 + x] += c * basis[std::size_t(u * 8 + x)];
    }
  float sums[64];
  std::fill(sums, sums + 64, 128.5f);  // the level shift, and +0.5 so the truncation below rounds
  for (int v = 0; v < rows; ++v)
    for (int y = 0; y < 8; ++y) {
      const float b = basis[std::size_t(v * 8 + y)];
      for (int x = 0; x < 8; ++x) sums[y * 8 + x] += row_sums[v * 8 + x] * b;
    }
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 8; ++x)
      out[std::size_t(y) * stride + std::size_t(x)] = std::uint8_t(std::clamp(sums[y * 8 + x], 0.0f, 255.0f));
}

struct ScanComponent {
  Component* component;
  const Huffman *dc, *ac;
  const std::uint16_t* quant;
};

// Decodes one scan's entropy-coded data at [at, end) into its components' planes.
inline void decode_scan(const ImageBytes& in, const Frame& f, std::span<ScanComponent> comps,
                        int restart_interval, std::uint64_t at, std::uint64_t end, int scan) {
  ScanBits bits(in, at, end, scan);
  // One component alone is not interleaved: its blocks in raster order, one an MCU (T.81 A.2.2).
  const bool interleaved = comps.size() > 1;
  const Component& first = *comps[0].component;
  const int single_x = (first.width + 7) / 8, single_y = (first.height + 7) / 8;
  const std::int64_t mcus = interleaved ? std::int64_t(f.mcus_x) * f.mcus_y : std::int64_t(single_x) * single_y;
  std::int32_t coef[64];
  for (auto& c : comps) c.component->dc_prediction = 0;
  const std::int64_t mcus_a_row = interleaved ? f.mcus_x : single_x;
  for (std::int64_t m = 0; m < mcus; ++m) {
    if (restart_interval && m > 0 && m % restart_interval == 0) {
      bits.restart(int(m / restart_interval - 1));
      for (auto& c : comps) c.component->dc_prediction = 0;
    }
    const std::int64_t mcu_x = m % mcus_a_row, mcu_y = m / mcus_a_row;
    for (auto& sc : comps) {
      Component& c = *sc.component;
      const int bh = interleaved ? c.h : 1, bv = interleaved ? c.v : 1;
      for (int by = 0; by < bv; ++by)
        for (int bx = 0; bx < bh; ++bx) {
          const int extent = decode_block(bits, *sc.dc, *sc.ac, sc.quant, c.dc_prediction, coef);
          if (c.plane.empty()) continue;  // a component the gray image does not use: checked only
          const std::int64_t block_x = mcu_x * bh + bx, block_y = mcu_y * bv + by;
          const std::size_t stride = std::size_t(c.blocks_x) * 8;
          idct_block(coef, extent, c.plane.data() + std::size_t(block_y) * 8 * stride + std::size_t(block_x) * 8,
                     stride);
        }
    }
  }
}

// The gray image from the decoded planes: luma of R, G, B, or the first (Y or only) component.
inline GrayImage gray_from_planes(const Frame& f, bool rgb) {
  GrayImage g{f.width, f.height, std::vector<std::uint8_t>(std::size_t(f.width) * std::size_t(f.height))};
  // Row y of component c's samples; column x of the image is its sample column[c][x].
  const int used = rgb ? 3 : 1;
  std::vector<int> column[3];
  for (int c = 0; c < used; ++c) {
    column[c].resize(std::size_t(f.width));
    for (int x = 0; x < f.width; ++x) column[c][std::size_t(x)] = x * f.components[std::size_t(c)].h / f.hmax;
  }
  auto row = [&](int c, int y) {
    const Component& k = f.components[std::size_t(c)];
    return k.plane.data() + std::size_t(y * k.v / f.vmax) * std::size_t(k.blocks_x) * 8;
  };
  for (int y = 0; y < f.height; ++y) {
    std::uint8_t* out = g.pixels.data() + std::size_t(y) * std::size_t(f.width);
    if (rgb) {
      const std::uint8_t *r = row(0, y), *gr = row(1, y), *b = row(2, y);
      for (std::size_t x = 0; x < std::size_t(f.width); ++x)
        out[x] = image::luma(r[column[0][x]], gr[column[1][x]], b[column[2][x]]);
    } else if (f.components[0].h == f.hmax) {
      std::copy(row(0, y), row(0, y) + f.width, out);
    } else {
      const std::uint8_t* l = row(0, y);
      for (std::size_t x = 0; x < std::size_t(f.width); ++x) out[x] = l[column[0][x]];
    }
  }
  return g;
}

// Walks the file, checking each segment, and decodes each scan as it comes.
inline GrayImage decode(const ImageBytes& in, const ImageLimits& limits) {
  if (in.size() < 2 || in.data()[0] != 0xff || in.data()[1] != 0xd8)
    in.fail_at(0, "expected the SOI marker FF D8");
  std::array<std::array<std::uint16_t, 64>, 4> quant{};  // in zig-zag order, as the file has them
  bool quant_defined[4] = {};
  std::array<Huffman, 4> dc_tables{}, ac_tables{};
  Frame f;
  bool jfif = false, rgb = false;
  int adobe_transform = -1, restart_interval = 0, scans = 0;  // adobe_transform: -1 without an Adobe APP14
  std::uint64_t at = 2;
  for (;;) {
    // A marker: FF, optional FF fill bytes, the code.
    if (in.u8(at, "a marker") != 0xff) in.fail_at(at, "expected a marker (FF xx)");
    while (in.u8(at + 1, "a marker code") == 0xff) ++at;
    const std::uint8_t m = in.u8(at + 1, "a marker code");
    const std::uint64_t seg = at + 2;  // the segment's length field
    const std::string code = marker_name(m);
    if (m == 0xd9) {  // EOI; bytes after it (camera trailers) are ignored
      if (scans == 0) in.fail_at(at, "EOI before any image data (SOS)");
      for (const Component& c : f.components)
        if (!c.scanned) in.fail_at(at, "no scan holds component " + std::to_string(c.id));
      return gray_from_planes(f, rgb);
    }
    if (m == 0xd8 || (m >= 0xd0 && m <= 0xd7) || m == 0x01 || m < 0xc0)
      in.fail_at(at, "unexpected marker " + code);
    const std::uint32_t length = in.be(seg, 2, "a segment length");
    if (length < 2) in.fail_at(seg, "segment length " + std::to_string(length) + " is below 2");
    in.need(seg, length, std::string("the segment of marker ") + code);
    const std::uint8_t* s = in.data() + seg + 2;  // the segment's payload
    const std::uint32_t n = length - 2;
    auto bad = [&](const std::string& what) { in.fail_at(seg, "marker " + code + ": " + what); };

    if (m == 0xc0 || m == 0xc1) {  // SOF0 baseline, SOF1 extended sequential (Huffman)
      if (!f.components.empty()) bad("a second frame header");
      if (n < 6) bad("frame header too short");
      if (s[0] != 8) bad(std::to_string(s[0]) + "-bit samples are not supported; expected 8");
      f.height = s[1] << 8 | s[2], f.width = s[3] << 8 | s[4];
      if (f.height == 0) bad("height 0 (defined by a later DNL marker) is not supported");
      in.check_size(f.width, f.height, limits);
      const int count = s[5];
      if (count == 4) bad("CMYK JPEG is not supported; save the image as RGB or gray");
      if (count != 1 && count != 3) bad(std::to_string(count) + " components; expected 1 or 3");
      if (n != 6 + 3u * std::uint32_t(count)) bad("frame header length does not match its components");
      f.components.resize(std::size_t(count));
      for (int c = 0; c < count; ++c) {
        Component& k = f.components[std::size_t(c)];
        k.id = s[6 + 3 * c], k.h = s[7 + 3 * c] >> 4, k.v = s[7 + 3 * c] & 15, k.tq = s[8 + 3 * c];
        if (k.h < 1 || k.h > 4 || k.v < 1 || k.v > 4) bad("sampling factors must be 1 to 4");
        if (k.tq > 3) bad("quantisation table number above 3");
        for (int d = 0; d < c; ++d)
          if (f.components[std::size_t(d)].id == k.id) bad("two components with id " + std::to_string(k.id));
        f.hmax = std::max(f.hmax, k.h), f.vmax = std::max(f.vmax, k.v);
      }
      f.mcus_x = (f.width + 8 * f.hmax - 1) / (8 * f.hmax), f.mcus_y = (f.height + 8 * f.vmax - 1) / (8 * f.vmax);
      for (Component& k : f.components) {
        k.width = (f.width * k.h + f.hmax - 1) / f.hmax, k.height = (f.height * k.v + f.vmax - 1) / f.vmax;
        k.blocks_x = f.mcus_x * k.h, k.blocks_y = f.mcus_y * k.v;
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
        for (std::uint32_t k = 0; k < 64; ++k)
          quant[std::size_t(table)][k] =
              precision ? std::uint16_t(s[i + 1 + 2 * k] << 8 | s[i + 2 + 2 * k]) : s[i + 1 + k];
        quant_defined[table] = true;
        i += 1 + size;
      }
    } else if (m == 0xc4) {  // DHT
      for (std::uint32_t i = 0; i < n;) {
        if (n - i < 17) bad("Huffman table header runs past its segment");
        const int klass = s[i] >> 4, table = s[i] & 15;
        if (klass > 1 || table > 3) bad("bad Huffman table class or number");
        Huffman& t = (klass ? ac_tables : dc_tables)[std::size_t(table)];
        std::int32_t count = 0, next = 0;  // next: the first code of the current length
        for (int len = 1; len <= 16; ++len) {
          const int here = s[i + std::uint32_t(len)];
          t.first_code[len] = next, t.first_index[len] = count;
          t.last_code[len] = here ? next + here - 1 : -1;
          count += here, next += here;
          if (next > (1 << len)) bad("Huffman code lengths do not form a prefix code");
          next <<= 1;
        }
        if (count > 256) bad("Huffman table of " + std::to_string(count) + " symbols; at most 256");
        if (n - i - 17 < std::uint32_t(count)) bad("Huffman table values run past their segment");
        std::copy(s + i + 17, s + i + 17 + count, t.values);
        t.build_fast();
        t.defined = true;
        i += 17 + std::uint32_t(count);
      }
    } else if (m == 0xdd) {  // DRI
      if (n != 2) bad("restart interval segment must be 4 bytes");
      restart_interval = s[0] << 8 | s[1];
    } else if (m == 0xda) {  // SOS
      if (f.components.empty()) bad("scan before the frame header (SOF)");
      if (n < 1) bad("scan header too short");
      const int ns = s[0];
      if (ns < 1 || ns > int(f.components.size()) || n != 4 + 2u * std::uint32_t(ns))
        bad("bad number of scan components");
      if (scans == 0) {  // the colour coding is known by now: allocate the planes the gray image uses
        const bool rgb_ids = f.components.size() == 3 && f.components[0].id == 'R' && f.components[1].id == 'G' &&
                             f.components[2].id == 'B';
        rgb = rgb_ids || (f.components.size() == 3 && adobe_transform == 0 && !jfif);
        for (std::size_t c = 0; c < (rgb ? 3 : 1); ++c)
          f.components[c].plane.assign(std::size_t(f.components[c].blocks_x) * 8 * std::size_t(f.components[c].blocks_y) * 8, 0);
      }
      std::array<ScanComponent, 3> comps{};
      int blocks = 0;
      for (int k = 0; k < ns; ++k) {
        const int id = s[1 + 2 * k], td = s[2 + 2 * k] >> 4, ta = s[2 + 2 * k] & 15;
        std::size_t c = 0;
        while (c < f.components.size() && f.components[c].id != id) ++c;
        if (c == f.components.size()) bad("scan component " + std::to_string(id) + " is not in the frame");
        Component& comp = f.components[c];
        if (comp.scanned) bad("component " + std::to_string(id) + " is in two scans");
        comp.scanned = true;
        if (td > 3 || ta > 3 || !dc_tables[std::size_t(td)].defined || !ac_tables[std::size_t(ta)].defined)
          bad("scan uses an undefined Huffman table");
        if (!quant_defined[comp.tq]) bad("component " + std::to_string(id) + " uses an undefined quantisation table");
        comps[std::size_t(k)] = {&comp, &dc_tables[std::size_t(td)], &ac_tables[std::size_t(ta)],
                                 quant[std::size_t(comp.tq)].data()};
        blocks += comp.h * comp.v;
      }
      if (ns > 1 && blocks > 10) bad("more than 10 blocks per MCU");
      const std::uint8_t* t = s + 1 + 2 * ns;
      if (t[0] != 0 || t[1] != 63 || t[2] != 0) bad("spectral selection must be 0-63 in a sequential JPEG");
      ++scans;
      // The entropy-coded data: up to the next marker that is not a stuffed 00 or a restart marker.
      const std::uint64_t data = seg + length;
      at = data;
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
      decode_scan(in, f, std::span(comps.data(), std::size_t(ns)), restart_interval, data, at, scans);
      continue;
    } else if (m == 0xe0) {  // APP0: JFIF means YCbCr
      jfif = jfif || (n >= 5 && std::equal(s, s + 5, "JFIF"));
    } else if (m == 0xee) {  // APP14: Adobe's colour transform (0: none, so RGB)
      if (n >= 12 && std::equal(s, s + 5, "Adobe")) adobe_transform = s[11];
    } else if (!((m >= 0xe1 && m <= 0xef) || m == 0xfe)) {  // other APPn and COM are skipped
      bad("unexpected marker");
    }
    at = seg + length;
  }
}

}  // namespace detail::jpeg

inline GrayImage decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& name,
                             const ImageLimits& limits = {}) {
  return detail::jpeg::decode(ImageBytes(bytes, name, "JPEG"), limits);
}

}  // namespace ctnn::io
