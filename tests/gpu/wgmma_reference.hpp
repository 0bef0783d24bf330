#pragma once
// The host reference of the wgmma TF32 convolutions (kernels/conv_wgmma.cuh), shared by their kernel
// test and the network test. Each output is checked twice:
//  1. Against the exact sum, within what the kernel's TF32 operands allow: the weights are rounded
//     (relative error <= 2^-11), the patch truncated by the tensor cores (<= 2^-10), so each product is
//     off by <= 2^-10 + 2^-11 + 2^-21 of itself, and the FP32 sum of K terms adds <= K·2^-24 of their
//     magnitude.
//  2. Against the sum in double of the operands as the kernel sees them (rounded weights, truncated
//     patch), within the FP32 tolerance of the other kernel tests (close_sum): this one sees a single
//     missing or doubled term, which bound 1 (scaled by all the terms' magnitude) might not, and a
//     kernel that rounds the patch (the mma.sync kernels) instead of truncating it.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernel_test.hpp"
#include "tf32_check.hpp"  // tf32_rounded

namespace ctnn_test {

inline double tf32_truncated(float x) {  // what the tensor cores take of an FP32 operand
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= 0xffffe000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// The relative error of one product: a rounded weight and a truncated value (forward, backward data), or
// two truncated values (the weight gradient: dy and x both straight from memory).
inline const double rounded_by_truncated = std::ldexp(1.0, -10) + std::ldexp(1.0, -11) + std::ldexp(1.0, -21);
inline const double truncated_by_truncated = std::ldexp(1.0, -9) + std::ldexp(1.0, -20);

struct Reference {
  std::vector<double> exact, seen, mag;  // exact sum, sum of the kernel's operands, Σ|terms|
  explicit Reference(std::size_t n) : exact(n), seen(n), mag(n) {}
  void add(std::size_t i, float weight, float value) {
    exact[i] += double(weight) * value;
    seen[i] += tf32_rounded(weight) * tf32_truncated(value);
    mag[i] += std::fabs(double(weight) * value);
  }
  void add_truncated(std::size_t i, float a, float b) {
    exact[i] += double(a) * b;
    seen[i] += tf32_truncated(a) * tf32_truncated(b);
    mag[i] += std::fabs(double(a) * b);
  }
};

inline void check(Tally& t, const std::vector<float>& got, const Reference& ref, int terms, const char* what,
                  double product_error = rounded_by_truncated) {
  double worst = 0;
  std::size_t at = 0;
  bool finite = true;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = (product_error + terms * std::ldexp(1.0, -24)) * ref.mag[i];
    const double err = std::fabs(double(got[i]) - ref.exact[i]);
    finite = finite && std::isfinite(got[i]);
    if (err > worst * bound) worst = err / (bound + 1e-300), at = i;
  }
  std::printf("%s %s: max error %.3f of the TF32 bound (at %zu: got %.7g want %.7g)\n",
              finite && worst <= 1.0 ? "ok  " : "FAIL", what, worst, at, double(got[at]), ref.exact[at]);
  t(finite && worst <= 1.0);
  char q[320];
  std::snprintf(q, sizeof q, "%s, against the sum of the kernel's operands", what);
  t(close_sum(got, std::vector<float>(ref.seen.begin(), ref.seen.end()), q));
}

// Forward (y = w ∗ x + b) and backward data (dx from dy) of a 3×3 convolution with padding 1 and stride
// S (1: "same"; 2: H and W even): x [batch][C][H][W], w [Out][C][3][3], b [Out], dy [batch][Out][H/S][W/S].
struct Conv3x3Reference {
  Reference y, dx;
};
inline Conv3x3Reference conv3x3_reference(const std::vector<float>& w, const std::vector<float>& b,
                                          const std::vector<float>& x, const std::vector<float>& dy, int batch,
                                          int C, int Out, int H, int W, int S = 1) {
  const int OH = H / S, OW = W / S;
  Conv3x3Reference r{Reference(std::size_t(batch) * Out * OH * OW), Reference(std::size_t(batch) * C * H * W)};
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < Out; ++o)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          const std::size_t yi = ((std::size_t(n) * Out + o) * OH + oy) * OW + ox;
          r.y.exact[yi] = r.y.seen[yi] = b[o];
          r.y.mag[yi] = std::fabs(double(b[o]));
          for (int c = 0; c < C; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = S * oy - 1 + ky, ix = S * ox - 1 + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                const std::size_t wi = ((std::size_t(o) * C + c) * 3 + ky) * 3 + kx;
                const std::size_t xi = ((std::size_t(n) * C + c) * H + iy) * W + ix;
                r.y.add(yi, w[wi], x[xi]);
                r.dx.add(xi, w[wi], dy[yi]);
              }
        }
  return r;
}

// Weight gradient of the same convolution: dW [Out][C][3][3] = Σ dy · x, both operands truncated to TF32.
inline Reference conv3x3_wgrad_reference(const std::vector<float>& x, const std::vector<float>& dy, int batch, int C,
                                         int Out, int H, int W) {
  Reference r(std::size_t(Out) * C * 9);
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < Out; ++o)
      for (int c = 0; c < C; ++c)
        for (int ky = 0; ky < 3; ++ky)
          for (int kx = 0; kx < 3; ++kx)
            for (int oy = 0; oy < H; ++oy)
              for (int ox = 0; ox < W; ++ox) {
                const int iy = oy - 1 + ky, ix = ox - 1 + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                r.add_truncated(((std::size_t(o) * C + c) * 3 + ky) * 3 + kx,
                                dy[((std::size_t(n) * Out + o) * H + oy) * W + ox],
                                x[((std::size_t(n) * C + c) * H + iy) * W + ix]);
              }
  return r;
}

}  // namespace ctnn_test
