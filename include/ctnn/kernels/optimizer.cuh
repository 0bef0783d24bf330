#pragma once
// One fused optimizer step over a whole parameter block, generic over the optimizer type (Sgd, Adam,
// AdamW, ... see train/optimizer.hpp): each thread loads its parameters, gradients and state, runs
// Opt::update, the same CTNN_HOST_DEVICE function as the host loop, and stores them back. The per-step
// record is read from DEVICE memory inside the kernel, so a captured CUDA graph follows a changing
// learning rate (or Adam's bias correction) without being re-captured. No allocation; stream-ordered.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "../core/cuda_context.hpp"
#include "launch.cuh"

namespace ctnn::kernels {

inline constexpr int optimizer_threads = 256;

__device__ __forceinline__ void to_array4(float4 v, float (&a)[4]) { a[0] = v.x, a[1] = v.y, a[2] = v.z, a[3] = v.w; }
__device__ __forceinline__ float4 to_float4(const float (&a)[4]) { return make_float4(a[0], a[1], a[2], a[3]); }

// Thread t updates floats [4t, 4t + 4) (Vec4: every array 16-byte aligned and n % 4 == 0, so that
// each state slot k, at state + k·n, is aligned too) or float t alone.
template <class Opt, bool Vec4>
__global__ void __launch_bounds__(optimizer_threads)
kernel_optimizer_step(float* __restrict__ param,        // [n]
                      const float* __restrict__ grad,   // [n]
                      float* __restrict__ state,        // state_slots slots of n floats, stride apart
                      std::size_t n, std::size_t stride,
                      const float* __restrict__ hyper,  // [hyper_count], Opt::hyper(...) of this step
                      std::uint32_t* __restrict__ advance)  // a step cursor (data.cuh) to advance, or null
{
  // Preconditions
  constexpr int S = int(Opt::state_slots), H = int(Opt::hyper_count);
  static_assert(H >= 1, "an optimizer's per-step record holds at least the learning rate");
  constexpr int SA = S > 0 ? S : 1;  // array extent (a slot-less optimizer still compiles)

  wait_for_prior_grids();  // (launched dependent: see launch.cuh)
  float h[H];
#pragma unroll
  for (int k = 0; k < H; ++k) h[k] = hyper[k];
  // The step's last kernel: no kernel of this step reads the cursor after it.
  if (advance && blockIdx.x == 0 && threadIdx.x == 0) *advance += 1u;
  const std::size_t t = std::size_t(blockIdx.x) * optimizer_threads + threadIdx.x;
  if constexpr (Vec4) {
    if (t >= n / 4) return;
    float p[4], g[4], s[SA][4];
    to_array4(reinterpret_cast<const float4*>(param)[t], p);
    to_array4(reinterpret_cast<const float4*>(grad)[t], g);
#pragma unroll
    for (int k = 0; k < S; ++k) to_array4(reinterpret_cast<const float4*>(state + std::size_t(k) * stride)[t], s[k]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float sj[SA];  // element j's state, slot by slot
#pragma unroll
      for (int k = 0; k < S; ++k) sj[k] = s[k][j];
      Opt::update(p[j], g[j], sj, 1, h);
#pragma unroll
      for (int k = 0; k < S; ++k) s[k][j] = sj[k];
    }
    reinterpret_cast<float4*>(param)[t] = to_float4(p);
#pragma unroll
    for (int k = 0; k < S; ++k) reinterpret_cast<float4*>(state + std::size_t(k) * stride)[t] = to_float4(s[k]);
  } else {
    if (t >= n) return;
    float p = param[t];
    float s[SA];
#pragma unroll
    for (int k = 0; k < S; ++k) s[k] = state[std::size_t(k) * stride + t];
    Opt::update(p, grad[t], s, 1, h);
    param[t] = p;
#pragma unroll
    for (int k = 0; k < S; ++k) state[std::size_t(k) * stride + t] = s[k];
  }
}

// One step of Opt over the parameter floats [first, first + count) of a block of n: param, grad and
// state (Opt::state_slots arrays of n floats, back to back) are the block's; they are updated in place
// from grad and the device record device_hyper (Opt::hyper_count floats, Opt::hyper(options, lr, t)
// copied to the device). The update is elementwise, so a block stepped in several ranges gets the same
// bits as in one. With `advance`, the kernel also adds one to that step cursor (StepCursor::index,
// data.cuh): the step's last kernel.
template <class Opt>
void optimizer_step_range(cudaStream_t stream, float* param, const float* grad, float* state, std::size_t n,
                          std::size_t first, std::size_t count, const float* device_hyper,
                          std::uint32_t* advance = nullptr) {
  if (!param || !grad || !device_hyper || (Opt::state_slots > 0 && !state))
    throw std::invalid_argument(std::string("ctnn: ") + Opt::name +
                                " step: param, grad, state and the device record must not be null");
  if (first > n || count > n - first)
    throw std::invalid_argument(std::string("ctnn: ") + Opt::name + " step: the range [" + std::to_string(first) +
                                ", " + std::to_string(first + count) + ") is not inside the block of " +
                                std::to_string(n) + " floats");
  if (count == 0 && !advance) return;
  constexpr int T = optimizer_threads;
  float* p = param + first;
  const float* g = grad + first;
  float* st = Opt::state_slots > 0 ? state + first : state;
  const bool vec4 = count % 4 == 0 && n % 4 == 0 && aligned_to(p, 16) && aligned_to(g, 16) &&
                    (Opt::state_slots == 0 || aligned_to(st, 16));
  if (vec4)
    launch_dependent(kernel_optimizer_step<Opt, true>, grid_for(max_of<std::size_t>(count / 4, 1), T), T, 0, stream, p,
                     g, st, count, n, device_hyper, advance);
  else
    launch_dependent(kernel_optimizer_step<Opt, false>, grid_for(max_of<std::size_t>(count, 1), T), T, 0, stream, p, g,
                     st, count, n, device_hyper, advance);
}

// The whole block: [0, n).
template <class Opt>
void optimizer_step(cudaStream_t stream, float* param, const float* grad, float* state, std::size_t n,
                    const float* device_hyper, std::uint32_t* advance = nullptr) {
  if (n == 0) return;
  optimizer_step_range<Opt>(stream, param, grad, state, n, 0, n, device_hyper, advance);
}

}  // namespace ctnn::kernels
