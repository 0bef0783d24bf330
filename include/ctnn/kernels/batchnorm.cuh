#pragma once
// BatchNorm on the device. Training forward and backward: one block per channel, which reduces the
// channel's M = batch·H·W values itself (thread t takes values t, t + 256, ... in order, in double;
// then a shared-memory tree in a fixed order): no atomics, bitwise reproducible, and in double as the
// host reference. The same block then writes the channel's outputs (or input gradients), its saved
// μ_B and 1/σ_B, its running statistics, and (block 0) num_batches_tracked. Evaluation forward: one
// thread per element with the running statistics.
#include <cstddef>
#include <cstdint>

#include "../core/cuda_context.hpp"
#include "../layers/batchnorm.hpp"
#include "launch.cuh"

namespace ctnn {
namespace kernels {

inline constexpr int batchnorm_threads = 256;

// Sum of v over the block, in a fixed order; every thread gets the result.
__device__ __forceinline__ double batchnorm_block_sum(double v, double* shared /* [batchnorm_threads] */) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int stride = batchnorm_threads / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the next sum
  return total;
}

template <int C, int S>
__global__ void __launch_bounds__(batchnorm_threads)
kernel_batchnorm_forward_train(const float* __restrict__ x,  // [batch][C][S]
                               float* __restrict__ y,        // [batch][C][S]
                               const float* __restrict__ w,  // [C]
                               const float* __restrict__ b,  // [C]
                               float* __restrict__ state,    // running_mean [C], running_var [C], count [1]
                               float* __restrict__ saved,    // μ_B [C], 1/σ_B [C]
                               int batch)
{
  // Preconditions
  static_assert(C >= 1 && S >= 1, "a channel has values");
  static_assert((batchnorm_threads & (batchnorm_threads - 1)) == 0, "the tree needs a power of two");
  __shared__ double shared[batchnorm_threads];
  const int c = int(blockIdx.x);
  const int M = batch * S;
  auto at = [&](int j) { return (std::size_t(j / S) * C + std::size_t(c)) * S + std::size_t(j % S); };

  double sum = 0;
  for (int j = int(threadIdx.x); j < M; j += batchnorm_threads) sum += double(x[at(j)]);
  const double mean = batchnorm_block_sum(sum, shared) / double(M);
  double sq = 0;
  for (int j = int(threadIdx.x); j < M; j += batchnorm_threads) {
    const double d = double(x[at(j)]) - mean;
    sq += d * d;
  }
  const double var = batchnorm_block_sum(sq, shared) / double(M);
  const double inv = 1.0 / sqrt(var + BatchNorm::eps);
  const double wc = double(w[c]), bc = double(b[c]);
  for (int j = int(threadIdx.x); j < M; j += batchnorm_threads)
    y[at(j)] = float((double(x[at(j)]) - mean) * inv * wc + bc);
  if (threadIdx.x == 0) {
    constexpr double m = BatchNorm::momentum;
    saved[c] = float(mean);
    saved[C + c] = float(inv);
    state[c] = float((1 - m) * double(state[c]) + m * mean);
    state[C + c] = float((1 - m) * double(state[C + c]) + m * var * double(M) / double(M - 1));
    if (c == 0) state[2 * C] += 1.f;
  }
}

template <int C, int S>
__global__ void __launch_bounds__(batchnorm_threads)
kernel_batchnorm_forward_eval(const float* __restrict__ x,      // [batch][C][S]
                              float* __restrict__ y,            // [batch][C][S]
                              const float* __restrict__ w,      // [C]
                              const float* __restrict__ b,      // [C]
                              const float* __restrict__ state,  // running_mean [C], running_var [C]
                              std::size_t n)                    // batch·C·S
{
  const std::size_t i = std::size_t(blockIdx.x) * batchnorm_threads + threadIdx.x;
  if (i >= n) return;
  const int c = int(i / S % C);
  const double inv = 1.0 / sqrt(double(state[C + c]) + BatchNorm::eps);
  y[i] = float((double(x[i]) - double(state[c])) * inv * double(w[c]) + double(b[c]));
}

template <int C, int S>
__global__ void __launch_bounds__(batchnorm_threads)
kernel_batchnorm_backward(const float* __restrict__ x,      // [batch][C][S]
                          const float* __restrict__ dy,     // [batch][C][S]
                          const float* __restrict__ w,      // [C]
                          const float* __restrict__ saved,  // μ_B [C], 1/σ_B [C]
                          float* __restrict__ dx,           // [batch][C][S], or null
                          float* __restrict__ dw,           // [C]
                          float* __restrict__ db,           // [C]
                          int batch)
{
  __shared__ double shared[batchnorm_threads];
  const int c = int(blockIdx.x);
  const int M = batch * S;
  auto at = [&](int j) { return (std::size_t(j / S) * C + std::size_t(c)) * S + std::size_t(j % S); };
  const double mean = double(saved[c]), inv = double(saved[C + c]);
  double s_dy = 0, s_dy_xhat = 0;
  for (int j = int(threadIdx.x); j < M; j += batchnorm_threads) {
    const double g = double(dy[at(j)]);
    s_dy += g;
    s_dy_xhat += g * (double(x[at(j)]) - mean) * inv;
  }
  const double sum_dy = batchnorm_block_sum(s_dy, shared);
  const double sum_dy_xhat = batchnorm_block_sum(s_dy_xhat, shared);
  if (threadIdx.x == 0) {
    if (dw) dw[c] = float(sum_dy_xhat);
    if (db) db[c] = float(sum_dy);
  }
  if (!dx) return;
  const double k = double(w[c]) * inv / double(M);
  for (int j = int(threadIdx.x); j < M; j += batchnorm_threads) {
    const double xhat = (double(x[at(j)]) - mean) * inv;
    dx[at(j)] = float(k * (double(M) * double(dy[at(j)]) - sum_dy - xhat * sum_dy_xhat));
  }
}

}  // namespace kernels

template <class In>
struct cuda_layer<BatchNorm, In> {
  using B = BatchNorm::bind<In>;
  static constexpr int C = B::C, S = B::S;
  static constexpr std::size_t workspace_floats(int) { return 0; }

  static void forward(const CudaContext& ctx, const ForwardArgs<float>& a) {
    kernels::check_batch(a.batch, "BatchNorm");
    if (a.mode == Mode::eval) {
      const std::size_t n = std::size_t(a.batch) * B::in_size;
      kernels::kernel_batchnorm_forward_eval<C, S>
          <<<kernels::grid_for(n, kernels::batchnorm_threads), kernels::batchnorm_threads, 0, ctx.stream>>>(
              a.x, a.y, a.w, a.b, a.state, n);
    } else {
      B::check_training_batch(a.batch);
      kernels::kernel_batchnorm_forward_train<C, S><<<C, kernels::batchnorm_threads, 0, ctx.stream>>>(
          a.x, a.y, a.w, a.b, a.state, a.saved, a.batch);
    }
    CTNN_CHECK_LAUNCH();
  }
  static void backward(const CudaContext& ctx, const BackwardArgs<float>& a) {
    kernels::check_batch(a.batch, "BatchNorm");
    kernels::kernel_batchnorm_backward<C, S><<<C, kernels::batchnorm_threads, 0, ctx.stream>>>(
        a.x, a.dy, a.w, a.saved, a.dx, a.dw, a.db, a.batch);
    CTNN_CHECK_LAUNCH();
  }
};

}  // namespace ctnn
