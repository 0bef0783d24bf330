// Activation kernels (kernels/activation.cuh) against the host reference Activation::bind<In> on fresh
// random inputs, outputs poisoned first: sizes that are and are not multiples of 4 (vector body and
// scalar tail) and buffers offset by one float (the scalar kernel). Backward is given the host's y,
// so it is checked on its own. ReLU and every backward must match the host bit for bit; sigmoid
// and tanh go through the device's expf/tanhf (within 2 ulp of the host's).
#include <cstdio>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include <ctnn/kernels/activation.cuh>
#include <ctnn/layers/activation.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <class L, class In>
void test_activation(Tally& t, const char* name, std::initializer_list<int> batches, std::uint64_t seed) {
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  Stream stream;
  const CudaContext ctx{stream.s, nullptr, nullptr, 0};
  char what[160];
  for (const int batch : batches) {
    const std::size_t n = std::size_t(batch) * B::in_size;
    const std::vector<float> x = random_vector(n, seed + batch, -4.f, 4.f), dy = random_vector(n, seed + 1 + batch);
    std::vector<float> y_ref(n), dx_ref(n);
    B::template forward<float>(nullptr, nullptr, x.data(), y_ref.data(), batch);
    B::template backward<float>(nullptr, x.data(), y_ref.data(), dy.data(), dx_ref.data(), nullptr, nullptr, batch);

    // offset 0: 16-byte aligned (vector kernel); offset 1: misaligned (scalar kernel).
    for (const int offset : {0, 1}) {
      DeviceBuffer<float> d_x(n + 1), d_y(n + 1), d_yref(n + 1), d_dy(n + 1), d_dx(n + 1);
      CTNN_CUDA_CHECK(cudaMemcpy(d_x.ptr + offset, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      CTNN_CUDA_CHECK(cudaMemcpy(d_yref.ptr + offset, y_ref.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      CTNN_CUDA_CHECK(cudaMemcpy(d_dy.ptr + offset, dy.data(), n * sizeof(float), cudaMemcpyHostToDevice));
      d_y.poison(), d_dx.poison();
      Dev::forward(ctx, nullptr, nullptr, d_x.ptr + offset, d_y.ptr + offset, batch);
      Dev::backward(ctx, nullptr, d_x.ptr + offset, d_yref.ptr + offset, d_dy.ptr + offset, d_dx.ptr + offset,
                    nullptr, nullptr, batch);
      stream.sync();
      std::vector<float> y(n), dx(n);
      CTNN_CUDA_CHECK(cudaMemcpy(y.data(), d_y.ptr + offset, n * sizeof(float), cudaMemcpyDeviceToHost));
      CTNN_CUDA_CHECK(cudaMemcpy(dx.data(), d_dx.ptr + offset, n * sizeof(float), cudaMemcpyDeviceToHost));
      // Nothing outside [offset, offset + n) written: the guard floats keep their poison.
      float guard = 0;
      CTNN_CUDA_CHECK(cudaMemcpy(&guard, d_y.ptr + (offset ? 0 : n), sizeof(float), cudaMemcpyDeviceToHost));
      std::snprintf(what, sizeof what, "%s %zu/sample batch %d offset %d forward", name, B::in_size, batch, offset);
      if constexpr (std::is_same_v<L, ReLU>) t(same_bits(y, y_ref, what));
      else t(close(y, y_ref, what, 1e-5, 1e-7));
      std::snprintf(what, sizeof what, "%s %zu/sample batch %d offset %d backward", name, B::in_size, batch, offset);
      t(same_bits(dx, dx_ref, what));
      if (!t(guard != guard)) std::printf("FAIL %s: wrote past the end of its range\n", name);
    }
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_activation<ReLU, Shape<6, 28, 28>>(t, "ReLU", {1, 37, 256}, 31);
    test_activation<ReLU, Shape<7>>(t, "ReLU", {1, 37, 256}, 32);
    test_activation<ReLU, Shape<120>>(t, "ReLU", {1, 37, 256}, 33);
    test_activation<Sigmoid, Shape<6, 28, 28>>(t, "Sigmoid", {1, 37, 256}, 34);
    test_activation<Sigmoid, Shape<7>>(t, "Sigmoid", {1, 37, 256}, 35);
    test_activation<Tanh, Shape<16, 5, 5>>(t, "Tanh", {1, 37, 256}, 36);
    test_activation<Tanh, Shape<7>>(t, "Tanh", {1, 37, 256}, 37);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
