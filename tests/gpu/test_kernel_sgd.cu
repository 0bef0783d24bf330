// The fused SGD-momentum kernel (kernels/sgd.cuh) against the host's formula (train/sgd.hpp,
// g += λ·p; v = μ·v + g; p −= lr·v, each operation rounded to float): several steps over a parameter block the
// size of LeNet-5's (vector path), a length that is not a multiple of 4 (tail), buffers offset by one
// float (scalar path), and hyperparameters read from device memory. The results must be bitwise equal.
#include <cstdio>
#include <vector>

#include <ctnn/kernels/sgd.cuh>
#include <ctnn/train/sgd.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

void test_sgd(Tally& t, std::size_t n, int offset, bool device_hyper, std::uint64_t seed, float wd = 0.f) {
  Stream stream;
  std::vector<float> p = random_vector(n, seed), v = random_vector(n, seed + 1, -0.1f, 0.1f);
  DeviceBuffer<float> d_p(n + 1), d_v(n + 1), d_g(n + 1), d_hyper(3);
  CTNN_CUDA_CHECK(cudaMemcpy(d_p.ptr + offset, p.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CTNN_CUDA_CHECK(cudaMemcpy(d_v.ptr + offset, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const float lrs[3] = {0.01f, 0.05f, 0.003f}, mu = 0.9f;
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> g = random_vector(n, seed + 10 + step);
    CTNN_CUDA_CHECK(cudaMemcpy(d_g.ptr + offset, g.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    if (device_hyper) {
      d_hyper.upload({lrs[step], mu, wd});
      // By-value arguments that must be ignored.
      kernels::sgd_momentum(stream.s, d_p.ptr + offset, d_v.ptr + offset, d_g.ptr + offset, n, 123.f, -7.f,
                            d_hyper.ptr, 55.f);
    } else {
      kernels::sgd_momentum(stream.s, d_p.ptr + offset, d_v.ptr + offset, d_g.ptr + offset, n, lrs[step], mu,
                            nullptr, wd);
    }
    sgd_momentum_step(p.data(), g.data(), v.data(), n, lrs[step], mu, wd);
  }
  stream.sync();
  std::vector<float> gp(n), gv(n);
  CTNN_CUDA_CHECK(cudaMemcpy(gp.data(), d_p.ptr + offset, n * sizeof(float), cudaMemcpyDeviceToHost));
  CTNN_CUDA_CHECK(cudaMemcpy(gv.data(), d_v.ptr + offset, n * sizeof(float), cudaMemcpyDeviceToHost));
  char what[128];
  std::snprintf(what, sizeof what, "SGD n=%zu offset %d%s wd %g: params", n, offset, device_hyper ? " device lr" : "", wd);
  t(same_bits(gp, p, what));
  std::snprintf(what, sizeof what, "SGD n=%zu offset %d%s wd %g: velocity", n, offset, device_hyper ? " device lr" : "", wd);
  t(same_bits(gv, v, what));
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_sgd(t, 61'760, 0, false, 61);  // about LeNet-5's padded parameter block
    test_sgd(t, 61'760, 0, true, 62);
    test_sgd(t, 1'001, 0, false, 63);   // n % 4 == 1: vector body and a scalar tail
    test_sgd(t, 1'001, 1, false, 64);   // misaligned: the scalar kernel
    test_sgd(t, 3, 0, true, 65);        // shorter than one vector
    test_sgd(t, 61'760, 0, false, 66, 5e-4f);  // weight decay, by value
    test_sgd(t, 1'001, 1, true, 67, 1e-3f);    // weight decay from device memory, scalar kernel
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
