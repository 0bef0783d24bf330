#pragma once
// Random numbers that are the same on every platform, compiler and backend (unlike the standard
// distributions), all built on SplitMix64's finaliser:
//   mix64(z)                     a bijection on 64 bits that mixes every input bit into every output bit
//   Random                       a seeded sequence (SplitMix64) for initialisation and shuffling
//   counter_key / counter_uniform  counter-based numbers: the i-th number of stream `key` is a pure
//                                function of (key, i), so a layer that needs randomness per step (Dropout)
//                                gets the same numbers on host and device, and a resumed run gets the
//                                numbers of the step it resumes at, with no generator state to save.
#include <cmath>
#include <cstdint>

#include "host_device.hpp"

namespace ctnn {

inline constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;  // 2^64 / φ, SplitMix64's increment

CTNN_HOST_DEVICE constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The key of the random stream of (seed, step, layer): each training step's layer gets its own stream.
// In two parts, because the CUDA backend knows (seed, layer) when it captures a step and reads the
// step from device memory when the step runs: counter_key(s, t, l) = step_key(layer_key(s, l), t).
CTNN_HOST_DEVICE constexpr std::uint64_t layer_key(std::uint64_t seed, std::uint64_t layer) {
  return mix64(mix64(seed + golden_gamma) ^ ((layer + 1) * golden_gamma));
}
CTNN_HOST_DEVICE constexpr std::uint64_t step_key(std::uint64_t layer_key, std::uint64_t step) {
  return mix64(layer_key ^ mix64(step + golden_gamma));
}
CTNN_HOST_DEVICE constexpr std::uint64_t counter_key(std::uint64_t seed, std::uint64_t step, std::uint64_t layer) {
  return step_key(layer_key(seed, layer), step);
}
// The i-th number of stream `key`: uniform in [0, 1) with 24 random bits (exact in float).
CTNN_HOST_DEVICE constexpr float counter_uniform(std::uint64_t key, std::uint64_t i) {
  return float(mix64(key + (i + 1) * golden_gamma) >> 40) * 0x1.0p-24f;
}

class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next_u64() { return mix64(state_ += golden_gamma); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return next_u64() % n; }
  // Standard normal (Box-Muller; one value per call, for simplicity).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace ctnn
