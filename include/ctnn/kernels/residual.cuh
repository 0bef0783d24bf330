#pragma once
// The element-wise parts of a Residual block on the device (network/residual.hpp runs the block's
// layers through their own cuda_layer): y = x + f(x), and dx += dy (the skip path's gradient).
#include <cstddef>

#include "launch.cuh"

namespace ctnn::kernels {

inline constexpr int residual_threads = 256;

// Templates (on the block size), as every kernel in these headers: a non-template __global__ defined
// in a header would be defined again in each file that includes it, and two such files would not link.
template <int Threads>
__global__ void __launch_bounds__(Threads)
kernel_residual_add(const float* __restrict__ x,   // [n] the block's input
                    const float* __restrict__ fx,  // [n] its layers' output
                    float* __restrict__ y,         // [n]
                    std::size_t n)
{
  const std::size_t i = std::size_t(blockIdx.x) * Threads + threadIdx.x;
  if (i < n) y[i] = x[i] + fx[i];
}

template <int Threads>
__global__ void __launch_bounds__(Threads)
kernel_residual_accumulate(const float* __restrict__ dy,  // [n]
                           float* __restrict__ dx,        // [n] in: through the layers; out: plus dy
                           std::size_t n)
{
  const std::size_t i = std::size_t(blockIdx.x) * Threads + threadIdx.x;
  if (i < n) dx[i] += dy[i];
}

inline void residual_add(cudaStream_t stream, const float* x, const float* fx, float* y, std::size_t n) {
  kernel_residual_add<residual_threads><<<grid_for(n, residual_threads), residual_threads, 0, stream>>>(x, fx, y, n);
  CTNN_CHECK_LAUNCH();
}
inline void residual_accumulate(cudaStream_t stream, const float* dy, float* dx, std::size_t n) {
  kernel_residual_accumulate<residual_threads><<<grid_for(n, residual_threads), residual_threads, 0, stream>>>(dy, dx, n);
  CTNN_CHECK_LAUNCH();
}

}  // namespace ctnn::kernels
