// Softmax kernels (kernels/softmax.cuh) on fresh random inputs, outputs poisoned first: the layer's
// forward and general backward against the host reference Softmax::bind<In>. The fused softmax +
// cross-entropy of training is tested in test_kernel_loss.cu.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <vector>

#include <ctnn/kernels/softmax.cuh>
#include <ctnn/layers/softmax.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <int N>
void test_layer(Tally& t, std::initializer_list<int> batches, std::uint64_t seed) {
  using B = Softmax::bind<Shape<N>>;
  using Dev = cuda_layer<Softmax, Shape<N>>;
  Stream stream;
  const CudaContext ctx{stream.s, nullptr, nullptr, 0};
  char what[160];
  for (const int batch : batches) {
    const std::size_t n = std::size_t(batch) * N;
    const std::vector<float> x = random_vector(n, seed + batch, -6.f, 6.f), dy = random_vector(n, seed + 1 + batch);
    std::vector<float> y_ref(n), dx_ref(n);
    B::template forward<float>(nullptr, nullptr, x.data(), y_ref.data(), batch);
    B::template backward<float>(nullptr, x.data(), y_ref.data(), dy.data(), dx_ref.data(), nullptr, nullptr, batch);
    DeviceBuffer<float> d_x(x), d_y(n), d_yref(y_ref), d_dy(dy), d_dx(n);
    d_y.poison(), d_dx.poison();
    Dev::forward(ctx, nullptr, nullptr, d_x.ptr, d_y.ptr, batch);
    Dev::backward(ctx, nullptr, d_x.ptr, d_yref.ptr, d_dy.ptr, d_dx.ptr, nullptr, nullptr, batch);
    stream.sync();
    std::snprintf(what, sizeof what, "Softmax N=%d batch %d forward", N, batch);
    t(close(d_y.download(), y_ref, what, 1e-5, 1e-7));
    std::snprintf(what, sizeof what, "Softmax N=%d batch %d backward", N, batch);
    t(close_sum(d_dx.download(), dx_ref, what));
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_layer<10>(t, {1, 37, 256}, 51);
    test_layer<1>(t, {1, 37}, 52);
    test_layer<37>(t, {1, 37, 256}, 53);   // more classes than lanes
    test_layer<100>(t, {1, 37, 64}, 54);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
