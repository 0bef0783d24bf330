// Per-layer throughput of Dense's kernels (kernels/dense.cuh, dense_mma.cuh): for each layer, batch and
// direction (forward, backward data, backward weights with the bias) the layer's rule and every other
// way ctnn has, in FP32 and with Math::tf32; * marks the way the rule takes (per math). One table row
// each:
//   layer  batch  direction  kernel  µs  GFLOP  TFLOP/s  % of peak (FP32 rows: FP32 peak; tf32: TF32's)
// Timing and peaks: kernel_bench.hpp; the calls of a sample run as one CUDA graph (g_graph), as in a
// network's training step, unless the third argument is 0. FLOPs: 2·N·I per sample for each direction.
// Usage: dense_bench [samples] [reps] [graph]   (dense_bench 1 1: one call each, for ncu)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <ctnn/kernels/dense.cuh>
#include <ctnn/layers/dense.hpp>

#include "kernel_bench.hpp"

using namespace ctnn;
using namespace ctnn_bench;

namespace {

struct Handles {
  cudaStream_t s = nullptr;
  cublasHandle_t blas32 = nullptr, blas_tf32 = nullptr;
  Handles() {
    CTNN_CUDA_CHECK(cudaStreamCreate(&s));
    for (cublasHandle_t* h : {&blas32, &blas_tf32}) {
      CTNN_CUBLAS_CHECK(cublasCreate(h));
      CTNN_CUBLAS_CHECK(cublasSetStream(*h, s));
    }
    CTNN_CUBLAS_CHECK(cublasSetMathMode(blas_tf32, CUBLAS_TF32_TENSOR_OP_MATH));
  }
  ~Handles() {
    cublasDestroy(blas32);
    cublasDestroy(blas_tf32);
    cudaStreamDestroy(s);
  }
};

template <int N, int I>
void bench(const char* name, std::initializer_list<int> batches) {
  using Dev = cuda_layer<Dense<N>, Shape<I>>;
  using namespace kernels;
  Handles h;
  const int max_batch = std::max(batches);
  Buf w(std::size_t(N) * I, 1), b(N, 2), x(std::size_t(max_batch) * I, 3), dy(std::size_t(max_batch) * N, 4);
  Buf y(std::size_t(max_batch) * N, 5), dx(std::size_t(max_batch) * I, 6), dw(std::size_t(N) * I, 7), db(N, 8);
  Buf ws(Dev::workspace_floats(max_batch), 9);
  for (const int n : batches) {
    const double flops = 2.0 * N * I * n;
    for (const Math math : {Math::fp32, Math::tf32}) {
      CudaContext ctx{h.s, math == Math::fp32 ? h.blas32 : h.blas_tf32, ws.p, Dev::workspace_floats(max_batch)};
      ctx.math = math;
      const bool tf = math == Math::tf32;
      const double peak = tf ? g_tf32_peak_tflops : g_peak_tflops;
      auto r = [&](const char* dir, const char* kernel, bool chosen, auto&& f) {
        char k[64];
        std::snprintf(k, sizeof k, "%s %s", tf ? "tf32" : "fp32", kernel);
        row(name, n, dir, k, chosen, time_us(h.s, f), flops, peak);
      };
      r("fwd", "rule", true, [&] { Dev::forward(ctx, w.p, b.p, x.p, y.p, n); });
      r("bwd data", "rule", true, [&] { Dev::backward_data(ctx, w.p, dy.p, dx.p, n); });
      r("bwd data", "cuBLAS", !(Dev::on_tensor_cores(math) && dense_mma_dgrad_wins<I>(n)), [&] {
        const float one = 1.f, zero = 0.f;
        CTNN_CUBLAS_CHECK(cublasSgemm(ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, I, n, N, &one, w.p, I, dy.p, N, &zero, dx.p, I));
      });
      r("bwd wts", "rule", true, [&] { Dev::backward_weights(ctx, x.p, dy.p, dw.p, db.p, n); });
      r("bwd wts", "cuBLAS + sum", !Dev::on_tensor_cores(math) && Dev::weights_use_blas(n),
        [&] { Dev::template weights_with<DenseGrad::cublas>(ctx, x.p, dy.p, dw.p, db.p, n); });
      if (Dev::Wg::chunks(n) == 1 || Dev::workspace_floats(max_batch) >= Dev::Wg::workspace_floats(n))
        r("bwd wts", "reduction", !Dev::on_tensor_cores(math) && !Dev::weights_use_blas(n),
          [&] { Dev::template weights_with<DenseGrad::reduction>(ctx, x.p, dy.p, dw.p, db.p, n); });
      if constexpr (dense_mma_fits<N, I>)
        if (tf) {
          // The kernels' tiles and pipeline depths (MmaTile<BM, BN, warps down, warps across, stages>).
          auto dgr = [&](const char* k, auto tile) {
            using T = decltype(tile);
            r("bwd data", k, false, [&] { launch_dense_dgrad_mma<N, I, T>(h.s, w.p, dy.p, dx.p, n); });
          };
          dgr("mma 64x64", DenseMmaWide{});
          dgr("mma 64x64 6 st", MmaTile<64, 64, 2, 2, 6>{});
          dgr("mma 32x64", MmaTile<32, 64, 1, 4>{});
          dgr("mma 32x64 6 st", MmaTile<32, 64, 1, 4, 6>{});
          dgr("mma 32x32", MmaTile<32, 32, 2, 2>{});
          auto wgr = [&](const char* k, auto tile) {
            using T = decltype(tile);
            r("bwd wts", k, false, [&] { launch_dense_wgrad_mma<N, I, T>(h.s, x.p, dy.p, dw.p, db.p, n); });
          };
          wgr("mma 64x128", DenseMmaLarge{});
          wgr("mma 64x128 8 warps", MmaTile<64, 128, 2, 4>{});
          wgr("mma 64x64", DenseMmaWide{});
          wgr("mma 64x64 6 st", MmaTile<64, 64, 2, 2, 6>{});
          wgr("mma 32x64", MmaTile<32, 64, 2, 2>{});
        }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_samples = std::max(1, std::atoi(argv[1]));
  if (argc > 2) g_reps = std::max(1, std::atoi(argv[2]));
  g_graph = argc > 3 ? std::atoi(argv[3]) != 0 : true;
  print_device();
  std::printf("median of %d samples of %d calls (%s); * = the kernel the rule picks (per math)\n", g_samples, g_reps,
              g_graph ? "one CUDA graph a sample" : "launched one by one");
  std::printf("%-26s %5s  %-8s %-22s %c %9s %8s %8s %7s\n", "layer", "batch", "dir", "kernel", ' ', "us", "GFLOP",
              "TFLOP/s", "peak");
  bench<256, 4096>("cifar vgg head 4096->256", {64, 256});
  bench<512, 1024>("1024->512", {64, 256});
  bench<120, 400>("lenet fc1 400->120", {64, 256});
  return 0;
}
