// Pooling kernels (kernels/pool.cuh) against the host reference Pooling::bind<In>::forward/backward on
// fresh random inputs, outputs poisoned first. Max pooling and both backward passes must equal the
// host bit for bit (selection, and float additions in the host's order); the average forward is a
// float sum against the host's double sum. Some inputs are quantised to steps of 1/4, so windows hold
// ties and the first-maximum rule is exercised.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <vector>

#include <ctnn/kernels/pool.cuh>
#include <ctnn/layers/pool.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <class L, class In>
void test_pool(Tally& t, const char* name, std::initializer_list<int> batches, std::uint64_t seed,
               bool ties) {
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  std::printf("== %s: %dx%dx%d -> %dx%dx%d, backward %s%s\n", name, B::C, B::H, B::W, B::C, B::OH, B::OW,
              Dev::dims::tiled ? "per window" : "gather", ties ? " (quantised input: ties)" : "");
  Stream stream;
  const CudaContext ctx{stream.s, nullptr, nullptr, 0};
  char what[160];
  auto label = [&](int batch, const char* q) {
    std::snprintf(what, sizeof what, "%s batch %d %s", name, batch, q);
    return what;
  };
  for (const int batch : batches) {
    const std::size_t nx = std::size_t(batch) * B::in_size, ny = std::size_t(batch) * B::out_size;
    std::vector<float> x = random_vector(nx, seed + batch);
    if (ties)
      for (float& v : x) v = std::round(v * 4.f) / 4.f;
    const std::vector<float> dy = random_vector(ny, seed + 1 + 3 * batch);
    std::vector<float> y_ref(ny), dx_ref(nx);
    B::template forward<float>(nullptr, nullptr, x.data(), y_ref.data(), batch);
    B::template backward<float>(nullptr, x.data(), y_ref.data(), dy.data(), dx_ref.data(), nullptr, nullptr,
                                batch);

    DeviceBuffer<float> d_x(x), d_dy(dy), d_y(ny), d_dx(nx);
    d_y.poison();
    Dev::forward(ctx, nullptr, nullptr, d_x.ptr, d_y.ptr, batch);
    stream.sync();
    if constexpr (L::kind == PoolKind::max) t(same_bits(d_y.download(), y_ref, label(batch, "forward")));
    else t(close_sum(d_y.download(), y_ref, label(batch, "forward"), 1e-5));

    d_dx.poison();
    Dev::backward(ctx, nullptr, d_x.ptr, d_y.ptr, d_dy.ptr, d_dx.ptr, nullptr, nullptr, batch);
    stream.sync();
    t(same_bits(d_dx.download(), dx_ref, label(batch, "backward dx")));

    // The backward of an activation below the pooling folded into this one (x standing for its output):
    // dx · Fn'(x) to the bit, as that activation's own kernel computes it.
    auto folded = [&]<class Fn>(Fn) {
      std::vector<float> want(dx_ref);
      for (std::size_t k = 0; k < nx; ++k) want[k] = want[k] * Fn::derivative(x[k]);
      d_dx.poison();
      const bool ran = Dev::template backward_data_act<Fn>(ctx, nullptr, d_x.ptr, d_dy.ptr, d_dx.ptr, batch);
      stream.sync();
      t(ran);
      char q[80];
      std::snprintf(q, sizeof q, "backward dx with %s's backward folded in", Fn::name);
      t(same_bits(d_dx.download(), want, label(batch, q)));
    };
    folded(relu_fn{});
    folded(sigmoid_fn{});

    // Where two windows a thread run (2 × 2 tiled, W % 4 == 0): the one-window kernels give the same bits.
    if constexpr (kernels::pool_pairs<typename Dev::dims>) {
      using G = typename Dev::dims;
      constexpr int T = kernels::pool_threads;
      Dev::forward(ctx, nullptr, nullptr, d_x.ptr, d_y.ptr, batch);
      stream.sync();
      const std::vector<float> y_pairs = d_y.download();
      d_y.poison();
      kernels::kernel_pool_forward<L::kind, G><<<kernels::grid_for(ny, T), T, 0, stream.s>>>(d_x.ptr, d_y.ptr, ny);
      stream.sync();
      t(same_bits(d_y.download(), y_pairs, label(batch, "forward, two windows a thread = one")));
      Dev::template backward_data_act<relu_fn>(ctx, nullptr, d_x.ptr, d_dy.ptr, d_dx.ptr, batch);
      stream.sync();
      const std::vector<float> dx_pairs = d_dx.download();
      d_dx.poison();
      kernels::kernel_pool_backward_tiled<L::kind, G, relu_fn>
          <<<kernels::grid_for(ny, T), T, 0, stream.s>>>(d_x.ptr, d_dy.ptr, d_dx.ptr, ny);
      stream.sync();
      t(same_bits(d_dx.download(), dx_pairs, label(batch, "backward with ReLU's, two windows a thread = one")));
    }
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    // LeNet-5's two poolings.
    test_pool<Pool<2>, Shape<6, 28, 28>>(t, "LeNet-5 pool1", {1, 37, 256}, 21, false);
    test_pool<Pool<2>, Shape<16, 10, 10>>(t, "LeNet-5 pool2", {1, 37, 256}, 22, true);
    // Stride != K, padding, odd non-square input.
    test_pool<Pool<3, Stride<2>, Pad<1>>, Shape<3, 11, 9>>(t, "max 3 stride 2 pad 1", {1, 37, 64}, 23, true);
    test_pool<AvgPool<3, Stride<2>, Pad<1>>, Shape<3, 11, 9>>(t, "avg 3 stride 2 pad 1", {1, 37, 64}, 24, false);
    test_pool<AvgPool<2>, Shape<6, 28, 28>>(t, "avg 2", {1, 37, 256}, 25, false);
    // Overlapping windows: an input element receives gradient from up to nine windows.
    test_pool<Pool<3, Stride<1>>, Shape<2, 9, 12>>(t, "max 3 stride 1", {1, 37, 64}, 26, true);
    test_pool<AvgPool<4, Stride<3>, Pad<2>>, Shape<5, 13, 10>>(t, "avg 4 stride 3 pad 2", {1, 37, 64}, 27, false);
    // Stride K without padding on sizes K does not divide: the last row and column are in no window
    // (gradient 0), so the per-window kernel does not apply.
    test_pool<Pool<2>, Shape<3, 9, 11>>(t, "max 2 on odd sizes", {1, 37, 64}, 28, true);
    test_pool<AvgPool<3>, Shape<2, 12, 9>>(t, "avg 3 per window", {1, 37, 64}, 29, false);
    // The CIFAR network's pools (two windows a thread: 2 × 2 on rows of 32 and 16).
    test_pool<Pool<2>, Shape<32, 32, 32>>(t, "CIFAR max 2 at 32x32", {1, 37, 64}, 30, true);
    test_pool<AvgPool<2>, Shape<8, 16, 16>>(t, "avg 2 at 16x16", {1, 37}, 31, false);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
