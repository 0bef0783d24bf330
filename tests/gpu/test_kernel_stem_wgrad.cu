// The RGB stem's weight gradient in the epilogue of the TF32 backward data of the layer above its activation
// (kernels/conv_stem_wgrad_epilogue.cuh, launch_conv_dgrad_stem_wgrad), on the CIFAR networks' layers (the
// stem 3→32 at 32×32, ReLU, then strided's 32→64 stride 2 or vgg's 32→32), fresh random inputs (the stem's output
// about half negative, so the ReLU's mask matters), partials, dW and db poisoned first. At batches 1, 3
// and 13:
//   1. against the exact sums in double (the backward data from the unrounded weights and dy, through the
//      ReLU, times the unrounded input): within TF32's bound, the backward data's own bound carried
//      through the second product; and much nearer the sums of TF32-rounded operands than the exact ones;
//   2. against the sums in double of what the kernel multiplies: the backward data's g as the unfused
//      kernel computes it (the unfused kernel and tile with the ReLU folded in: the same main loop),
//      rounded to TF32, times the input rounded to TF32 (the bias: g unrounded), within the FP32 tolerance
//      of the other kernel tests (close_sum): a single missing or doubled pixel fails it;
//   3. the same bits twice (deterministic).
#include <cmath>
#include <cstdio>
#include <vector>

#include <ctnn/kernels/conv.cuh>

#include "kernel_test.hpp"
#include "tf32_check.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

using G0 = kernels::ConvDims<3, 32, 32, 32, 3, 1, 1, 1>;   // the stem
using Gs2 = kernels::ConvDims<32, 32, 32, 64, 3, 2, 1, 1>;  // strided's stride-2 layer above its ReLU
using Gs1 = kernels::ConvDims<32, 32, 32, 32, 3, 1, 1, 1>;  // vgg's 32→32 layer
static_assert(kernels::conv_s2_stem_wgrad_fits<Gs2, G0>() && !kernels::conv_patch_stem_wgrad_fits<Gs2, G0>());
static_assert(kernels::conv_patch_stem_wgrad_fits<Gs1, G0>() && !kernels::conv_s2_stem_wgrad_fits<Gs1, G0>());
using S = kernels::StemWgradEpilogue<G0>;

template <class G>
void test_batch(Tally& t, int batch, std::uint64_t seed) {
  const std::size_t B = std::size_t(batch), HW = std::size_t(G::H) * G::W, OHW = std::size_t(G::OH) * G::OW;
  const std::vector<float> w = random_vector(std::size_t(G::Out) * G::C * 9, seed);
  const std::vector<float> dy = random_vector(B * G::Out * OHW, seed + 1);
  const std::vector<float> below = random_vector(B * G::C * HW, seed + 2);  // the stem's output (after ReLU's
                                                                            // mask: only its sign is read)
  const std::vector<float> x0 = random_vector(B * G0::C * HW, seed + 3);
  DeviceBuffer<float> d_w(w), d_dy(dy), d_below(below), d_x0(x0), d_g(B * G::C * HW);
  DeviceBuffer<float> d_part(kernels::conv_stem_wgrad_workspace_floats<G, G0>(batch)), d_dw(std::size_t(S::split)),
      d_db(std::size_t(S::M));
  Stream stream;
  const char* layer = G::S == 2 ? "32->64 s2" : "32->32";

  // The unfused kernel's g (same main loop and tile, ReLU folded into its store).
  d_g.poison();
  if constexpr (G::S == 2)
    kernels::launch_conv_patch_dgrad_s2_mma<G, relu_fn>(stream.s, d_w.ptr, d_dy.ptr, d_g.ptr, batch, d_below.ptr);
  else
    kernels::launch_conv_patch<kernels::ConvPatchDgrad<G>, kernels::ConvPatchTall<kernels::ConvPatchDgrad<G>>, relu_fn>(
        stream.s, d_w.ptr, d_below.ptr, d_dy.ptr, d_g.ptr, batch);
  CTNN_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  const std::vector<float> g = d_g.download();

  auto run = [&] {
    d_part.poison(), d_dw.poison(), d_db.poison();
    kernels::launch_conv_dgrad_stem_wgrad<G, G0, relu_fn>(stream.s, d_w.ptr, d_below.ptr, d_dy.ptr, d_x0.ptr, d_part.ptr,
                                                         d_dw.ptr, d_db.ptr, batch);
    CTNN_CUDA_CHECK(cudaStreamSynchronize(stream.s));
    return std::make_pair(d_dw.download(), d_db.download());
  };
  const auto [dw, db] = run();
  const auto [dw2, db2] = run();

  // The backward data in double: exact, and its magnitude Σ|w·dy| (for its bound), per input pixel.
  std::vector<double> g_exact(B * G::C * HW, 0.0), g_mag(B * G::C * HW, 0.0);
  for (std::size_t n = 0; n < B; ++n)
    for (int o = 0; o < G::Out; ++o)
      for (int oy = 0; oy < G::OH; ++oy)
        for (int ox = 0; ox < G::OW; ++ox) {
          const double d = dy[(n * G::Out + o) * OHW + std::size_t(oy) * G::OW + ox];
          for (int c = 0; c < G::C; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int y = G::S * oy + ky - 1, x = G::S * ox + kx - 1;
                if (y < 0 || y >= G::H || x < 0 || x >= G::W) continue;
                const double p = double(w[((std::size_t(o) * G::C + c) * 3 + ky) * 3 + kx]) * d;
                const std::size_t at = (n * G::C + c) * HW + std::size_t(y) * G::W + x;
                g_exact[at] += p, g_mag[at] += std::fabs(p);
              }
        }
  const double u = std::ldexp(1.0, -10) + std::ldexp(1.0, -21), kd = G::Out * 9 * std::ldexp(1.0, -24);
  const double kw = double(B * HW) * std::ldexp(1.0, -24);
  std::vector<double> dw_exact(S::split, 0.0), dw_rounded(S::split, 0.0), dw_bound(S::split, 0.0);
  std::vector<double> db_exact(S::M, 0.0), db_kernel(S::M, 0.0), db_bound(S::M, 0.0);
  for (std::size_t n = 0; n < B; ++n)
    for (int m = 0; m < S::M; ++m)
      for (int y = 0; y < G::H; ++y)
        for (int x = 0; x < G::W; ++x) {
          const std::size_t at = (n * G::C + m) * HW + std::size_t(y) * G::W + x;
          const double mask = relu_fn::derivative(below[at]);
          const double ge = g_exact[at] * mask, gerr = (u + kd) * g_mag[at] * mask, gk = g[at];
          db_exact[m] += ge, db_kernel[m] += gk, db_bound[m] += gerr + kw * std::fabs(ge);
          for (int c = 0; c < G0::C; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int sy = y + ky - 1, sx = x + kx - 1;
                if (sy < 0 || sy >= G::H || sx < 0 || sx >= G::W) continue;
                const float xv = x0[(n * G0::C + c) * HW + std::size_t(sy) * G::W + sx];
                const std::size_t e = std::size_t(m) * G0::C * 9 + c * 9 + ky * 3 + kx;
                dw_exact[e] += ge * xv;
                dw_rounded[e] += tf32_rounded(g[at]) * tf32_rounded(xv);
                dw_bound[e] += gerr * std::fabs(xv) + (u + kw) * std::fabs(ge * xv);
              }
        }

  char what[160];
  auto within = [&](const std::vector<float>& got, const std::vector<double>& exact, const std::vector<double>& bound,
                    const char* name) {
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double r = std::fabs(double(got[i]) - exact[i]) / (bound[i] + 1e-300);
      if (!(r <= worst)) worst = std::isnan(r) ? INFINITY : r, at = i;
    }
    std::snprintf(what, sizeof what, "%s batch %d: %s within the TF32 bound of the exact sums", layer, batch, name);
    std::printf("%s %s: worst %.3f of it (at %zu: got %.7g want %.7g)\n", worst <= 1 ? "ok  " : "FAIL", what, worst, at,
                double(got[at]), exact[at]);
    t(worst <= 1);
  };
  within(dw, dw_exact, dw_bound, "dW");
  within(db, db_exact, db_bound, "db");
  double off_exact = 0, off_rounded = 0;
  for (std::size_t i = 0; i < dw.size(); ++i) {
    off_exact += (dw[i] - dw_exact[i]) * (dw[i] - dw_exact[i]);
    off_rounded += (dw[i] - dw_rounded[i]) * (dw[i] - dw_rounded[i]);
  }
  const bool engaged = off_rounded < 0.01 * off_exact;
  std::printf("%s %s batch %d: dW nearer the TF32-rounded sums than the exact ones (rms %.3g of it)\n",
              engaged ? "ok  " : "FAIL", layer, batch, std::sqrt(off_rounded / (off_exact + 1e-300)));
  t(engaged);
  std::snprintf(what, sizeof what, "%s batch %d: dW = the sums of what the kernel multiplies", layer, batch);
  t(close_sum(dw, to_float(dw_rounded), what));
  std::snprintf(what, sizeof what, "%s batch %d: db = the sums of the backward data's g", layer, batch);
  t(close_sum(db, to_float(db_kernel), what));
  std::snprintf(what, sizeof what, "%s batch %d: dW run twice", layer, batch);
  t(same_bits(dw2, dw, what));
  std::snprintf(what, sizeof what, "%s batch %d: db run twice", layer, batch);
  t(same_bits(db2, db, what));
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  std::uint64_t seed = 11;
  for (const int batch : {1, 3, 13}) test_batch<Gs2>(t, batch, seed += 10);
  for (const int batch : {1, 3, 13}) test_batch<Gs1>(t, batch, seed += 10);
  return t.summary();
}
