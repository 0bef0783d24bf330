#pragma once
// ReLU, Sigmoid and Tanh on the device: element-wise over batch·size floats, 16-byte vectors when
// every pointer is 16-byte aligned (the arena aligns each buffer to 256 bytes), then a scalar tail.
// The math is the host reference's own (relu_fn, sigmoid_fn, tanh_fn in layers/activation.hpp).
#include <cstddef>

#include "../core/cuda_context.hpp"
#include "../layers/activation.hpp"
#include "launch.cuh"

namespace ctnn {
namespace kernels {

inline constexpr int activation_threads = 256;

// Thread t < n/4 handles floats [4t, 4t + 4) (when Vec4) and the next n % 4 threads the tail; without
// Vec4, thread t handles float t.
template <class Fn, bool Vec4>
__global__ void __launch_bounds__(activation_threads)
kernel_activation_forward(const float* __restrict__ x,  // [n]
                          float* __restrict__ y,        // [n]
                          std::size_t n)
{
  using F = Fn;  // the host reference's own math (layers/activation.hpp)
  const std::size_t t = std::size_t(blockIdx.x) * activation_threads + threadIdx.x;
  std::size_t i = t;  // the scalar element, if any
  if constexpr (Vec4) {
    const std::size_t n4 = n / 4;
    if (t < n4) {
      float4 v = reinterpret_cast<const float4*>(x)[t];
      v.x = F::apply(v.x), v.y = F::apply(v.y), v.z = F::apply(v.z), v.w = F::apply(v.w);
      reinterpret_cast<float4*>(y)[t] = v;
      return;
    }
    i = 4 * n4 + (t - n4);
  }
  if (i < n) y[i] = F::apply(x[i]);
}

template <class Fn, bool Vec4>
__global__ void __launch_bounds__(activation_threads)
kernel_activation_backward(const float* __restrict__ y,   // [n]
                           const float* __restrict__ dy,  // [n]
                           float* __restrict__ dx,        // [n]
                           std::size_t n)
{
  using F = Fn;  // the host reference's own math (layers/activation.hpp)
  const std::size_t t = std::size_t(blockIdx.x) * activation_threads + threadIdx.x;
  std::size_t i = t;
  if constexpr (Vec4) {
    const std::size_t n4 = n / 4;
    if (t < n4) {
      const float4 o = reinterpret_cast<const float4*>(y)[t];
      float4 g = reinterpret_cast<const float4*>(dy)[t];
      g.x *= F::derivative(o.x), g.y *= F::derivative(o.y);
      g.z *= F::derivative(o.z), g.w *= F::derivative(o.w);
      reinterpret_cast<float4*>(dx)[t] = g;
      return;
    }
    i = 4 * n4 + (t - n4);
  }
  if (i < n) dx[i] = dy[i] * F::derivative(y[i]);
}

// The vector kernel when every pointer is 16-byte aligned (n/4 vectors + n%4 tail threads), else the
// scalar one.
template <class Fn>
void activation_forward(cudaStream_t stream, const float* x, float* y, std::size_t n) {
  constexpr int T = activation_threads;
  if (aligned_to(x, 16) && aligned_to(y, 16))
    kernel_activation_forward<Fn, true><<<grid_for(n / 4 + n % 4, T), T, 0, stream>>>(x, y, n);
  else
    kernel_activation_forward<Fn, false><<<grid_for(n, T), T, 0, stream>>>(x, y, n);
  CTNN_CHECK_LAUNCH();
}

template <class Fn>
void activation_backward(cudaStream_t stream, const float* y, const float* dy, float* dx, std::size_t n) {
  constexpr int T = activation_threads;
  if (aligned_to(y, 16) && aligned_to(dy, 16) && aligned_to(dx, 16))
    kernel_activation_backward<Fn, true><<<grid_for(n / 4 + n % 4, T), T, 0, stream>>>(y, dy, dx, n);
  else
    kernel_activation_backward<Fn, false><<<grid_for(n, T), T, 0, stream>>>(y, dy, dx, n);
  CTNN_CHECK_LAUNCH();
}

}  // namespace kernels

template <class Fn, class In>
struct cuda_activation {
  static constexpr std::size_t size = In::size;  // floats per sample
  static constexpr std::size_t workspace_floats(int) { return 0; }

  static void forward(const CudaContext& ctx, const float*, const float*, const float* x, float* y,
                      int batch) {
    kernels::check_batch(batch, Fn::name);
    kernels::activation_forward<Fn>(ctx.stream, x, y, std::size_t(batch) * size);
  }

  static void backward(const CudaContext& ctx, const float*, const float*, const float* y,
                       const float* dy, float* dx, float*, float*, int batch) {
    kernels::check_batch(batch, Fn::name);
    if (!dx) return;
    kernels::activation_backward<Fn>(ctx.stream, y, dy, dx, std::size_t(batch) * size);
  }
};

template <class In> struct cuda_layer<ReLU, In> : cuda_activation<relu_fn, In> {};
template <class In> struct cuda_layer<Sigmoid, In> : cuda_activation<sigmoid_fn, In> {};
template <class In> struct cuda_layer<Tanh, In> : cuda_activation<tanh_fn, In> {};

}  // namespace ctnn
