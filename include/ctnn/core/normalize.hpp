#pragma once
// Pixel normalisation shared by every backend: a uint8 pixel x becomes (x/255 − mean)/std, in float,
// in exactly this order of operations so that host and device produce the same bits.
#include <cstddef>
#include <cstdint>

#include "../core/host_device.hpp"

namespace ctnn {

CTNN_HOST_DEVICE constexpr float normalize_pixel(std::uint8_t x, float mean, float std) {
  return (float(x) / 255.0f - mean) / std;
}

// Host helper: normalises `count` pixels from src into dst.
inline void normalize_pixels(const std::uint8_t* src, std::size_t count, float mean, float std,
                             float* dst) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = normalize_pixel(src[i], mean, std);
}

}  // namespace ctnn
