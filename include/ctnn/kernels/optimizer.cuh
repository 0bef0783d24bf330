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
// each state slot k, at state + k·n, is aligned too) or float t alone, counted past a hole: the floats
// [hole, hole + hole_len) are skipped (Vec4: both multiples of 4), so one launch steps the two ranges
// around it.
template <class Opt, bool Vec4>
__global__ void __launch_bounds__(optimizer_threads)
kernel_optimizer_step(float* __restrict__ param,        // [n + hole_len]
                      const float* __restrict__ grad,   // [n + hole_len]
                      float* __restrict__ state,        // state_slots slots of n + hole_len floats, stride apart
                      std::size_t n, std::size_t stride, std::size_t hole, std::size_t hole_len,
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
    const std::size_t q = t < hole / 4 ? t : t + hole_len / 4;  // the quad updated
    param += 4 * q, grad += 4 * q, state += 4 * q;
    float p[4], g[4], s[SA][4];
    to_array4(*reinterpret_cast<const float4*>(param), p);
    to_array4(*reinterpret_cast<const float4*>(grad), g);
#pragma unroll
    for (int k = 0; k < S; ++k) to_array4(*reinterpret_cast<const float4*>(state + std::size_t(k) * stride), s[k]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float sj[SA];  // element j's state, slot by slot
#pragma unroll
      for (int k = 0; k < S; ++k) sj[k] = s[k][j];
      Opt::update(p[j], g[j], sj, 1, h);
#pragma unroll
      for (int k = 0; k < S; ++k) s[k][j] = sj[k];
    }
    *reinterpret_cast<float4*>(param) = to_float4(p);
#pragma unroll
    for (int k = 0; k < S; ++k) *reinterpret_cast<float4*>(state + std::size_t(k) * stride) = to_float4(s[k]);
  } else {
    if (t >= n) return;
    const std::size_t e = t < hole ? t : t + hole_len;  // the float updated
    param += e, grad += e, state += e;
    float p = *param;
    float s[SA];
#pragma unroll
    for (int k = 0; k < S; ++k) s[k] = state[std::size_t(k) * stride];
    Opt::update(p, *grad, s, 1, h);
    *param = p;
#pragma unroll
    for (int k = 0; k < S; ++k) state[std::size_t(k) * stride] = s[k];
  }
}

// One step of Opt over the parameter floats [first, first + count) of a block of n, except the hole
// [hole, hole + hole_len) inside that range (hole_len = 0: none): param, grad and state
// (Opt::state_slots arrays of n floats, back to back) are the block's; they are updated in place from
// grad and the device record device_hyper (Opt::hyper_count floats, Opt::hyper(options, lr, t) copied to
// the device). The update is elementwise, so a block stepped in several ranges gets the same bits as
// in one. With `advance`, the kernel also adds one to that step cursor (StepCursor::index, data.cuh):
// the step's last kernel.
template <class Opt>
void optimizer_step_range(cudaStream_t stream, float* param, const float* grad, float* state, std::size_t n,
                          std::size_t first, std::size_t count, const float* device_hyper,
                          std::uint32_t* advance = nullptr, std::size_t hole = 0, std::size_t hole_len = 0) {
  if (!param || !grad || !device_hyper || (Opt::state_slots > 0 && !state))
    throw std::invalid_argument(std::string("ctnn: ") + Opt::name +
                                " step: param, grad, state and the device record must not be null");
  if (first > n || count > n - first)
    throw std::invalid_argument(std::string("ctnn: ") + Opt::name + " step: the range [" + std::to_string(first) +
                                ", " + std::to_string(first + count) + ") is not inside the block of " +
                                std::to_string(n) + " floats");
  if (hole_len > 0 && (hole < first || hole > first + count || hole_len > first + count - hole))
    throw std::invalid_argument(std::string("ctnn: ") + Opt::name + " step: the hole [" + std::to_string(hole) + ", " +
                                std::to_string(hole + hole_len) + ") is not inside the range [" +
                                std::to_string(first) + ", " + std::to_string(first + count) + ")");
  if (hole_len == 0) hole = first;
  const std::size_t stepped = count - hole_len, at = hole - first;  // the hole's offset in the range
  if (stepped == 0 && !advance) return;
  constexpr int T = optimizer_threads;
  float* p = param + first;
  const float* g = grad + first;
  float* st = Opt::state_slots > 0 ? state + first : state;
  const bool vec4 = stepped % 4 == 0 && at % 4 == 0 && hole_len % 4 == 0 && n % 4 == 0 && aligned_to(p, 16) &&
                    aligned_to(g, 16) && (Opt::state_slots == 0 || aligned_to(st, 16));
  if (vec4)
    launch_dependent(kernel_optimizer_step<Opt, true>, grid_for(max_of<std::size_t>(stepped / 4, 1), T), T, 0, stream,
                     p, g, st, stepped, n, at, hole_len, device_hyper, advance);
  else
    launch_dependent(kernel_optimizer_step<Opt, false>, grid_for(max_of<std::size_t>(stepped, 1), T), T, 0, stream, p,
                     g, st, stepped, n, at, hole_len, device_hyper, advance);
}

// The whole block: [0, n).
template <class Opt>
void optimizer_step(cudaStream_t stream, float* param, const float* grad, float* state, std::size_t n,
                    const float* device_hyper, std::uint32_t* advance = nullptr) {
  if (n == 0) return;
  optimizer_step_range<Opt>(stream, param, grad, state, n, 0, n, device_hyper, advance);
}

}  // namespace ctnn::kernels
