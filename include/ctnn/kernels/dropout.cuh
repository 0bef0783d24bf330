#pragma once
// Dropout on the device: one thread per element. The key is step_key(ForwardArgs::rng_key, *ctx.step)
// (the step read from device memory when the kernel runs, so a captured training step draws a new mask
// each time), the mask the host reference's own (dropout_math in layers/dropout.hpp).
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "../core/cuda_context.hpp"
#include "../layers/dropout.hpp"
#include "launch.cuh"

namespace ctnn {
namespace kernels {

inline constexpr int dropout_threads = 256;

template <float P>
__global__ void __launch_bounds__(dropout_threads)
kernel_dropout_forward(const float* __restrict__ x,        // [n]
                       float* __restrict__ y,              // [n]
                       float* __restrict__ mask,           // [n]: 0 or 1 / (1 − P), kept for backward
                       const std::uint64_t* __restrict__ step,  // the training step (one value)
                       std::uint64_t layer_key,            // layer_key(seed, layer)
                       std::size_t first,                  // counter of element 0: first_sample · size
                       std::size_t n)
{
  const std::size_t i = std::size_t(blockIdx.x) * dropout_threads + threadIdx.x;
  if (i >= n) return;
  const std::uint64_t key = step_key(layer_key, *step);
  const float m = dropout_math<P>::template mask<float>(key, first + i);
  mask[i] = m;
  y[i] = x[i] * m;
}

// A template, as every kernel in these headers: a non-template __global__ defined in a header would
// be defined again in each file that includes it, and two such files would not link.
template <float P>
__global__ void __launch_bounds__(dropout_threads)
kernel_dropout_backward(const float* __restrict__ dy,    // [n]
                        const float* __restrict__ mask,  // [n]
                        float* __restrict__ dx,          // [n]
                        std::size_t n)
{
  const std::size_t i = std::size_t(blockIdx.x) * dropout_threads + threadIdx.x;
  if (i < n) dx[i] = dy[i] * mask[i];
}

}  // namespace kernels

template <float P, class In>
struct cuda_layer<Dropout<P>, In> {
  static constexpr std::size_t size = In::size;
  static constexpr std::size_t workspace_floats(int) { return 0; }

  static void forward(const CudaContext& ctx, const ForwardArgs<float>& a) {
    kernels::check_batch(a.batch, "Dropout");
    const std::size_t n = std::size_t(a.batch) * size;
    if (a.mode == Mode::eval) {
      if (a.x != a.y)
        CTNN_CUDA_CHECK(cudaMemcpyAsync(a.y, a.x, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx.stream));
      return;
    }
    if (!ctx.step)
      throw std::invalid_argument("ctnn: Dropout in training mode needs the step number in device memory "
                                  "(CudaContext::step; the CUDA trainer sets it with CudaNetwork::set_random)");
    kernels::kernel_dropout_forward<P><<<kernels::grid_for(n, kernels::dropout_threads), kernels::dropout_threads, 0,
                                         ctx.stream>>>(a.x, a.y, a.saved, ctx.step, a.rng_key,
                                         std::size_t(a.first_sample) * size, n);
    CTNN_CHECK_LAUNCH();
  }
  static void backward(const CudaContext& ctx, const BackwardArgs<float>& a) {
    kernels::check_batch(a.batch, "Dropout");
    if (!a.dx) return;
    const std::size_t n = std::size_t(a.batch) * size;
    kernels::kernel_dropout_backward<P><<<kernels::grid_for(n, kernels::dropout_threads), kernels::dropout_threads, 0,
                                       ctx.stream>>>(a.dy, a.saved, a.dx, n);
    CTNN_CHECK_LAUNCH();
  }
};

}  // namespace ctnn
