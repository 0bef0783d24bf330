#pragma once
// Softmax on the device, one warp per sample (lanes stride over the N classes): the forward pass used
// for inference, the general backward dx = y ⊙ (dy − ⟨dy, y⟩), and the fused softmax + cross-entropy
// step used for training. Warp reductions are xor butterflies: fixed order, same bits in every lane.
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
  const float* xs = x + std::size_t(s) * N;
  float* ys = y + std::size_t(s) * N;
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

// Fused softmax + cross-entropy for a batch: from the logits z (the Softmax layer's input) and the
// labels, writes the probabilities p, the gradient of the batch-mean loss with respect to z,
// (p − onehot(label)) / batch, the per-sample loss log Σ exp(z) − z[label] (computed as
// log Σ exp(z − max) − (z[label] − max), stable in float) and whether the sample is classified right
// (argmax of z, ties to the lowest index, equals the label). A label outside [0, N) gives loss NaN and
// correct 0, so a bad label cannot pass silently.
template <int N>
__global__ void __launch_bounds__(softmax_threads)
kernel_softmax_cross_entropy(const float* __restrict__ z,             // [batch][N] logits
                             const std::int32_t* __restrict__ label,  // [batch]
                             float* __restrict__ p,                   // [batch][N] probabilities
                             float* __restrict__ dz,                  // [batch][N] d(mean loss)/dz
                             float* __restrict__ loss,                // [batch]
                             std::int32_t* __restrict__ correct,      // [batch] 1 or 0
                             int batch)
{
  // Preconditions
  static_assert(N > 0, "at least one class");
  const int s = blockIdx.x * softmax_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (s >= batch) return;
  const std::size_t o = std::size_t(s) * N;
  const int y = label[s];
  const bool label_ok = y >= 0 && y < N;

  // Max and its first index in one pass; lanes see increasing indices, so keeping the first strict
  // maximum per lane and preferring the lower index on equal values across lanes gives the first.
  float top = -INFINITY;
  int arg = N;  // stays N only if every logit is NaN
  for (int i = lane; i < N; i += 32) {
    const float v = z[o + i];
    if (v > top || (arg == N && v == top)) top = v, arg = i;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, top, offset);
    const int a = __shfl_xor_sync(0xffffffffu, arg, offset);
    if (v > top || (v == top && a < arg)) top = v, arg = a;
  }
  float sum = 0.f;
  for (int i = lane; i < N; i += 32) sum += expf(z[o + i] - top);
  sum = warp_sum(sum);
  const float fbatch = float(batch);
  for (int i = lane; i < N; i += 32) {
    const float q = expf(z[o + i] - top) / sum;
    p[o + i] = q;
    dz[o + i] = (i == y ? q - 1.f : q) / fbatch;
  }
  if (lane == 0) {
    loss[s] = label_ok ? logf(sum) - (z[o + y] - top) : NAN;
    correct[s] = label_ok && arg == y ? 1 : 0;
  }
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

namespace kernels {
// The training step's loss layer; see kernel_softmax_cross_entropy. N is the number of classes.
template <int N>
void softmax_cross_entropy(cudaStream_t stream, const float* logits, const std::int32_t* labels,
                           float* probs, float* dlogits, float* loss, std::int32_t* correct, int batch) {
  check_batch(batch, "softmax_cross_entropy");
  kernel_softmax_cross_entropy<N><<<grid_for(std::size_t(batch), softmax_warps), softmax_threads, 0,
                                    stream>>>(logits, labels, probs, dlogits, loss, correct, batch);
  CTNN_CHECK_LAUNCH();
}
}  // namespace kernels

}  // namespace ctnn
