// The CSV, the confusion matrix and the PNG report (see report.hpp). This translation unit compiles
// stb_image_write's implementation.
#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ctnn/core/error.hpp"
#include "ctnn/io/printable.hpp"

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_easy_font.h>
#include <stb/stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace lenet5 {

Confusion confusion_matrix(const std::vector<std::uint8_t>& truth, const std::vector<int>& predicted, int classes) {
  Confusion m(std::size_t(classes), std::vector<std::size_t>(std::size_t(classes), 0));
  for (std::size_t i = 0; i < truth.size() && i < predicted.size(); ++i)
    if (truth[i] < classes && predicted[i] >= 0 && predicted[i] < classes) ++m[truth[i]][std::size_t(predicted[i])];
  return m;
}

std::string confusion_text(const Confusion& m, const std::vector<std::string>& names) {
  const std::size_t n = m.size();
  std::size_t widest = 1;
  for (const auto& row : m)
    for (std::size_t v : row) widest = std::max(widest, std::to_string(v).size());
  auto pad = [](const std::string& s, std::size_t w) { return std::string(w > s.size() ? w - s.size() : 0, ' ') + s; };
  std::string out = "confusion matrix (rows: true class, columns: predicted class)\n";
  out += "true\\pred";
  for (std::size_t c = 0; c < n; ++c) out += pad(std::to_string(c), widest + 1);
  out += "   recall\n";
  for (std::size_t r = 0; r < n; ++r) {
    out += pad(std::to_string(r), 9);
    std::size_t total = 0;
    for (std::size_t c = 0; c < n; ++c) out += pad(std::to_string(m[r][c]), widest + 1), total += m[r][c];
    char recall[32];
    if (total) std::snprintf(recall, sizeof recall, "  %6.2f%%", 100.0 * double(m[r][r]) / double(total));
    else std::snprintf(recall, sizeof recall, "        -");
    out += recall;
    if (r < names.size() && names[r] != std::to_string(r)) out += "  " + names[r];
    out += '\n';
  }
  return out;
}

// ---- CSV ----------------------------------------------------------------------------------------

MetricsCsv::MetricsCsv(const std::string& path) : file_(std::fopen(path.c_str(), "w")), path_(path) {
  if (!file_) throw ctnn::io_error(ctnn::io::printable(path) + ": cannot write the metrics: " + std::strerror(errno));
  std::fprintf(file_, "%s\n", header());
  std::fflush(file_);
}
MetricsCsv::~MetricsCsv() {
  if (file_) std::fclose(file_);
}
const char* MetricsCsv::header() { return "epoch,loss,train_accuracy,test_accuracy,test_loss,learning_rate,seconds"; }
void MetricsCsv::add(const ctnn::EpochStats& s) {
  std::fprintf(file_, "%d,%.6g,%.6g,%.6g,%.6g,%.6g,%.3f\n", s.epoch, s.loss, s.train_accuracy, s.test_accuracy, s.test_loss,
               s.learning_rate, s.seconds);
  if (std::fflush(file_) != 0) throw ctnn::io_error(ctnn::io::printable(path_) + ": cannot write the metrics");
}

// ---- drawing ------------------------------------------------------------------------------------

namespace {

struct Rgb {
  std::uint8_t r, g, b;
};
constexpr Rgb white{255, 255, 255}, black{0, 0, 0}, gray{200, 200, 200}, dark{90, 90, 90};
constexpr Rgb blue{31, 119, 180}, orange{255, 127, 14};

class Canvas {
 public:
  Canvas(int w, int h, Rgb background = white) : w_(w), h_(h), px_(std::size_t(w) * std::size_t(h) * 3) {
    fill(0, 0, w, h, background);
  }
  int width() const { return w_; }
  int height() const { return h_; }
  void set(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
    std::uint8_t* p = px_.data() + (std::size_t(y) * std::size_t(w_) + std::size_t(x)) * 3;
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  }
  void fill(int x, int y, int w, int h, Rgb c) {
    for (int j = std::max(0, y); j < std::min(h_, y + h); ++j)
      for (int i = std::max(0, x); i < std::min(w_, x + w); ++i) set(i, j, c);
  }
  // A line `thick` pixels wide.
  void line(double x0, double y0, double x1, double y1, Rgb c, int thick = 2) {
    const int steps = int(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0))) + 1;
    for (int k = 0; k <= steps; ++k) {
      const double t = double(k) / steps;
      const int x = int(std::lround(x0 + (x1 - x0) * t)), y = int(std::lround(y0 + (y1 - y0) * t));
      fill(x - thick / 2, y - thick / 2, thick, thick, c);
    }
  }
  // Text with its top-left corner at (x, y), stb_easy_font's glyphs scaled by `scale`.
  void text(int x, int y, const std::string& s, Rgb c, int scale = 2) {
    static char buffer[200000];
    std::string copy = s;
    const int quads = stb_easy_font_print(0, 0, copy.data(), nullptr, buffer, sizeof buffer);
    for (int q = 0; q < quads; ++q) {
      float v[4][4];
      std::memcpy(v, buffer + q * 64, sizeof v);
      const int x0 = int(v[0][0] * float(scale)), y0 = int(v[0][1] * float(scale));
      const int x1 = int(v[2][0] * float(scale)), y1 = int(v[2][1] * float(scale));
      fill(x + x0, y + y0, x1 - x0, y1 - y0, c);
    }
  }
  static int text_width(const std::string& s, int scale = 2) {
    std::string copy = s;
    return stb_easy_font_width(copy.data()) * scale;
  }
  void save(const std::string& path) const {
    if (!stbi_write_png(path.c_str(), w_, h_, 3, px_.data(), w_ * 3))
      throw ctnn::io_error(ctnn::io::printable(path) + ": cannot write the PNG");
  }

 private:
  int w_, h_;
  std::vector<std::uint8_t> px_;
};

std::string number(double v, int digits = 3) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

struct Series {
  std::vector<double> y;
  Rgb colour;
  std::string name;
};

// One panel of curves over epochs 1..n at (x, y) of size w × h.
void plot(Canvas& c, int x, int y, int w, int h, const std::string& title, const std::vector<Series>& series,
          bool percent) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::size_t n = 0;
  for (const Series& s : series)
    for (double v : s.y)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v), n = std::max(n, s.y.size());
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (percent) hi = std::min(100.0, hi + 0.1 * (hi - lo) + 0.5), lo = std::max(0.0, lo - 0.1 * (hi - lo) - 0.5);
  else lo = std::max(0.0, lo - 0.1 * (hi - lo)), hi = hi + 0.1 * (hi - lo) + 1e-9;
  if (hi <= lo) hi = lo + 1;
  const int left = x + 90, right = x + w - 20, top = y + 40, bottom = y + h - 50;
  c.text(left, y + 8, title, black);
  c.fill(left, top, right - left, bottom - top, Rgb{248, 248, 248});
  const double x_lo = n > 1 ? 1.0 : 0.5, x_hi = n > 1 ? double(n) : 1.5;
  auto px = [&](double e) { return left + (e - x_lo) / (x_hi - x_lo) * (right - left); };
  auto py = [&](double v) { return bottom - (v - lo) / (hi - lo) * (bottom - top); };
  for (int k = 0; k <= 4; ++k) {  // horizontal grid and y labels
    const double v = lo + (hi - lo) * k / 4;
    const int yy = int(py(v));
    c.fill(left, yy, right - left, 1, gray);
    const std::string label = number(v, percent ? 4 : 3);
    c.text(left - 8 - Canvas::text_width(label), yy - 7, label, dark);
  }
  const std::size_t stride = std::max<std::size_t>(1, (n + 9) / 10);
  for (std::size_t e = 1; e <= std::max<std::size_t>(n, 1); e += stride) {  // x ticks
    const int xx = int(px(double(e)));
    c.fill(xx, bottom, 1, 6, black);
    c.text(xx - Canvas::text_width(std::to_string(e)) / 2, bottom + 10, std::to_string(e), dark);
  }
  c.text((left + right) / 2 - Canvas::text_width("epoch") / 2, bottom + 30, "epoch", black);
  c.fill(left, top, 1, bottom - top, black);
  c.fill(left, bottom, right - left, 1, black);
  int legend = left + 10;
  for (const Series& s : series) {
    for (std::size_t i = 0; i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const double ex = px(double(i + 1)), ey = py(s.y[i]);
      c.fill(int(ex) - 3, int(ey) - 3, 7, 7, s.colour);
      if (i + 1 < s.y.size() && std::isfinite(s.y[i + 1])) c.line(ex, ey, px(double(i + 2)), py(s.y[i + 1]), s.colour);
    }
    c.fill(legend, top + 12, 16, 4, s.colour);
    c.text(legend + 22, top + 7, s.name, black);
    legend += 40 + Canvas::text_width(s.name);
  }
}

// White → dark blue by t in [0, 1].
Rgb heat(double t) {
  t = std::clamp(t, 0.0, 1.0);
  auto mix = [&](double a, double b) { return std::uint8_t(std::lround(a + (b - a) * std::sqrt(t))); };
  return {mix(247, 8), mix(251, 48), mix(255, 107)};
}

}  // namespace

void write_curves_png(const std::string& path, const std::vector<ctnn::EpochStats>& history) {
  Series train_loss{{}, blue, "training"}, test_loss{{}, orange, "test"};
  Series train_acc{{}, blue, "training"}, test_acc{{}, orange, "test"};
  for (const ctnn::EpochStats& s : history) {
    train_loss.y.push_back(s.loss);
    test_loss.y.push_back(s.test_loss);
    train_acc.y.push_back(100 * s.train_accuracy);
    test_acc.y.push_back(100 * s.test_accuracy);
  }
  Canvas c(1100, 420);
  plot(c, 0, 0, 550, 420, "loss (cross-entropy)", {train_loss, test_loss}, false);
  plot(c, 550, 0, 550, 420, "accuracy (%)", {train_acc, test_acc}, true);
  c.save(path);
}

void write_confusion_png(const std::string& path, const Confusion& m, const std::vector<std::string>& names) {
  const int n = int(m.size()), cell = 60;
  int label_w = 0;
  for (int r = 0; r < n; ++r) {
    const std::string name = r < int(names.size()) && names[std::size_t(r)] != std::to_string(r)
                                 ? std::to_string(r) + " " + names[std::size_t(r)]
                                 : std::to_string(r);
    label_w = std::max(label_w, Canvas::text_width(name));
  }
  const int left = 40 + label_w + 14, top = 100;
  Canvas c(left + n * cell + 30, top + n * cell + 60);
  c.text(20, 14, "confusion matrix: rows true class, columns predicted", black);
  c.text(left + n * cell / 2 - Canvas::text_width("predicted") / 2, top - 50, "predicted", dark);
  c.text(10, top - 22, "true", dark);
  for (int r = 0; r < n; ++r) {
    std::size_t total = 0;
    for (std::size_t v : m[std::size_t(r)]) total += v;
    const std::string name = r < int(names.size()) && names[std::size_t(r)] != std::to_string(r)
                                 ? std::to_string(r) + " " + names[std::size_t(r)]
                                 : std::to_string(r);
    c.text(left - 12 - Canvas::text_width(name), top + r * cell + cell / 2 - 7, name, black);
    c.text(left + r * cell + cell / 2 - Canvas::text_width(std::to_string(r)) / 2, top - 24, std::to_string(r), black);
    for (int col = 0; col < n; ++col) {
      const std::size_t v = m[std::size_t(r)][std::size_t(col)];
      const double t = total ? double(v) / double(total) : 0.0;
      c.fill(left + col * cell, top + r * cell, cell - 1, cell - 1, heat(t));
      const std::string s = std::to_string(v);
      const int scale = s.size() > 4 ? 1 : 2;
      c.text(left + col * cell + cell / 2 - Canvas::text_width(s, scale) / 2, top + r * cell + cell / 2 - 7 * scale / 2, s,
             t > 0.45 ? white : black, scale);
    }
  }
  c.text(left, top + n * cell + 16, "shade: fraction of the true class's images", dark);
  c.save(path);
}

std::size_t write_misclassified_png(const std::string& path, const ctnn::Dataset& data, const std::vector<int>& predicted,
                                    const std::vector<std::string>& names, std::size_t limit) {
  std::vector<std::size_t> wrong;
  for (std::size_t i = 0; i < data.count && i < predicted.size() && wrong.size() < limit; ++i)
    if (predicted[i] != int(data.labels[i])) wrong.push_back(i);
  const int columns = 10, zoom = 2, side = int(data.rows), tile_w = side * zoom + 44, tile_h = side * zoom + 36;
  const int rows = std::max(1, int((wrong.size() + columns - 1) / columns));
  bool named = false;
  for (std::size_t k = 0; k < names.size(); ++k) named = named || names[k] != std::to_string(k);
  const int key_h = named ? 40 + 18 * int((names.size() + 4) / 5) : 0;
  Canvas c(columns * tile_w + 20, 60 + rows * tile_h + key_h + 10);
  c.text(10, 10, "misclassified test images (p: predicted, t: true): " + std::to_string(wrong.size()) + " shown", black);
  if (wrong.empty()) c.text(10, 60, "none: every image is classified right", dark);
  for (std::size_t k = 0; k < wrong.size(); ++k) {
    const std::size_t i = wrong[k];
    const int x = 10 + int(k % columns) * tile_w + 22, y = 44 + int(k / columns) * tile_h;
    const std::uint8_t* img = data.pixels.data() + i * data.rows * data.cols;
    for (int py = 0; py < side; ++py)
      for (int px = 0; px < int(data.cols); ++px) {
        const std::uint8_t v = img[std::size_t(py) * data.cols + std::size_t(px)];
        c.fill(x + px * zoom, y + py * zoom, zoom, zoom, Rgb{v, v, v});
      }
    const std::string label = "p:" + std::to_string(predicted[i]) + " t:" + std::to_string(int(data.labels[i]));
    c.text(x + side * zoom / 2 - Canvas::text_width(label) / 2, y + side * zoom + 6, label, black);
  }
  if (named) {
    const int y0 = 60 + rows * tile_h;
    c.text(10, y0, "classes:", black);
    for (std::size_t k = 0; k < names.size(); ++k)
      c.text(10 + int(k % 5) * (c.width() - 20) / 5, y0 + 20 + 18 * int(k / 5), std::to_string(k) + " " + names[k], dark);
  }
  c.save(path);
  return wrong.size();
}

}  // namespace lenet5
