#pragma once
// Learnable synthetic images for the GPU tests that train a small CIFAR-shaped network.
#include <cstddef>
#include <cstdint>

#include <ctnn/core/dataset.hpp>
#include <ctnn/core/random.hpp>

namespace ctnn_test {

// Learnable synthetic 3×16×16 images: class c lights a column band in channel c mod 3 and a diagonal.
inline ctnn::Dataset patterns(std::size_t count, std::uint64_t seed) {
  ctnn::Dataset d;
  d.count = count, d.rows = 16, d.cols = 16;
  ctnn::Random rng(seed);
  for (std::size_t i = 0; i < count; ++i) {
    const int label = int(rng.below(10));
    for (int ch = 0; ch < 3; ++ch)
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) {
          const bool lit = (c * 10 / 16 == label && ch == label % 3) || (r + c + ch) % 10 == label;
          d.pixels.push_back(std::uint8_t(lit ? 150 + rng.below(100) : rng.below(90)));
        }
    d.labels.push_back(std::uint8_t(label));
  }
  return d;
}

}  // namespace ctnn_test
