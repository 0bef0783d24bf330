// The wgmma TF32 convolution kernels (kernels/conv_wgmma.cuh: stride-1 "same" 3×3, forward and backward
// data, and the forward of stride-2 3×3 layers; kernels/conv_wgmma_wgrad.cuh: the weight gradient of the
// stride-1 ones with 64 output channels) against a host reference in double on fresh random inputs,
// outputs poisoned first, on the CIFAR networks' stride-1 and stride-2 layers, each tile shape, batches 1,
// 3 and 13; the activations folded into the stores against the plain kernel's output; the weight gradient
// bit for bit the same when run twice.
//
// Each output is checked twice (wgmma_reference.hpp): against the exact sum within the TF32 bound, and
// against the sum of the operands as the kernel sees them within FP32's. The bias gradient (an FP32 sum)
// against the double sum within FP32's tolerance.
// Skipped (exit 77) without a device, or where the program's device code has no wgmma (not sm_90a).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <ctnn/kernels/conv_direct.cuh>
#include <ctnn/kernels/conv_wgmma.cuh>
#include <ctnn/kernels/conv_wgmma_wgrad.cuh>

#include "kernel_test.hpp"
#include "wgmma_reference.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <int C, int H, int W, int Out>
void test_layer(Tally& t, const char* name, std::uint64_t seed) {
  using G = kernels::ConvDims<C, H, W, Out, 3, 1, 1, 1>;
  using PF = kernels::ConvPatchFwd<G>;
  using PD = kernels::ConvPatchDgrad<G>;
  static_assert(kernels::conv_wgmma_fits<G>());
  if (!case_selected(name)) return;
  Stream stream;
  const std::vector<float> w = random_vector(std::size_t(Out) * C * 9, seed), b = random_vector(Out, seed + 1);
  DeviceBuffer<float> d_w(w), d_b(b), d_wt(w.size());
  constexpr int plane = H * W;
  for (const int batch : std::getenv("CTNN_QUICK") ? std::vector<int>{1, 3} : std::vector<int>{1, 3, 13}) {
    const std::size_t nx = std::size_t(batch) * C * plane, ny = std::size_t(batch) * Out * plane;
    const std::vector<float> x = random_vector(nx, seed + 2 + batch), dy = random_vector(ny, seed + 3 + 7 * batch);
    // The activation below the layer, for the backward data's folded derivative: ReLU's output.
    std::vector<float> below = random_vector(nx, seed + 5 + batch);
    for (float& v : below) v = v < 0 ? 0.f : v;
    const auto [y_ref, dx_ref] = conv3x3_reference(w, b, x, dy, batch, C, Out, H, W);
    DeviceBuffer<float> d_x(x), d_dy(dy), d_below(below), d_y(ny), d_dx(nx);
    auto run = [&](auto&& launch, DeviceBuffer<float>& out) {
      out.poison();
      d_wt.poison();
      launch();
      stream.sync();
      return out.download();
    };
    char what[200];
    auto label = [&](const char* dir, const char* tile) {
      std::snprintf(what, sizeof what, "%s batch %d %s, tile %s", name, batch, dir, tile);
      return what;
    };
    auto forward = [&]<class T>(const char* tile) {
      const auto y = run([&] {
        kernels::launch_wgmma_weights<PF, T>(stream.s, d_w.ptr, d_wt.ptr);
        kernels::launch_conv_wgmma<PF, T>(stream.s, d_wt.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
      }, d_y);
      check(t, y, y_ref, C * 9, label("forward", tile));
      const auto y_relu = run([&] {
        kernels::launch_wgmma_weights<PF, T>(stream.s, d_w.ptr, d_wt.ptr);
        kernels::launch_conv_wgmma<PF, T, relu_fn>(stream.s, d_wt.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
      }, d_y);
      std::vector<float> want(y);
      for (float& v : want) v = relu_fn::apply(v);
      t(same_bits(y_relu, want, label("forward with ReLU in the store = ReLU(forward)", tile)));
    };
    auto backward = [&]<class T>(const char* tile) {
      const auto dx = run([&] {
        kernels::launch_wgmma_weights<PD, T>(stream.s, d_w.ptr, d_wt.ptr);
        kernels::launch_conv_wgmma<PD, T>(stream.s, d_wt.ptr, nullptr, d_dy.ptr, d_dx.ptr, batch);
      }, d_dx);
      check(t, dx, dx_ref, Out * 9, label("backward data", tile));
      const auto dx_relu = run([&] {
        kernels::launch_wgmma_weights<PD, T>(stream.s, d_w.ptr, d_wt.ptr);
        kernels::launch_conv_wgmma<PD, T, relu_fn>(stream.s, d_wt.ptr, d_below.ptr, d_dy.ptr, d_dx.ptr, batch);
      }, d_dx);
      std::vector<float> want(dx);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] *= relu_fn::derivative(below[i]);
      t(same_bits(dx_relu, want, label("backward data with ReLU's derivative in the store", tile)));
    };
    forward.template operator()<kernels::ConvWgmmaRule<PF>>("the rule's");
    forward.template operator()<kernels::ConvWgmmaTile<PF, 8, 1, 16>>("8 rows, 1 warpgroup, 16 channels a step");
    if constexpr (H % 16 == 0 && W == 32) forward.template operator()<kernels::ConvWgmmaTile<PF, 16, 2, 8>>("16 rows, 2 warpgroups");
    if constexpr (W == 32) forward.template operator()<kernels::ConvWgmmaTile<PF, 8, 1, 8>>("8 rows, 1 warpgroup");
    const Reference dw_ref = kernels::conv_wgmma_wgrad_fits<G>() ? conv3x3_wgrad_reference(x, dy, batch, C, Out, H, W)
                                                                 : Reference(0);
    std::vector<float> db_ref(Out, 0.f);  // the bias gradient: dy's sums in double
    for (int o = 0; o < Out; ++o) {
      double sum = 0;
      for (int n = 0; n < batch; ++n)
        for (int p = 0; p < plane; ++p) sum += dy[(std::size_t(n) * Out + o) * plane + p];
      db_ref[o] = float(sum);
    }
    auto weights = [&]<class T>(const char* tile) {
      static_assert(T::fits);
      DeviceBuffer<float> d_part(T::Splits::workspace_floats(batch)), d_dw(w.size()), d_db(Out);
      d_part.poison();
      d_db.poison();
      const auto dw = run([&] {
        kernels::launch_conv_wgmma_wgrad<G, T>(stream.s, d_x.ptr, d_dy.ptr, d_part.ptr, d_dw.ptr, d_db.ptr, batch);
      }, d_dw);
      check(t, dw, dw_ref, batch * plane, label("weight gradient", tile), truncated_by_truncated);
      t(close_sum(d_db.download(), db_ref, label("bias gradient", tile)));
      // Bitwise the same on a second run (fixed order of additions).
      const auto again = run([&] {
        kernels::launch_conv_wgmma_wgrad<G, T>(stream.s, d_x.ptr, d_dy.ptr, d_part.ptr, d_dw.ptr, d_db.ptr, batch);
      }, d_dw);
      t(same_bits(again, dw, label("weight gradient, run twice", tile)));
    };
    if constexpr (kernels::conv_wgmma_wgrad_fits<G>()) {
      weights.template operator()<kernels::ConvWgmmaWgradWide<G>>("132 blocks");
      weights.template operator()<kernels::ConvWgmmaWgradHalf<G>>("66 blocks");
      weights.template operator()<kernels::ConvWgmmaWgradTile<G, 32, 40>>("32 pixels a step, 40 blocks");
    }
    backward.template operator()<kernels::ConvWgmmaRule<PD>>("the rule's");
    if constexpr (H % 16 == 0 && W == 16) backward.template operator()<kernels::ConvWgmmaTile<PD, 16, 2, 8>>("16 rows, 2 warpgroups");
  }
}

// The stride-2 forward (ConvWgmmaFwdS2): every tile shape against the reference, ReLU in the store, and
// the tiles with the rule's channels a step the same bits as the rule's (the same products in the same
// order: each output one warpgroup's accumulator, summed over steps, taps and k8 slices in one order).
template <int C, int H, int W, int Out>
void test_layer_s2(Tally& t, const char* name, std::uint64_t seed) {
  using G = kernels::ConvDims<C, H, W, Out, 3, 2, 1, 1>;
  using Pb = kernels::ConvWgmmaFwdS2<G>;
  static_assert(kernels::conv_wgmma_s2_fits<G>() && !kernels::conv_wgmma_fits<G>());
  if (!case_selected(name)) return;
  Stream stream;
  const std::vector<float> w = random_vector(std::size_t(Out) * C * 9, seed), b = random_vector(Out, seed + 1);
  DeviceBuffer<float> d_w(w), d_b(b), d_wt(w.size());
  constexpr int OH = H / 2, OW = W / 2;
  for (const int batch : std::getenv("CTNN_QUICK") ? std::vector<int>{1, 3} : std::vector<int>{1, 3, 13}) {
    const std::size_t nx = std::size_t(batch) * C * H * W, ny = std::size_t(batch) * Out * OH * OW;
    const std::vector<float> x = random_vector(nx, seed + 2 + batch), dy = random_vector(ny, seed + 3 + batch);
    const Reference y_ref = conv3x3_reference(w, b, x, dy, batch, C, Out, H, W, 2).y;
    DeviceBuffer<float> d_x(x), d_y(ny);
    Labeler label(name);
    std::vector<float> rule_y;
    auto forward = [&]<class T>(const char* tile) {
      auto run = [&]<class Fn>(Fn) {
        d_y.poison();
        d_wt.poison();
        kernels::launch_wgmma_weights<Pb, T>(stream.s, d_w.ptr, d_wt.ptr);
        kernels::launch_conv_wgmma<Pb, T, Fn>(stream.s, d_wt.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
        stream.sync();
        return d_y.download();
      };
      const auto y = run(identity_fn{});
      const std::string tile_is = std::string(", tile ") + tile;
      check(t, y, y_ref, C * 9, label(batch, ("stride-2 forward" + tile_is).c_str()));
      if (rule_y.empty()) rule_y = y;
      else if (T::CK == kernels::ConvWgmmaS2Rule<G>::CK) t(same_bits(y, rule_y, label(batch, ("stride-2 forward = the rule's tile's" + tile_is).c_str())));
      std::vector<float> want(y);
      for (float& v : want) v = relu_fn::apply(v);
      t(same_bits(run(relu_fn{}), want, label(batch, ("stride-2 forward with ReLU in the store" + tile_is).c_str())));
    };
    forward.template operator()<kernels::ConvWgmmaS2Rule<G>>("the rule's");
    forward.template operator()<kernels::ConvWgmmaTile<Pb, 8, 1, 16>>("8 rows, 1 warpgroup, 16 channels a step");
    if constexpr (OW == 16) forward.template operator()<kernels::ConvWgmmaTile<Pb, 8, 2, 8>>("8 rows, 2 warpgroups");
    if constexpr (OH % 16 == 0) forward.template operator()<kernels::ConvWgmmaTile<Pb, 16, 2, 8>>("16 rows, 2 warpgroups");
    if constexpr (Out == 128) forward.template operator()<kernels::ConvWgmmaTile<Pb, 8, 1, 8, 64>>("64 of 128 channels a block");
    if constexpr (OH % 16 == 0 && OW == 16) forward.template operator()<kernels::ConvWgmmaTile<Pb, 16, 4, 8>>("16 rows, 4 warpgroups");
  }
}

}  // namespace

int main() {
  require_cuda_device();
  if (!kernels::conv_wgmma_available()) {
    std::printf("this program's device code has no wgmma (needs sm_90a and a Hopper GPU): skipping\n");
    return 77;
  }
  Tally t;
  try {
    test_layer<32, 32, 32, 32>(t, "CIFAR 32->32 at 32x32", 51);
    test_layer<32, 16, 16, 64>(t, "CIFAR 32->64 at 16x16", 52);
    test_layer<64, 16, 16, 64>(t, "CIFAR 64->64 at 16x16", 53);
    test_layer<64, 8, 8, 64>(t, "CIFAR 64->64 at 8x8", 54);
    test_layer_s2<32, 32, 32, 64>(t, "CIFAR 32->64 stride 2 at 32x32", 55);
    test_layer_s2<64, 16, 16, 128>(t, "CIFAR 64->128 stride 2 at 16x16", 56);
    test_layer_s2<16, 64, 64, 32>(t, "16->32 stride 2 at 64x64", 57);
  } catch (const std::exception& e) {
    std::printf("FAIL exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
