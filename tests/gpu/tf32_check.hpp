#pragma once
// The TF32 check of the mma.sync kernels' results (convolutions, dense), shared by their tests. Each
// output is compared twice:
//  1. with the exact sum (double), within TF32's bound: each operand rounded with relative error
//     <= 2^-11, so each product is off by <= 2^-10 + 2^-21 of itself, and the FP32 sum of K terms adds
//     <= K·2^-24 of their magnitude; the result must also sit much nearer the sum of the rounded
//     operands than the exact sum (TF32 rounding engaged, not an FP32 path);
//  2. with the sum in double of the TF32-rounded operands, within the FP32 tolerance of the other kernel
//     tests (close_sum), which sees a single missing or doubled term; a reference missing each output's
//     largest term must fail that check (it is tight enough to catch one).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernel_test.hpp"

namespace ctnn_test {

// x rounded to TF32 as cvt.rna.tf32.f32 does: to nearest on the 10-bit mantissa, ties away from zero.
inline double tf32_rounded(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & 0xffffe000u;  // sign-magnitude: adding half an ulp to the magnitude rounds ties away
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

// Per output: the exact sum, the sum with TF32 operands, the magnitude Σ|a·b| (+ |bias|), the largest
// TF32 term, and the number of terms.
struct RoundedReference {
  std::vector<double> exact, rounded, mag, largest;
  std::vector<long long> terms;
  explicit RoundedReference(std::size_t n) : exact(n), rounded(n), mag(n), largest(n), terms(n) {}
  void add(std::size_t i, float a, float b) {
    const double t = tf32_rounded(a) * tf32_rounded(b);
    exact[i] += double(a) * double(b);
    rounded[i] += t;
    mag[i] += std::fabs(double(a) * double(b));
    if (std::fabs(t) > std::fabs(largest[i])) largest[i] = t;
    ++terms[i];
  }
};

inline std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// close_sum's measure (kernel_test.hpp), without its report line: the worst error over its tolerance.
inline double close_sum_ratio(const std::vector<float>& got, const std::vector<double>& want) {
  double floor = 0, worst = 0;
  for (double v : want) floor = std::max(floor, 1e-5 * std::fabs(v));
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / (std::max(floor, 1e-30) + 1e-4 * std::fabs(want[i])));
  return worst;
}

// Checks 1 and 2 (above) of one result.
inline void check_tf32(Tally& t, const std::vector<float>& got, const RoundedReference& ref, const char* what) {
  double worst = 0, off_exact = 0, off_rounded = 0;  // error / bound; squared distances to the two references
  bool finite = true;
  std::size_t at = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double K = double(ref.terms[i]);
    const double err = std::fabs(double(got[i]) - ref.exact[i]);
    const double bound = (std::ldexp(1.0, -10) + std::ldexp(1.0, -21) + K * std::ldexp(1.0, -24)) * ref.mag[i];
    finite = finite && std::isfinite(got[i]);
    if (err > worst * bound) worst = err / (bound + 1e-300), at = i;
    off_exact += err * err;
    off_rounded += (double(got[i]) - ref.rounded[i]) * (double(got[i]) - ref.rounded[i]);
  }
  // TF32 rounding engaged: the result sits much nearer the sum of rounded operands than the exact sum
  // (an FP32 kernel would sit at the exact sum, some 2^13 times nearer to it).
  const bool bound_ok = finite && worst <= 1.0, engaged = off_rounded < 0.01 * off_exact;
  std::printf("%s %s: max error %.3f of the TF32 bound (at %zu: got %.7g want %.7g); rms distance to the "
              "TF32-rounded sum %.3g of that to the exact sum%s\n",
              bound_ok && engaged ? "ok  " : "FAIL", what, worst, at, got.empty() ? 0.0 : double(got[at]),
              got.empty() ? 0.0 : ref.exact[at], std::sqrt(off_rounded / (off_exact + 1e-300)),
              engaged ? "" : " (no TF32 rounding seen: an FP32 path ran?)");
  t(bound_ok && engaged);

  char q[200];
  std::snprintf(q, sizeof q, "%s, against the TF32-rounded operands' sum", what);
  t(close_sum(got, to_float(ref.rounded), q));
  // The same check against a reference missing each output's largest term must fail.
  std::vector<double> missing = ref.rounded;
  for (std::size_t i = 0; i < missing.size(); ++i) missing[i] -= ref.largest[i];
  const double r = close_sum_ratio(got, missing);
  std::printf("%s %s: against a reference with each output's largest term left out: %.3g of the tolerance (%s)\n",
              r > 1 ? "ok  " : "FAIL", what, r, r > 1 ? "caught" : "NOT caught: the check is too loose");
  t(r > 1);
}

}  // namespace ctnn_test
