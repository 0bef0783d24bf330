#pragma once
// GlobalAvgPool on the device. Forward: one warp per plane (sample, channel); lane l sums elements
// l, l + 32, ... in order, then a butterfly (warp_sum) adds the lanes: a fixed order, so results are
// reproducible. Backward: one thread per input element, dy / (H·W) as the host computes it.
#include <cstddef>

#include "../core/cuda_context.hpp"
#include "../layers/global_avg_pool.hpp"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn {
namespace kernels {

inline constexpr int gap_warps = 8;  // planes per block

template <int HW>
__global__ void __launch_bounds__(32 * gap_warps)
kernel_global_avg_pool_forward(const float* __restrict__ x,  // [planes][HW]
                               float* __restrict__ y,        // [planes]
                               std::size_t planes)
{
  // Preconditions
  static_assert(HW >= 1, "a plane has at least one element");
  const std::size_t p = std::size_t(blockIdx.x) * gap_warps + threadIdx.x / 32;
  const int lane = int(threadIdx.x % 32);
  if (p >= planes) return;  // whole warps leave together
  const float* plane = x + p * HW;
  float s = 0.f;
  for (int k = lane; k < HW; k += 32) s += plane[k];
  s = warp_sum(s);
  if (lane == 0) y[p] = s / float(HW);
}

template <int HW>
__global__ void __launch_bounds__(256)
kernel_global_avg_pool_backward(const float* __restrict__ dy,  // [planes]
                                float* __restrict__ dx,        // [planes][HW]
                                std::size_t n)                 // planes·HW
{
  const std::size_t i = std::size_t(blockIdx.x) * 256 + threadIdx.x;
  if (i < n) dx[i] = dy[i / HW] / float(HW);
}

}  // namespace kernels

template <class In>
struct cuda_layer<GlobalAvgPool, In> {
  using B = GlobalAvgPool::bind<In>;
  static constexpr std::size_t workspace_floats(int) { return 0; }

  static void forward(const CudaContext& ctx, const float*, const float*, const float* x, float* y, int batch) {
    kernels::check_batch(batch, "GlobalAvgPool");
    const std::size_t planes = std::size_t(batch) * B::C;
    kernels::kernel_global_avg_pool_forward<B::HW>
        <<<kernels::grid_for(planes, kernels::gap_warps), 32 * kernels::gap_warps, 0, ctx.stream>>>(x, y, planes);
    CTNN_CHECK_LAUNCH();
  }
  static void backward(const CudaContext& ctx, const float*, const float*, const float*, const float* dy, float* dx,
                       float*, float*, int batch) {
    kernels::check_batch(batch, "GlobalAvgPool");
    if (!dx) return;
    const std::size_t n = std::size_t(batch) * B::in_size;
    kernels::kernel_global_avg_pool_backward<B::HW>
        <<<kernels::grid_for(n, 256), 256, 0, ctx.stream>>>(dy, dx, n);
    CTNN_CHECK_LAUNCH();
  }
};

}  // namespace ctnn
