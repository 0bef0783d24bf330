// The TF32 math option (CudaContext::math, CudaNetwork::set_math, Trainer::set_math) on fresh random
// inputs, outputs poisoned first: with Math::tf32 a Dense layer's forward through cuBLAS matches the
// host reference in double within the bound TF32 allows, and LeNet-5 trained for two epochs on
// learnable synthetic digits with TF32 ends within a point of the FP32 run.
//
// The bound: TF32 keeps 10 of FP32's 23 mantissa bits, so each input is rounded with relative error
// <= 2^-11, each product x·w with <= 2·2^-11 + 2^-22, and the FP32 sum of K products adds at most
// K·2^-24 of Σ|x·w|. Per output: |y − y_ref| <= (2^-10 + 2^-21 + K·2^-24)·Σ_k |x_k·w_k| + 2^-24·|b|.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/cuda_trainer.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <int N, int K>
void test_dense_tf32(Tally& t, int batch, std::uint64_t seed) {
  using L = Dense<N>;
  using In = Shape<K>;
  using Dev = cuda_layer<L, In>;
  Stream stream;
  cublasHandle_t blas = nullptr;
  CTNN_CUBLAS_CHECK(cublasCreate(&blas));
  CTNN_CUBLAS_CHECK(cublasSetStream(blas, stream.s));
  CTNN_CUBLAS_CHECK(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH));
  DeviceBuffer<float> ws(Dev::workspace_floats(batch));
  CudaContext ctx{stream.s, blas, ws.ptr, ws.n};
  ctx.math = Math::tf32;
  const std::vector<float> w = random_vector(std::size_t(N) * K, seed), b = random_vector(N, seed + 1);
  const std::vector<float> x = random_vector(std::size_t(batch) * K, seed + 2);
  DeviceBuffer<float> d_w(w), d_b(b), d_x(x), d_y(std::size_t(batch) * N);
  d_y.poison();
  Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
  stream.sync();
  const std::vector<float> y = d_y.download();
  const double unit = std::ldexp(1.0, -10) + std::ldexp(1.0, -21) + K * std::ldexp(1.0, -24);
  double worst = 0, worst_fp32 = 0;  // error / bound, and error / the FP32-only bound
  bool finite = true;
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < N; ++o) {
      double ref = b[o], mag = 0;
      for (int k = 0; k < K; ++k) {
        const double p = double(x[std::size_t(n) * K + k]) * double(w[std::size_t(o) * K + k]);
        ref += p;
        mag += std::fabs(p);
      }
      const double err = std::fabs(double(y[std::size_t(n) * N + o]) - ref);
      finite = finite && std::isfinite(y[std::size_t(n) * N + o]);
      worst = std::max(worst, err / (unit * mag + std::ldexp(std::fabs(double(b[o])), -24) + 1e-30));
      worst_fp32 = std::max(worst_fp32, err / (K * std::ldexp(1.0, -24) * mag + 1e-30));
    }
  const bool ok = finite && worst <= 1.0;
  std::printf("%s Dense %d->%d batch %d TF32: max error %.3f of the TF32 bound (%.1f of the FP32-only bound: %s)\n",
              ok ? "ok  " : "FAIL", K, N, batch, worst, worst_fp32,
              worst_fp32 > 1 ? "tensor cores engaged" : "cuBLAS chose an FP32 path");
  t(ok);
  cublasDestroy(blas);
}

// Digits-like synthetic data a small network learns: class c lights up band c of the image.
Dataset bands(std::size_t count, std::uint64_t seed) {
  Dataset d;
  d.count = count, d.rows = 28, d.cols = 28;
  Random rng(seed);
  for (std::size_t i = 0; i < count; ++i) {
    const int label = int(rng.below(10));
    for (int r = 0; r < 28; ++r)
      for (int c = 0; c < 28; ++c) {
        const bool lit = c / 3 == label || (r + c) % 9 == label;
        d.pixels.push_back(std::uint8_t(lit ? 150 + rng.below(100) : rng.below(80)));
      }
    d.labels.push_back(std::uint8_t(label));
  }
  return d;
}

void test_training_tf32(Tally& t) {
  const Dataset train = bands(4096, 1), test = bands(1024, 2);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 64;
  o.learning_rate = 0.02f;
  double accuracy[2] = {};
  for (int m = 0; m < 2; ++m) {
    Trainer<models::LeNet5, ctnn::cuda, 64> trainer(3);
    trainer.set_math(m == 0 ? Math::fp32 : Math::tf32);
    trainer.fit(train, o);
    accuracy[m] = trainer.evaluate(test).accuracy;
  }
  const bool ok = accuracy[0] > 0.9 && std::fabs(accuracy[0] - accuracy[1]) <= 0.01;
  std::printf("%s LeNet-5, 2 epochs on synthetic bands: FP32 %.2f%%, TF32 %.2f%%\n", ok ? "ok  " : "FAIL",
              100 * accuracy[0], 100 * accuracy[1]);
  t(ok);
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_dense_tf32<120, 400>(t, 256, 11);
    test_dense_tf32<84, 120>(t, 37, 12);
    test_dense_tf32<10, 84>(t, 1, 13);
    test_dense_tf32<512, 1024>(t, 512, 14);
    test_training_tf32(t);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
