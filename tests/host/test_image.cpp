// Digit images: decoding (PGM, PNG, BMP, JPEG; gray, RGB, alpha) and MNIST's preprocessing (polarity,
// crop, 20×20 box, centre of mass at (14, 14)), on digits drawn here; and the errors.
#include <catch2/catch.hpp>

#include "temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>


// stb_image_write makes the test files (compiled privately here).
#include <ctnn/io/image.hpp>
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#include <stb/stb_image_write.h>

#include <ctnn/core/random.hpp>

namespace {

namespace fs = std::filesystem;
using ctnn::io::Digit;
using ctnn::io::GrayImage;


// Shapes as "is (x, y) ink?", drawn on a canvas of the given background and ink levels.
GrayImage draw(int w, int h, std::uint8_t background, std::uint8_t ink, auto&& is_ink) {
  GrayImage g{w, h, std::vector<std::uint8_t>(std::size_t(w) * h, background)};
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      if (is_ink(x + 0.5, y + 0.5)) g.pixels[std::size_t(y) * w + x] = ink;
  return g;
}
double segment_distance(double px, double py, double ax, double ay, double bx, double by) {
  const double dx = bx - ax, dy = by - ay;
  const double t = std::clamp(((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy), 0.0, 1.0);
  return std::hypot(px - ax - t * dx, py - ay - t * dy);
}
// A "1": a thick stem with a flag, 200×300.
auto one = [](double x, double y) {
  return segment_distance(x, y, 110, 40, 110, 260) < 14 || segment_distance(x, y, 110, 40, 65, 90) < 10;
};
// A "0": an elliptical ring, off-centre in its 200×300 image.
auto ring = [](double x, double y) {
  const double r = std::hypot((x - 80) / 50.0, (y - 120) / 85.0);
  return r > 0.72 && r < 1.0;
};
// A "7": top bar and a diagonal, top-heavy, so its centre of mass is not its box's centre.
auto seven = [](double x, double y) {
  return segment_distance(x, y, 40, 50, 170, 50) < 14 || segment_distance(x, y, 170, 50, 90, 270) < 14;
};

void write_pgm(const std::string& path, const GrayImage& g) {
  std::ofstream out(path, std::ios::binary);
  out << "P5\n" << g.width << " " << g.height << "\n255\n";
  out.write(reinterpret_cast<const char*>(g.pixels.data()), std::streamsize(g.pixels.size()));
}
void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

// What MNIST's digits satisfy, measured.
struct Stats {
  int x0 = 28, x1 = -1, y0 = 28, y1 = -1;  // bounding box of pixels > 0, inclusive
  double cx = 0, cy = 0;                   // centre of mass, pixel indices
  int peak = 0;
  int width() const { return x1 - x0 + 1; }
  int height() const { return y1 - y0 + 1; }
};
Stats measure(const Digit& d) {
  Stats s;
  double mass = 0;
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) {
      const int v = d[std::size_t(y) * 28 + x];
      if (v == 0) continue;
      s.x0 = std::min(s.x0, x), s.x1 = std::max(s.x1, x), s.y0 = std::min(s.y0, y), s.y1 = std::max(s.y1, y);
      mass += v, s.cx += x * v, s.cy += y * v;
      s.peak = std::max(s.peak, v);
    }
  if (mass > 0) s.cx /= mass, s.cy /= mass;
  return s;
}
void check_mnist_like(const Digit& d, bool tall) {
  const Stats s = measure(d);
  INFO("box x " << s.x0 << ".." << s.x1 << " y " << s.y0 << ".." << s.y1 << ", centre of mass (" << s.cx
                << ", " << s.cy << "), peak " << s.peak);
  REQUIRE(s.x1 >= 0);
  CHECK(s.peak == 255);                          // ink bright
  CHECK(std::max(s.width(), s.height()) >= 19);  // scaled to the 20×20 box (±1)
  CHECK(s.width() <= 21);
  CHECK(s.height() <= 21);
  if (tall) CHECK(s.height() >= 19);
  CHECK(std::abs(s.cx - 14) <= 1.0);
  CHECK(std::abs(s.cy - 14) <= 1.0);
  // Background black: the canvas's border rows and columns are empty.
  for (int k = 0; k < 28; ++k) {
    CHECK(d[std::size_t(k)] == 0);
    CHECK(d[std::size_t(27 * 28 + k)] == 0);
    CHECK(d[std::size_t(k * 28)] == 0);
    CHECK(d[std::size_t(k * 28 + 27)] == 0);
  }
}
int max_difference(const Digit& a, const Digit& b) {
  int m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int(a[i]) - int(b[i])));
  return m;
}

std::string error_of(const std::string& path) {
  try {
    ctnn::io::load_digit(path);
  } catch (const ctnn::io_error& e) {
    return e.what();
  }
  FAIL("expected a ctnn::io_error for " << path);
  return {};
}

}  // namespace

TEST_CASE("image: a dark digit on white, as PGM, PNG and BMP, becomes an MNIST digit", "[image]") {
  ctnn_test::TempDir dir{"ctnn_test_image"};
  for (const auto& [name, shape, tall] :
       {std::tuple{"one", +[](double x, double y) { return one(x, y); }, true},
        std::tuple{"ring", +[](double x, double y) { return ring(x, y); }, true},
        std::tuple{"seven", +[](double x, double y) { return seven(x, y); }, true}}) {
    INFO(name);
    const GrayImage g = draw(200, 300, 255, 0, shape);
    const std::string pgm = dir.file(std::string(name) + ".pgm"), png = dir.file(std::string(name) + ".png"),
                      bmp = dir.file(std::string(name) + ".bmp");
    write_pgm(pgm, g);
    REQUIRE(stbi_write_png(png.c_str(), g.width, g.height, 1, g.pixels.data(), g.width));
    REQUIRE(stbi_write_bmp(bmp.c_str(), g.width, g.height, 1, g.pixels.data()));

    const GrayImage back = ctnn::io::load_gray_image(pgm);
    CHECK(back.width == 200);
    CHECK(back.height == 300);
    CHECK(back.pixels == g.pixels);

    const Digit d = ctnn::io::load_digit(pgm);
    check_mnist_like(d, tall);
    CHECK(ctnn::io::load_digit(png) == d);  // lossless formats decode to the same pixels
    CHECK(ctnn::io::load_digit(bmp) == d);
    CHECK(ctnn::io::mnist_digit(g) == d);
  }
}

TEST_CASE("image: shapes survive: the ring's hole stays dark, the 7 is centred by mass, not box", "[image]") {
  const Digit zero = ctnn::io::mnist_digit(draw(200, 300, 255, 0, ring));
  const Stats z = measure(zero);
  CHECK(zero[14 * 28 + 14] == 0);  // the hole
  CHECK(z.width() >= 11);          // aspect ratio 100:170 kept: 12 × 20
  CHECK(z.width() <= 13);

  const Digit d7 = ctnn::io::mnist_digit(draw(200, 300, 255, 0, seven));
  const Stats s = measure(d7);
  INFO("box y " << s.y0 << ".." << s.y1 << ", centre of mass y " << s.cy);
  CHECK(std::abs(s.cy - 14) <= 1.0);
  CHECK((s.y0 + s.y1) / 2.0 - s.cy >= 1.0);  // the box centre is lower than the centre of mass
}

TEST_CASE("image: a light digit on a dark background is not inverted", "[image]") {
  const GrayImage light = draw(200, 300, 255, 0, one), dark = draw(200, 300, 0, 255, one);
  const Digit from_light = ctnn::io::mnist_digit(light), from_dark = ctnn::io::mnist_digit(dark);
  check_mnist_like(from_dark, true);
  CHECK(from_dark == from_light);
  // Gray levels: a dark-gray background with light-gray ink is stretched to black and white.
  const Digit gray = ctnn::io::mnist_digit(draw(200, 300, 60, 180, one));
  CHECK(gray == from_light);
}

TEST_CASE("image: colour, transparency, JPEG, noise and small images", "[image]") {
  ctnn_test::TempDir dir{"ctnn_test_image"};
  const Digit reference = ctnn::io::mnist_digit(draw(200, 300, 255, 0, ring));

  SECTION("black ink on a transparent background reads as ink on white") {
    std::vector<std::uint8_t> rgba(200 * 300 * 4, 0);  // transparent black
    for (int y = 0; y < 300; ++y)
      for (int x = 0; x < 200; ++x)
        if (ring(x + 0.5, y + 0.5)) rgba[std::size_t(y * 200 + x) * 4 + 3] = 255;  // opaque black
    const std::string png = dir.file("alpha.png");
    REQUIRE(stbi_write_png(png.c_str(), 200, 300, 4, rgba.data(), 200 * 4));
    CHECK(ctnn::io::load_digit(png) == reference);
  }
  SECTION("blue ink on yellow paper") {
    std::vector<std::uint8_t> rgb(200 * 300 * 3);
    for (int y = 0; y < 300; ++y)
      for (int x = 0; x < 200; ++x) {
        const bool ink = ring(x + 0.5, y + 0.5);
        std::uint8_t* p = &rgb[std::size_t(y * 200 + x) * 3];
        p[0] = ink ? 20 : 250, p[1] = ink ? 30 : 240, p[2] = ink ? 160 : 120;
      }
    const std::string bmp = dir.file("colour.bmp");
    REQUIRE(stbi_write_bmp(bmp.c_str(), 200, 300, 3, rgb.data()));
    CHECK(ctnn::io::load_digit(bmp) == reference);
  }
  SECTION("JPEG (lossy)") {
    const GrayImage g = draw(200, 300, 255, 0, ring);
    const std::string jpg = dir.file("ring.jpg");
    REQUIRE(stbi_write_jpg(jpg.c_str(), g.width, g.height, 1, g.pixels.data(), 85));
    const Digit d = ctnn::io::load_digit(jpg);
    check_mnist_like(d, true);
    CHECK(max_difference(d, reference) <= 40);
  }
  SECTION("noisy gray paper") {
    ctnn::Random rng(5);
    GrayImage g = draw(200, 300, 200, 40, ring);
    for (auto& p : g.pixels) p = std::uint8_t(std::clamp(int(p) + int(rng.below(41)) - 20, 0, 255));
    const Digit d = ctnn::io::mnist_digit(g);
    check_mnist_like(d, true);
    const Stats s = measure(d), r = measure(reference);
    CHECK(std::abs(s.width() - r.width()) <= 1);
    CHECK(std::abs(s.height() - r.height()) <= 1);
  }
  SECTION("a small image is enlarged to the 20-pixel box") {
    const GrayImage g = draw(12, 16, 255, 0, [](double x, double y) {
      return segment_distance(x, y, 6, 3, 6, 13) < 1.5;  // a 3 × 12-pixel stroke
    });
    check_mnist_like(ctnn::io::mnist_digit(g), true);
  }
  SECTION("an MNIST-style digit drawn large comes back nearly unchanged") {
    GrayImage big{280, 280, std::vector<std::uint8_t>(280 * 280)};
    for (int y = 0; y < 280; ++y)
      for (int x = 0; x < 280; ++x)
        big.pixels[std::size_t(y) * 280 + x] = 255 - reference[std::size_t(y / 10) * 28 + x / 10];
    const Digit d = ctnn::io::mnist_digit(big);
    const Stats s = measure(d), r = measure(reference);
    CHECK(std::abs(s.cx - r.cx) <= 1.0);
    CHECK(std::abs(s.cy - r.cy) <= 1.0);
    CHECK(std::abs(s.height() - r.height()) <= 1);
  }
}

TEST_CASE("image: normalize_digit matches the training normalisation", "[image]") {
  Digit d{};
  d[0] = 255;
  d[1] = 128;
  const auto x = ctnn::io::normalize_digit(d);
  REQUIRE(x.size() == 784);
  CHECK(x[0] == Approx((1.0 - 0.1307) / 0.3081));
  CHECK(x[1] == ctnn::normalize_pixel(128, 0.1307f, 0.3081f));
  CHECK(x[2] == Approx(-0.1307 / 0.3081));
}

TEST_CASE("image: missing, empty, corrupt, unsupported and blank images are refused by name", "[image]") {
  ctnn_test::TempDir dir{"ctnn_test_image"};
  const std::string missing = dir.file("missing.png");
  CHECK(error_of(missing) == missing + ": cannot open: no such file");
  CHECK_THAT(error_of(dir.path.string()), Catch::Contains("is a directory"));

  const std::string empty = dir.file("empty.png");
  write_bytes(empty, "");
  CHECK(error_of(empty) == empty + ": empty file (0 bytes); expected a PNG, JPEG, BMP or PGM image");

  // A real PNG cut short: the signature is right, the data is not.
  const GrayImage g = draw(200, 300, 255, 0, one);
  const std::string png = dir.file("ok.png"), cut = dir.file("cut.png");
  REQUIRE(stbi_write_png(png.c_str(), g.width, g.height, 1, g.pixels.data(), g.width));
  std::ifstream in(png, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_bytes(cut, bytes.substr(0, bytes.size() / 2));
  CHECK_THAT(error_of(cut), Catch::StartsWith(cut + ": PNG: at byte offset ") && Catch::Contains("file truncated"));

  const std::string text = dir.file("digit.png");
  write_bytes(text, "this is not an image\n");
  CHECK(error_of(text) ==
        text + ": unrecognised format; ctnn reads PNG, JPEG (baseline), BMP and binary PGM/PPM images");

  const std::string ascii = dir.file("ascii.pgm");
  write_bytes(ascii, "P2\n2 2\n255\n0 255\n255 0\n");
  CHECK(error_of(ascii) == ascii + ": PNM: P2 (ASCII, bitmap or PAM) is not supported; ctnn reads binary PGM (P5) "
                                   "and PPM (P6)");

  const std::string blank = dir.file("blank.pgm");
  write_pgm(blank, GrayImage{50, 40, std::vector<std::uint8_t>(2000, 250)});
  CHECK_THAT(error_of(blank),
             Catch::StartsWith(blank + ": no ink found: nothing in the 50x40 image stands out"));
  const std::string faint = dir.file("faint.pgm");
  write_pgm(faint, draw(50, 40, 250, 235, [](double x, double) { return x > 20 && x < 30; }));
  CHECK_THAT(error_of(faint),
             Catch::Contains("no ink found") && Catch::Contains("(level 250, strongest ink 235)"));

  CHECK_THROWS_WITH(ctnn::io::mnist_digit(GrayImage{}, "camera"), "camera: empty image (0x0, 0 pixels)");
  CHECK_THROWS_AS(ctnn::io::mnist_digit(GrayImage{3, 3, {}}, "x"), ctnn::io_error);
}
