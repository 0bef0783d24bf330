#pragma once
// Dataset: labelled images as they come from a file (uint8 pixels, uint8 class labels), with optional
// float targets for regression losses, and the ways to take part of one (subset, split). The loaders
// in io/ fill it; the trainers read it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "random.hpp"

namespace ctnn {

struct Dataset {
  std::size_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count · (values per image), row-major, channels first
  std::vector<std::uint8_t> labels;  // count class indices
  std::vector<float> targets;        // empty, or count · (target width) floats for a regression loss

  std::size_t values_per_image() const { return count ? pixels.size() / count : 0; }
  std::size_t target_width() const { return count ? targets.size() / count : 0; }
};

// The images at `indices`, in that order.
inline Dataset select(const Dataset& d, const std::vector<std::size_t>& indices) {
  Dataset out;
  out.rows = d.rows;
  out.cols = d.cols;
  out.count = indices.size();
  const std::size_t per = d.values_per_image(), width = d.target_width();
  out.pixels.reserve(indices.size() * per);
  out.labels.reserve(indices.size());
  out.targets.reserve(indices.size() * width);
  for (std::size_t i : indices) {
    if (i >= d.count)
      throw std::out_of_range("ctnn: image " + std::to_string(i) + " of a data set of " + std::to_string(d.count));
    out.pixels.insert(out.pixels.end(), d.pixels.begin() + std::ptrdiff_t(i * per),
                      d.pixels.begin() + std::ptrdiff_t((i + 1) * per));
    if (!d.labels.empty()) out.labels.push_back(d.labels[i]);
    if (width)
      out.targets.insert(out.targets.end(), d.targets.begin() + std::ptrdiff_t(i * width),
                         d.targets.begin() + std::ptrdiff_t((i + 1) * width));
  }
  return out;
}

// Images first .. first + count - 1.
inline Dataset subset(const Dataset& d, std::size_t first, std::size_t count) {
  if (first > d.count || count > d.count - first)
    throw std::out_of_range("ctnn: subset of images " + std::to_string(first) + ".." +
                            std::to_string(first + count) + " of a data set of " + std::to_string(d.count));
  std::vector<std::size_t> idx(count);
  std::iota(idx.begin(), idx.end(), first);
  return select(d, idx);
}

// Splits off `held_out` images chosen at random (seeded) as a validation set: {rest, held out}, each
// in the original order.
inline std::pair<Dataset, Dataset> split(const Dataset& d, std::size_t held_out, std::uint64_t seed = 1) {
  if (held_out > d.count)
    throw std::out_of_range("ctnn: cannot hold out " + std::to_string(held_out) + " images of " +
                            std::to_string(d.count));
  std::vector<std::size_t> order(d.count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Random rng(seed);
  for (std::size_t i = d.count; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  std::vector<std::size_t> rest(order.begin() + std::ptrdiff_t(held_out), order.end());
  std::vector<std::size_t> out(order.begin(), order.begin() + std::ptrdiff_t(held_out));
  std::sort(rest.begin(), rest.end());
  std::sort(out.begin(), out.end());
  return {select(d, rest), select(d, out)};
}

// What a network expects of a data set: values per image, the image's H×W when its input is
// C×H×W (0 for a flat input), and the number of classes.
struct SampleSpec {
  std::size_t size = 0;
  std::size_t rows = 0, cols = 0;
  int classes = 0;  // the network's output size

  template <class Net>
  static SampleSpec of() {
    using In = typename Net::input_shape;
    SampleSpec s;
    s.size = In::size;
    if constexpr (In::rank == 3) s.rows = std::size_t(In::dims[1]), s.cols = std::size_t(In::dims[2]);
    s.classes = int(Net::output_shape::size);
    return s;
  }
  std::string str() const {
    return rows ? std::to_string(size / (rows * cols)) + "x" + std::to_string(rows) + "x" + std::to_string(cols)
                : std::to_string(size);
  }
};

// Throws std::invalid_argument, naming `what` (e.g. "training set"), unless `d` fits `spec`: images of
// rows × cols pixels with C channels each (C·rows·cols = spec.size, and rows × cols = H × W for a
// C×H×W input), as many pixels and labels as images, every label below spec.classes.
inline void check_dataset(const Dataset& d, const SampleSpec& spec, const std::string& what) {
  if (d.count == 0) throw std::invalid_argument("ctnn: the " + what + " is empty");
  const std::size_t plane = d.rows * d.cols;
  bool fits = plane > 0 && spec.size % plane == 0;
  if (spec.rows) fits = fits && d.rows == spec.rows && d.cols == spec.cols;
  if (!fits)
    throw std::invalid_argument("ctnn: the " + what + " has images of " + std::to_string(d.rows) + "x" +
                                std::to_string(d.cols) + " pixels, but the network expects " + spec.str() +
                                " = " + std::to_string(spec.size) + " values per image");
  if (d.pixels.size() != d.count * spec.size)
    throw std::invalid_argument("ctnn: the " + what + " holds " + std::to_string(d.pixels.size()) +
                                " pixel values, expected " + std::to_string(d.count) + " images x " +
                                std::to_string(spec.size) + " = " + std::to_string(d.count * spec.size));
  if (!d.targets.empty() && d.targets.size() != d.count * std::size_t(spec.classes))
    throw std::invalid_argument("ctnn: the " + what + " holds " + std::to_string(d.targets.size()) +
                                " target values, expected " + std::to_string(d.count) + " images x " +
                                std::to_string(spec.classes) + " outputs");
  if (d.labels.size() != d.count)
    throw std::invalid_argument("ctnn: the " + what + " holds " + std::to_string(d.labels.size()) +
                                " labels, expected " + std::to_string(d.count) + " (one per image)");
  for (std::size_t i = 0; i < d.count; ++i)
    if (d.labels[i] >= spec.classes)
      throw std::invalid_argument("ctnn: label " + std::to_string(d.labels[i]) + " of image " + std::to_string(i) +
                                  " in the " + what + " is outside 0.." + std::to_string(spec.classes - 1) +
                                  " (the network has " + std::to_string(spec.classes) + " outputs)");
}

}  // namespace ctnn
