// The TF32 math option (CudaContext::math, CudaNetwork::set_math, Trainer::set_math) on fresh random
// inputs, outputs poisoned first: with Math::tf32 a Dense layer's forward through cuBLAS matches the
// host reference in double within the bound TF32 allows; a large layer's backward kernels on the tensor
// cores (kernels/dense_mma.cuh) pass the TF32 checks of tf32_check.hpp; and LeNet-5 trained for two
// epochs on learnable synthetic digits with TF32 ends within a point of the FP32 run.
//
// The bound: TF32 keeps 10 of FP32's 23 mantissa bits, so each input is rounded with relative error
// <= 2^-11, each product x·w with <= 2·2^-11 + 2^-22, and the FP32 sum of K products adds at most
// K·2^-24 of Σ|x·w|. Per output: |y − y_ref| <= (2^-10 + 2^-21 + K·2^-24)·Σ_k |x_k·w_k| + 2^-24·|b|.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <type_traits>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/cuda_trainer.hpp>

#include "kernel_test.hpp"
#include "tf32_check.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

// A stream, a cuBLAS handle bound to it in TF32 tensor-op math, and a context on them with Math::tf32
// and `workspace` floats of scratch.
struct Tf32Setup {
  Stream stream;
  cublasHandle_t blas = nullptr;
  DeviceBuffer<float> ws;
  CudaContext ctx;
  explicit Tf32Setup(std::size_t workspace) : ws(workspace) {
    CTNN_CUBLAS_CHECK(cublasCreate(&blas));
    CTNN_CUBLAS_CHECK(cublasSetStream(blas, stream.s));
    CTNN_CUBLAS_CHECK(cublasSetMathMode(blas, CUBLAS_TF32_TENSOR_OP_MATH));
    ctx = CudaContext{stream.s, blas, ws.ptr, ws.n};
    ctx.math = Math::tf32;
  }
  ~Tf32Setup() { cublasDestroy(blas); }
  Tf32Setup(const Tf32Setup&) = delete;
  Tf32Setup& operator=(const Tf32Setup&) = delete;
};

template <int N, int K>
void test_dense_tf32(Tally& t, int batch, std::uint64_t seed) {
  using L = Dense<N>;
  using In = Shape<K>;
  using Dev = cuda_layer<L, In>;
  Tf32Setup setup(Dev::workspace_floats(batch));
  const Stream& stream = setup.stream;
  const CudaContext& ctx = setup.ctx;
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
}

// Dense's backward with Math::tf32 on a large layer (kernels/dense_mma.cuh): the weight-gradient kernel
// (the layer's rule) and the data-gradient kernel (the rule's where dense_mma_dgrad_wins, else cuBLAS)
// checked by check_tf32 (tf32_check.hpp), db (FP32 sums of dy) by close_sum; the layer's dx the same
// bits as whichever way its rule names; two runs the same bits; other tiles the same bits; unaligned
// arrays declined by the kernels and run by the FP32 rule's way (the same bits as with Math::fp32 on
// the same handle).
template <int N, int K>
void test_dense_mma_tf32(Tally& t, int batch, std::uint64_t seed) {
  using Dev = cuda_layer<Dense<N>, Shape<K>>;
  using namespace kernels;
  static_assert(Dev::mma_fits, "a layer the tensor-core kernels take");
  Tf32Setup setup(Dev::workspace_floats(batch));
  const Stream& stream = setup.stream;
  const CudaContext& ctx = setup.ctx;
  CudaContext fp32 = ctx;  // the FP32 rule's way, on the same (TF32) handle
  fp32.math = Math::fp32;
  const std::vector<float> w = random_vector(std::size_t(N) * K, seed), x = random_vector(std::size_t(batch) * K, seed + 1);
  const std::vector<float> dy = random_vector(std::size_t(batch) * N, seed + 2);
  DeviceBuffer<float> d_w(w), d_x(x), d_dy(dy), d_dw(w.size()), d_db(N), d_dx(x.size());
  auto run = [&](auto&& launch) {
    d_dw.poison(), d_db.poison(), d_dx.poison();
    launch();
    stream.sync();
    return std::array<std::vector<float>, 3>{d_dw.download(), d_db.download(), d_dx.download()};
  };
  auto layer = [&](const CudaContext& c, const float* in, float* dx) {
    return run([&] { Dev::backward(c, d_w.ptr, in, nullptr, d_dy.ptr, dx, d_dw.ptr, d_db.ptr, batch); });
  };
  const auto got = layer(ctx, d_x.ptr, d_dx.ptr);
  const auto kernel_dx = run([&] { launch_dense_dgrad_mma<N, K>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); })[2];

  RoundedReference dw_ref(w.size()), dx_ref(x.size());
  std::vector<double> db_ref(N);
  for (int s = 0; s < batch; ++s)
    for (int n = 0; n < N; ++n) {
      const float g = dy[std::size_t(s) * N + n];
      db_ref[n] += g;
      for (int k = 0; k < K; ++k) {
        dw_ref.add(std::size_t(n) * K + k, g, x[std::size_t(s) * K + k]);
        dx_ref.add(std::size_t(s) * K + k, g, w[std::size_t(n) * K + k]);
      }
    }
  char name[64];
  std::snprintf(name, sizeof name, "Dense %d->%d TF32", K, N);
  Labeler labeler(name);
  auto label = [&](const char* part) { return labeler(batch, part); };
  check_tf32(t, got[0], dw_ref, label("dW"));
  t(close_sum(got[1], to_float(db_ref), label("db")));
  check_tf32(t, kernel_dx, dx_ref, label("dx, the data-gradient kernel"));
  const bool dgrad_kernel = dense_mma_dgrad_wins<K>(batch);
  const std::vector<float> blas_dx = layer(fp32, d_x.ptr, d_dx.ptr)[2];
  t(same_bits(got[2], dgrad_kernel ? kernel_dx : blas_dx,
              label(dgrad_kernel ? "dx: the rule's way (the kernel)" : "dx: the rule's way (cuBLAS)")));

  const auto again = layer(ctx, d_x.ptr, d_dx.ptr);
  t(same_bits(again[0], got[0], label("dW, a second run")) && same_bits(again[2], got[2], label("dx, a second run")));
  const auto tiles = run([&] {
    launch_dense_wgrad_mma<N, K, MmaTile<32, 64, 2, 2>>(stream.s, d_x.ptr, d_dy.ptr, d_dw.ptr, d_db.ptr, batch);
    launch_dense_dgrad_mma<N, K, MmaTile<32, 64, 1, 4>>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch);
  });
  t(same_bits(tiles[0], got[0], label("dW, tile 32 x 64")) && same_bits(tiles[1], got[1], label("db, tile 32 x 64")));
  t(same_bits(tiles[2], kernel_dx, label("dx, tile 32 x 64")));
  using OtherWgrad = std::conditional_t<std::is_same_v<DenseMmaWgradTile<N, K>, DenseMmaLarge>, DenseMmaWide, DenseMmaLarge>;
  const auto other = run([&] {
    launch_dense_wgrad_mma<N, K, OtherWgrad>(stream.s, d_x.ptr, d_dy.ptr, d_dw.ptr, d_db.ptr, batch);
    launch_dense_dgrad_mma<N, K, MmaTile<32, 32, 2, 2, 6>>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch);
  });
  t(same_bits(other[0], got[0], label("dW, the other rule tile")) && same_bits(other[1], got[1], label("db, the other rule tile")));
  t(same_bits(other[2], kernel_dx, label("dx, tile 32 x 32, 6 stages")));

  // Unaligned: x one float into a buffer (dW's kernel declines), dx likewise (dx's kernel declines).
  DeviceBuffer<float> d_x1(x.size() + 1), d_dx1(x.size() + 1);
  CTNN_CUDA_CHECK(cudaMemcpy(d_x1.ptr + 1, d_x.ptr, x.size() * sizeof(float), cudaMemcpyDeviceToDevice));
  const auto declined = layer(ctx, d_x1.ptr + 1, d_dx1.ptr + 1), rule = layer(fp32, d_x1.ptr + 1, d_dx1.ptr + 1);
  t(same_bits(declined[0], rule[0], label("dW, unaligned x: the FP32 rule's way")) &&
    same_bits(declined[1], rule[1], label("db, unaligned x: the FP32 rule's way")) &&
    same_bits(declined[2], rule[2], label("dx, unaligned dx: the FP32 rule's way")));
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
    // (CTNN_ONLY=<text>, kernel_test.hpp: only the cases whose name contains it, for compute-sanitizer.)
    if (case_selected("dense forward")) {
      test_dense_tf32<120, 400>(t, 256, 11);
      test_dense_tf32<84, 120>(t, 37, 12);
      test_dense_tf32<10, 84>(t, 1, 13);
      test_dense_tf32<512, 1024>(t, 512, 14);
    }
    if (case_selected("dense backward")) {
      test_dense_mma_tf32<256, 4096>(t, 64, 21);   // the data gradient on cuBLAS
      test_dense_mma_tf32<256, 4096>(t, 256, 25);  // on the kernel
      test_dense_mma_tf32<256, 4096>(t, 5, 22);
      test_dense_mma_tf32<512, 1024>(t, 512, 23);
      test_dense_mma_tf32<100, 2700>(t, 37, 24);
    }
    if (case_selected("training")) test_training_tf32(t);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
