#pragma once
// The losses' fused forward + backward kernels (train/softmax_cross_entropy.hpp, train/mse.hpp hold
// the types and their host references). One warp per sample, lanes striding over the Width outputs,
// as in kernels/softmax.cuh; every reduction is an xor butterfly, so results are deterministic. Each
// kernel writes, for its sample, the loss, whether argmax(z) equals the label (0 without labels), and
// unless null the gradient of the batch-mean loss with respect to z (and, for softmax cross-entropy,
// the probabilities). A label outside [0, Width) gives loss NaN, correct 0 and a NaN gradient row, so
// a bad label cannot pass silently.
//
//   kernels::loss_forward_backward<Loss, Width>(stream, options, z, labels, targets, batch,
//                                              grad, loss, correct, probs);
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../core/cuda_context.hpp"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn {

struct SoftmaxCrossEntropy;  // train/softmax_cross_entropy.hpp
struct Mse;                  // train/mse.hpp

namespace kernels {

inline constexpr int loss_warps = 8;  // samples per block
inline constexpr int loss_threads = 32 * loss_warps;

// The largest of z[0..N) and its first index, in every lane of the warp. Each lane keeps its first
// strict maximum (it sees increasing indices); across lanes equal values go to the lower index.
template <int N>
__device__ __forceinline__ void warp_argmax(const float* z, int lane, float& top, int& arg) {
  top = -INFINITY;
  arg = N;  // stays N only if every value is NaN
  for (int i = lane; i < N; i += 32) {
    const float v = z[i];
    if (v > top || (arg == N && v == top)) top = v, arg = i;
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float v = __shfl_xor_sync(0xffffffffu, top, offset);
    const int a = __shfl_xor_sync(0xffffffffu, arg, offset);
    if (v > top || (v == top && a < arg)) top = v, arg = a;
  }
}

// Softmax cross-entropy with label smoothing ε from the logits z: target q = (1−ε)·onehot(label) + ε/N
// (or (1−ε)·t + ε/N for float targets t), loss = Σ q_i·(lse − z_i), d/dz_i = (p_i·Σq − q_i)/batch.
// One sample, computed by one warp (all 32 lanes call it): z [N], *label or target [N] (label wins),
// grad[i·grad_stride], probs [N], *loss and *correct unless null (the last two by lane 0).
template <int N>
__device__ void softmax_cross_entropy_sample(float eps, const float* z, const std::int32_t* label,
                                             const float* target, int batch, float* grad, int grad_stride,
                                             float* probs, float* loss, std::int32_t* correct, int lane) {
  const int y = label ? *label : -1;
  const bool label_ok = !label || (y >= 0 && y < N);
  const float uniform = eps / float(N), keep = 1.f - eps;
  auto q_of = [&](int i) { return keep * (label ? (i == y ? 1.f : 0.f) : target[i]) + uniform; };

  float top;
  int arg;
  warp_argmax<N>(z, lane, top, arg);
  float sum = 0.f;
  for (int i = lane; i < N; i += 32) sum += expf(z[i] - top);
  sum = warp_sum(sum);
  const float log_sum = logf(sum);  // lse − top
  float total = 0.f, qsum = 0.f;
  for (int i = lane; i < N; i += 32) {
    const float q = q_of(i);
    total += q * (log_sum - (z[i] - top));
    qsum += q;
  }
  total = warp_sum(total);
  qsum = label ? 1.f : warp_sum(qsum);
  const float fbatch = float(batch);
  for (int i = lane; i < N; i += 32) {
    const float p = expf(z[i] - top) / sum;
    if (probs) probs[i] = p;
    if (grad) grad[i * grad_stride] = label_ok ? (p * qsum - q_of(i)) / fbatch : NAN;
  }
  if (lane == 0) {
    if (loss) *loss = label_ok ? total : NAN;
    if (correct) *correct = label && label_ok && arg == y ? 1 : 0;
  }
}

template <int N>
__global__ void __launch_bounds__(loss_threads)
kernel_softmax_cross_entropy_loss(const float* __restrict__ z,             // [batch][N] logits
                                  const std::int32_t* __restrict__ label,  // [batch] or null
                                  const float* __restrict__ target,        // [batch][N] or null (label wins)
                                  float eps, int batch,
                                  float* __restrict__ grad,                // [batch][N] or null
                                  float* __restrict__ loss,                // [batch]
                                  std::int32_t* __restrict__ correct,      // [batch]
                                  float* __restrict__ probs,               // [batch][N] or null
                                  const std::uint32_t* __restrict__ first, std::size_t stride)  // see LossRun
{
  // Preconditions
  static_assert(N >= 1, "at least one class");
  const int s = blockIdx.x * loss_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (s >= batch) return;  // uniform per warp: the shuffles see full warps
  const std::size_t o = std::size_t(s) * N, at = (first ? std::size_t(*first) * stride : 0) + std::size_t(s);
  softmax_cross_entropy_sample<N>(eps, z + o, label ? label + s : nullptr, label ? nullptr : target + o, batch,
                                  grad ? grad + o : nullptr, 1, probs ? probs + o : nullptr, loss + at,
                                  correct + at, lane);
}

// Mean squared error against one-hot labels or float targets t: loss = Σ (z_i − t_i)²/N,
// d/dz_i = 2·(z_i − t_i)/(batch·N). One sample per warp, as softmax_cross_entropy_sample.
template <int N>
__device__ void mse_sample(const float* z, const std::int32_t* label, const float* target, int batch, float* grad,
                           int grad_stride, float* loss, std::int32_t* correct, int lane) {
  const int y = label ? *label : -1;
  const bool label_ok = !label || (y >= 0 && y < N);
  const float scale = float(2.0 / (double(batch) * N));
  float total = 0.f;
  for (int i = lane; i < N; i += 32) {
    const float t = label ? (i == y ? 1.f : 0.f) : target[i];
    const float d = z[i] - t;
    total += d * d;
    if (grad) grad[i * grad_stride] = label_ok ? scale * d : NAN;
  }
  total = warp_sum(total);
  float top;
  int arg;
  warp_argmax<N>(z, lane, top, arg);
  if (lane == 0) {
    if (loss) *loss = label_ok ? total / float(N) : NAN;
    if (correct) *correct = label && label_ok && arg == y ? 1 : 0;
  }
}

template <int N>
__global__ void __launch_bounds__(loss_threads)
kernel_mse_loss(const float* __restrict__ z,             // [batch][N]
                const std::int32_t* __restrict__ label,  // [batch] or null
                const float* __restrict__ target,        // [batch][N] or null (label wins)
                int batch,
                float* __restrict__ grad,                // [batch][N] or null
                float* __restrict__ loss,                // [batch]
                std::int32_t* __restrict__ correct,      // [batch]
                const std::uint32_t* __restrict__ first, std::size_t stride)  // see LossRun
{
  // Preconditions
  static_assert(N >= 1, "at least one output");
  const int s = blockIdx.x * loss_warps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (s >= batch) return;
  const std::size_t o = std::size_t(s) * N, at = (first ? std::size_t(*first) * stride : 0) + std::size_t(s);
  mse_sample<N>(z + o, label ? label + s : nullptr, label ? nullptr : target + o, batch, grad ? grad + o : nullptr, 1,
                loss + at, correct + at, lane);
}

// What a loss computed inside another kernel (a fused dense chain, kernels/dense_chain.cuh) reads and
// writes for a batch; NoLoss: none.
template <class Loss>
struct LossRun {
  typename Loss::Options options{};
  const std::int32_t* labels = nullptr;  // [batch] or null
  const float* targets = nullptr;        // [batch][width] or null (labels win)
  float* loss = nullptr;                 // [batch]
  std::int32_t* correct = nullptr;       // [batch]
  // Unless null, sample s of the batch writes loss and correct at (*first)·first_stride + s (device
  // memory: a step cursor, data.cuh).
  const std::uint32_t* first = nullptr;
  std::size_t first_stride = 0;
};
struct NoLoss {
  struct Options {};
};

// Which kernel runs a loss type. A loss without one gets this message.
template <class Loss>
struct cuda_loss {
  static_assert(!std::is_same_v<Loss, Loss>,
                "ctnn: no CUDA kernel for this loss: kernels/loss.cuh has SoftmaxCrossEntropy and Mse; "
                "a new loss adds its cuda_loss specialisation there");
};

template <>
struct cuda_loss<SoftmaxCrossEntropy> {
  // One sample of a batch of `batch`, by one warp (softmax_cross_entropy_sample).
  template <int N, class Options>
  __device__ static void sample(const Options& o, const float* z, const std::int32_t* label, const float* target,
                                int batch, float* grad, int grad_stride, float* probs, float* loss,
                                std::int32_t* correct, int lane) {
    softmax_cross_entropy_sample<N>(o.label_smoothing, z, label, target, batch, grad, grad_stride, probs, loss,
                                    correct, lane);
  }
  template <int Width, class Options>
  static void launch(cudaStream_t stream, const Options& o, const float* z, const std::int32_t* labels,
                     const float* targets, int batch, float* grad, float* loss, std::int32_t* correct,
                     float* probs, const std::uint32_t* first, std::size_t stride) {
    kernel_softmax_cross_entropy_loss<Width><<<grid_for(std::size_t(batch), loss_warps), loss_threads, 0, stream>>>(
        z, labels, targets, o.label_smoothing, batch, grad, loss, correct, probs, first, stride);
  }
};

template <>
struct cuda_loss<Mse> {
  template <int N, class Options>
  __device__ static void sample(const Options&, const float* z, const std::int32_t* label, const float* target,
                                int batch, float* grad, int grad_stride, float*, float* loss, std::int32_t* correct,
                                int lane) {
    mse_sample<N>(z, label, target, batch, grad, grad_stride, loss, correct, lane);
  }
  template <int Width, class Options>
  static void launch(cudaStream_t stream, const Options&, const float* z, const std::int32_t* labels,
                     const float* targets, int batch, float* grad, float* loss, std::int32_t* correct, float*,
                     const std::uint32_t* first, std::size_t stride) {
    kernel_mse_loss<Width><<<grid_for(std::size_t(batch), loss_warps), loss_threads, 0, stream>>>(
        z, labels, targets, batch, grad, loss, correct, first, stride);
  }
};

// The loss of a batch on the device: z is the output of Loss::grad_layer<Net> ([batch][Width]),
// labels [batch] class indices or null, targets [batch][Width] or null (one of them is needed; labels
// win when both are given). loss and correct [batch] are required (from (*first)·first_stride on,
// with a first: LossRun); grad and probs may be null.
template <class Loss, int Width>
void loss_forward_backward(cudaStream_t stream, const typename Loss::Options& options, const float* z,
                           const std::int32_t* labels, const float* targets, int batch, float* grad, float* loss,
                           std::int32_t* correct, float* probs, const std::uint32_t* first = nullptr,
                           std::size_t first_stride = 0) {
  static_assert(Width >= 1, "ctnn: a loss needs at least one output");
  Loss::validate(options);
  check_batch(batch, Loss::name);
  if (!z || !loss || !correct)
    throw std::invalid_argument(std::string("ctnn: ") + Loss::name + " kernel: z, loss and correct must not be null");
  if (!labels && !targets)
    throw std::invalid_argument(std::string("ctnn: ") + Loss::name +
                                " kernel: needs class labels or float targets, got neither");
  cuda_loss<Loss>::template launch<Width>(stream, options, z, labels, targets, batch, grad, loss, correct, probs, first,
                                          first_stride);
  CTNN_CHECK_LAUNCH();
}

}  // namespace kernels
}  // namespace ctnn
