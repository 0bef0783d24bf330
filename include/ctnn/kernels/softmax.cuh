#pragma once
// Softmax on the device, one warp per sample (lanes stride over the N classes): the forward pass used
// for inference and the general backward dx = y ⊙ (dy − ⟨dy, y⟩). Training with softmax cross-entropy
// fuses the Softmax into the loss (kernels/loss.cuh). Warp reductions are xor butterflies: fixed order, same bits in every lane.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "../core/cuda_context.hpp"
#include "../layers/softmax.hpp"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn {
namespace kernels {

inline constexpr int softmax_warps = 8;  // samples per block
inline constexpr int softmax_threads = 32 * softmax_warps;

// One sample's softmax, ys [N] from xs [N], computed by one warp (every lane calls it).
template <int N>
__device__ void softmax_row(const float* xs, float* ys, int lane) {
  float top = -INFINITY;
  for (int i = lane; i < N; i += 32) top = fmaxf(top, xs[i]);
  top = warp_max(top);
  float sum = 0.f;
  for (int i = lane; i < N; i += 32) sum += expf(xs[i] - top);
  sum = warp_sum(sum);
  for (int i = lane; i < N; i += 32) ys[i] = expf(xs[i] - top) / sum;
}

template <int N>
__global__ void __launch_bounds__(softmax_threads)
kernel_softmax_forward(const float* __restrict__ x,  // [batch][N]
                       float* __restrict__ y,        // [batch][N]
                       int batch)
{
  // Preconditions
  static_assert(N > 0, "at least one class");
  const int s = blockIdx.x * softmax_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (s >= batch) return;  // uniform per warp, so the shuffles below see full warps
  softmax_row<N>(x + std::size_t(s) * N, y + std::size_t(s) * N, lane);
}

template <int N>
__global__ void __launch_bounds__(softmax_threads)
kernel_softmax_backward(const float* __restrict__ y,   // [batch][N]
                        const float* __restrict__ dy,  // [batch][N]
                        float* __restrict__ dx,        // [batch][N]
                        int batch)
{
  // Preconditions
  static_assert(N > 0, "at least one class");
  const int s = blockIdx.x * softmax_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (s >= batch) return;
  const std::size_t o = std::size_t(s) * N;
  float dot = 0.f;
  for (int i = lane; i < N; i += 32) dot = fmaf(dy[o + i], y[o + i], dot);
  dot = warp_sum(dot);
  for (int i = lane; i < N; i += 32) dx[o + i] = y[o + i] * (dy[o + i] - dot);
}

}  // namespace kernels

template <class In>
struct cuda_layer<Softmax, In> {
  static constexpr int N = int(In::size);
  static constexpr std::size_t workspace_floats(int) { return 0; }

  static void forward(const CudaContext& ctx, const float*, const float*, const float* x, float* y,
                      int batch) {
    kernels::check_batch(batch, "Softmax forward");
    kernels::kernel_softmax_forward<N><<<kernels::grid_for(std::size_t(batch), kernels::softmax_warps),
                                         kernels::softmax_threads, 0, ctx.stream>>>(x, y, batch);
    CTNN_CHECK_LAUNCH();
  }

  static void backward(const CudaContext& ctx, const float*, const float*, const float* y,
                       const float* dy, float* dx, float*, float*, int batch) {
    kernels::check_batch(batch, "Softmax backward");
    if (!dx) return;
    kernels::kernel_softmax_backward<N><<<kernels::grid_for(std::size_t(batch), kernels::softmax_warps),
                                          kernels::softmax_threads, 0, ctx.stream>>>(y, dy, dx, batch);
    CTNN_CHECK_LAUNCH();
  }
};


}  // namespace ctnn
