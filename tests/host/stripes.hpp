#pragma once
// A small learnable data set for the host training tests.
#include <cstddef>
#include <cstdint>

#include "ctnn/core/dataset.hpp"
#include "ctnn/core/random.hpp"

namespace ctnn::test {

// 2x2 images: class 0 has a bright top row and a dark bottom row, class 1 the reverse; noisy.
inline Dataset stripes(std::size_t count, std::uint64_t seed) {
  Dataset d;
  d.count = count, d.rows = 2, d.cols = 2;
  Random rng(seed);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t label = std::uint8_t(rng.below(2));
    auto bright = [&] { return std::uint8_t(180 + rng.below(76)); };
    auto dark = [&] { return std::uint8_t(rng.below(76)); };
    for (int row = 0; row < 2; ++row)
      for (int col = 0; col < 2; ++col) d.pixels.push_back((row == 0) == (label == 0) ? bright() : dark());
    d.labels.push_back(label);
  }
  return d;
}

}  // namespace ctnn::test
