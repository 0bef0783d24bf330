#pragma once
// Fused SGD with momentum over all parameters in one launch, PyTorch's convention and exactly the
// host's arithmetic:  g += λ·p;  v = μ·v + g;  p −= lr·v  (λ: weight decay).  Each operation is rounded separately (__fmul_rn and
// friends are never contracted into an FMA), so the device matches the host bit for bit.
#include <cstddef>

#include "../core/cuda_context.hpp"
#include "launch.cuh"

namespace ctnn::kernels {

inline constexpr int sgd_threads = 256;

__device__ __forceinline__ void sgd_step(float& p, float& v, float g, float lr, float mu, float wd) {
  g = __fadd_rn(g, __fmul_rn(wd, p));
  v = __fadd_rn(__fmul_rn(mu, v), g);
  p = __fsub_rn(p, __fmul_rn(lr, v));
}

// Thread t < n/4 updates floats [4t, 4t + 4) (when Vec4), the next n % 4 threads the tail.
// `hyper`, when not null, is a device triple {lr, μ, λ} read instead of the by-value arguments, so that a
// captured CUDA graph can follow a learning-rate schedule without being re-captured.
template <bool Vec4>
__global__ void __launch_bounds__(sgd_threads)
kernel_sgd_momentum(float* __restrict__ param,        // [n]
                    float* __restrict__ velocity,     // [n]
                    const float* __restrict__ grad,   // [n]
                    std::size_t n, float lr, float mu, float wd,
                    const float* __restrict__ hyper)  // null, or device {lr, μ, λ}
{
  if (hyper) lr = hyper[0], mu = hyper[1], wd = hyper[2];
  const std::size_t t = std::size_t(blockIdx.x) * sgd_threads + threadIdx.x;
  std::size_t i = t;  // the scalar element, if any
  if constexpr (Vec4) {
    const std::size_t n4 = n / 4;
    if (t < n4) {
      float4 p = reinterpret_cast<const float4*>(param)[t];
      float4 v = reinterpret_cast<const float4*>(velocity)[t];
      const float4 g = reinterpret_cast<const float4*>(grad)[t];
      sgd_step(p.x, v.x, g.x, lr, mu, wd), sgd_step(p.y, v.y, g.y, lr, mu, wd);
      sgd_step(p.z, v.z, g.z, lr, mu, wd), sgd_step(p.w, v.w, g.w, lr, mu, wd);
      reinterpret_cast<float4*>(param)[t] = p;
      reinterpret_cast<float4*>(velocity)[t] = v;
      return;
    }
    i = 4 * n4 + (t - n4);
  }
  if (i < n) {
    float p = param[i], v = velocity[i];
    sgd_step(p, v, grad[i], lr, mu, wd);
    param[i] = p, velocity[i] = v;
  }
}

// Updates n parameters (the whole parameter block of the arena: BufferPlan::param_floats) in one
// launch. Pass hyper = null to use lr, momentum and weight decay as given.
inline void sgd_momentum(cudaStream_t stream, float* param, float* velocity, const float* grad,
                         std::size_t n, float lr, float momentum, const float* hyper = nullptr,
                         float weight_decay = 0.f) {
  if (n == 0) return;
  constexpr int T = sgd_threads;
  if (aligned_to(param, 16) && aligned_to(velocity, 16) && aligned_to(grad, 16))
    kernel_sgd_momentum<true>
        <<<grid_for(n / 4 + n % 4, T), T, 0, stream>>>(param, velocity, grad, n, lr, momentum, weight_decay, hyper);
  else
    kernel_sgd_momentum<false>
        <<<grid_for(n, T), T, 0, stream>>>(param, velocity, grad, n, lr, momentum, weight_decay, hyper);
  CTNN_CHECK_LAUNCH();
}

}  // namespace ctnn::kernels
