#pragma once
// CudaNetwork<Net, MaxBatch>: the CUDA backend for a whole network. It owns one device arena (a
// single cudaMalloc at construction, sized at compile time from the buffer plan and MaxBatch), a
// stream and a cuBLAS handle bound to it. forward/backward only enqueue work on that stream: they
// neither allocate nor synchronise, so a training step can be captured as a CUDA graph.
//
// Arena layout (byte offsets, each region starting on a 256-byte boundary):
//
//   params     plan::param_floats        the parameters, BufferPlan layout (PyTorch tensor layouts)
//   grads      plan::param_floats        their gradients (summed over the batch), same offsets
//   momentum   plan::param_floats        SGD velocity, same offsets
//   acts       activations for MaxBatch  slot i at plan::act_offset(i, MaxBatch): 0 = input,
//                                        i = output of layer i-1. Fixed slots: a smaller run-time
//                                        batch uses the front of each slot.
//   act_grads  same plan as acts         gradient of the loss with respect to each activation
//   workspace  layer scratch             max over layers of cuda_layer::workspace_floats(MaxBatch)
//                                        (the device kernels need no im2col buffer)
//   cublas     32 MiB                    handed to cublasSetWorkspace, so that cuBLAS never
//                                        allocates (not even during graph capture); 32 MiB is
//                                        NVIDIA's recommendation for Hopper
//   labels     MaxBatch int32            the current batch's labels
//   loss       MaxBatch float            per-sample cross-entropy of the current batch
//   correct    MaxBatch int32            per-sample 1/0: argmax equals the label
//   indices    MaxBatch uint32           the current batch's sample indices (the training step
//                                        gathers through them)
//   hyper      3 floats                  {learning rate, momentum, weight decay} read by the captured SGD,
//                                        so a schedule can change them between graph launches
//
// The parameter padding between tensors (plan alignment) is zero in params, grads and momentum and
// stays zero: the layers never write it and SGD maps zero to zero.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/cuda_check.hpp"
#include "../core/cuda_context.hpp"
#include "../kernels/layers.cuh"
#include "../layers/softmax.hpp"
#include "init.hpp"
#include "plan.hpp"

namespace ctnn {

namespace detail {
// Throws ctnn::cuda_error when no CUDA device can be used (the message starts "ctnn: no CUDA
// device", which callers may match to fall back to the host backend).
inline void require_cuda_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();  // the failed query leaves its error behind; clear it
    throw cuda_error(std::string("ctnn: no CUDA device available (cudaGetDeviceCount: ") +
                     (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") + ")");
  }
}
constexpr std::size_t align_bytes(std::size_t n) { return (n + 255) / 256 * 256; }
}  // namespace detail

template <class Net, int MaxBatch>
class CudaNetwork {
 public:
  static_assert(is_network_v<Net>, "ctnn: CudaNetwork takes a Network<Seq<...>, Input<...>>");
  static_assert(MaxBatch >= 1, "ctnn: MaxBatch must be at least 1");
  using plan = BufferPlan<Net>;
  static constexpr std::size_t L = Net::layer_count;
  static constexpr int max_batch = MaxBatch;
  static constexpr bool ends_in_softmax =
      std::is_same_v<typename Net::template layer_at<L - 1>, Softmax>;
  static_assert(!ends_in_softmax || L >= 2,
                "ctnn: a network that is only a Softmax has nothing to compute or train");
  // The layer whose output the loss gradient arrives at: the logits below a final Softmax (the
  // fused softmax-cross-entropy gradient), else the last layer.
  static constexpr std::size_t top = ends_in_softmax ? L - 2 : L - 1;
  static constexpr std::size_t classes = plan::act_size[top + 1];

  template <std::size_t I>
  using layer_kernels = cuda_layer<typename Net::template layer_at<I>, typename Net::template input_at<I>>;

 private:
  template <std::size_t... I>
  static constexpr std::size_t max_layer_workspace(std::index_sequence<I...>) {
    std::size_t m = 0;
    ((m = std::max(m, std::size_t(layer_kernels<I>::workspace_floats(MaxBatch)))), ...);
    return align_floats(m);
  }

 public:
  // Region sizes.
  static constexpr std::size_t param_floats = plan::param_floats;
  static constexpr std::size_t activation_floats = plan::activation_floats(std::size_t(MaxBatch));
  static constexpr std::size_t workspace_floats = max_layer_workspace(std::make_index_sequence<L>{});
  static constexpr std::size_t cublas_workspace_bytes = std::size_t{32} << 20;

  // Region offsets in bytes.
  static constexpr std::size_t params_at = 0;
  static constexpr std::size_t grads_at = params_at + detail::align_bytes(param_floats * sizeof(float));
  static constexpr std::size_t momentum_at = grads_at + detail::align_bytes(param_floats * sizeof(float));
  static constexpr std::size_t acts_at = momentum_at + detail::align_bytes(param_floats * sizeof(float));
  static constexpr std::size_t act_grads_at = acts_at + detail::align_bytes(activation_floats * sizeof(float));
  static constexpr std::size_t workspace_at = act_grads_at + detail::align_bytes(activation_floats * sizeof(float));
  static constexpr std::size_t cublas_at = workspace_at + detail::align_bytes(workspace_floats * sizeof(float));
  static constexpr std::size_t labels_at = cublas_at + detail::align_bytes(cublas_workspace_bytes);
  static constexpr std::size_t loss_at = labels_at + detail::align_bytes(MaxBatch * sizeof(std::int32_t));
  static constexpr std::size_t correct_at = loss_at + detail::align_bytes(MaxBatch * sizeof(float));
  static constexpr std::size_t indices_at = correct_at + detail::align_bytes(MaxBatch * sizeof(std::int32_t));
  // Total device memory of the arena (for the model card).
  static constexpr std::size_t hyper_at = indices_at + detail::align_bytes(MaxBatch * sizeof(std::uint32_t));
  static constexpr std::size_t arena_bytes = hyper_at + detail::align_bytes(3 * sizeof(float));

  // Parameters from init_parameters<Net>(seed) on the host, so that the host backend starts from the
  // same weights for the same seed. Throws ctnn::cuda_error when there is no CUDA device.
  explicit CudaNetwork(std::uint64_t seed = 1) {
    detail::require_cuda_device();
    try {
      CTNN_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx_.stream, cudaStreamNonBlocking));
      CTNN_CUDA_CHECK(cudaMalloc(&arena_, arena_bytes));
      CTNN_CUBLAS_CHECK(cublasCreate(&ctx_.blas));
      CTNN_CUBLAS_CHECK(cublasSetStream(ctx_.blas, ctx_.stream));
      // Plain FP32 (no TF32): results comparable with the host reference and reproducible.
      CTNN_CUBLAS_CHECK(cublasSetMathMode(ctx_.blas, CUBLAS_DEFAULT_MATH));
      CTNN_CUBLAS_CHECK(cublasSetAtomicsMode(ctx_.blas, CUBLAS_ATOMICS_NOT_ALLOWED));
      CTNN_CUBLAS_CHECK(cublasSetWorkspace(ctx_.blas, arena_ + cublas_at, cublas_workspace_bytes));
      ctx_.workspace = workspace();
      ctx_.workspace_floats = workspace_floats;
      // Zero everything once: gradient and momentum padding must be zero, and the activations of a
      // fresh network hold no stale garbage.
      CTNN_CUDA_CHECK(cudaMemsetAsync(arena_, 0, arena_bytes, ctx_.stream));
      std::vector<float> p(param_floats);
      init_parameters<Net>(p.data(), seed);
      set_parameters(p);
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaNetwork() { release(); }
  CudaNetwork(const CudaNetwork&) = delete;
  CudaNetwork& operator=(const CudaNetwork&) = delete;

  const CudaContext& context() const { return ctx_; }
  cudaStream_t stream() const { return ctx_.stream; }

  // Device pointers into the arena.
  float* params() { return region<float>(params_at); }
  float* grads() { return region<float>(grads_at); }
  float* momentum() { return region<float>(momentum_at); }
  float* workspace() { return region<float>(workspace_at); }
  std::int32_t* labels() { return region<std::int32_t>(labels_at); }
  float* loss() { return region<float>(loss_at); }
  std::int32_t* correct() { return region<std::int32_t>(correct_at); }
  std::uint32_t* indices() { return region<std::uint32_t>(indices_at); }
  const float* hyper() { return region<float>(hyper_at); }
  // Enqueues new SGD hyper-parameters for the steps enqueued after this call.
  void set_hyper(float learning_rate, float momentum, float weight_decay) {
    hyper_host_ = {learning_rate, momentum, weight_decay};
    // From pageable memory the copy is staged before the call returns, so hyper_host_ may change.
    CTNN_CUDA_CHECK(cudaMemcpyAsync(region<float>(hyper_at), hyper_host_.data(), sizeof(hyper_host_),
                                    cudaMemcpyHostToDevice, ctx_.stream));
  }
  // Activation i (0 = input, i = output of layer i-1) and its gradient; room for MaxBatch samples.
  float* activation(std::size_t i) { return region<float>(acts_at) + plan::act_offset(i, MaxBatch); }
  float* activation_grad(std::size_t i) { return region<float>(act_grads_at) + plan::act_offset(i, MaxBatch); }
  float* input() { return activation(0); }
  float* logits() { return activation(top + 1); }
  float* logits_grad() { return activation_grad(top + 1); }
  float* output() { return activation(L); }

  // Runs layers 0..last (default: all) on the `batch` samples in input(). Enqueue only.
  void forward(int batch, std::size_t last = L - 1) {
    check_batch(batch);
    if (last >= L) throw std::out_of_range("ctnn: forward through layer " + std::to_string(last) +
                                           " of a network of " + std::to_string(L) + " layers");
    forward_layers(batch, last, std::make_index_sequence<L>{});
  }
  // Runs up to the logits: every layer below a final Softmax (training fuses the Softmax into the
  // cross-entropy).
  void forward_logits(int batch) { forward(batch, top); }

  // Back-propagates logits_grad() (the loss gradient at the output of layer `top`) through layers
  // top..0, overwriting grads() and activation_grad(1..top). Layer 0 computes no input gradient.
  // Needs the activations of the forward pass of the same batch. Enqueue only.
  void backward(int batch) {
    check_batch(batch);
    backward_layers(batch, std::make_index_sequence<L>{});
  }

  // Host copies (synchronous; not for use inside a step or during capture).
  std::vector<float> parameters() const { return download(region<float>(params_at), param_floats); }
  std::vector<float> gradients() const { return download(region<float>(grads_at), param_floats); }
  std::vector<float> velocity() const { return download(region<float>(momentum_at), param_floats); }
  void set_parameters(const std::vector<float>& p) {
    if (p.size() != param_floats)
      throw std::invalid_argument("ctnn: set_parameters got " + std::to_string(p.size()) +
                                  " floats, expected " + std::to_string(param_floats) +
                                  " (BufferPlan::param_floats)");
    upload(params(), p.data(), p.size());
  }
  void zero_momentum() {
    CTNN_CUDA_CHECK(cudaMemsetAsync(momentum(), 0, param_floats * sizeof(float), ctx_.stream));
    CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  }
  // Batch-major copies of activation i (or its gradient) for `batch` samples.
  std::vector<float> download_activation(std::size_t i, int batch) const {
    check_batch(batch);
    return download(region<float>(acts_at) + plan::act_offset(i, MaxBatch), plan::act_size[i] * std::size_t(batch));
  }
  std::vector<float> download_activation_grad(std::size_t i, int batch) const {
    check_batch(batch);
    return download(region<float>(act_grads_at) + plan::act_offset(i, MaxBatch),
                    plan::act_size[i] * std::size_t(batch));
  }
  void upload_input(const float* x, int batch) {
    check_batch(batch);
    upload(input(), x, plan::act_size[0] * std::size_t(batch));
  }
  void upload_logits_grad(const float* d, int batch) {
    check_batch(batch);
    upload(logits_grad(), d, classes * std::size_t(batch));
  }
  void synchronize() const { CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream)); }

  static void check_batch(int batch) {
    if (batch < 1 || batch > MaxBatch)
      throw std::invalid_argument("ctnn: batch of " + std::to_string(batch) + " is outside 1.." +
                                  std::to_string(MaxBatch) + " (the network's MaxBatch)");
  }

 private:
  template <class T>
  T* region(std::size_t at) const { return reinterpret_cast<T*>(arena_ + at); }

  template <std::size_t... I>
  void forward_layers(int batch, std::size_t last, std::index_sequence<I...>) {
    (forward_layer<I>(batch, last), ...);
  }
  template <std::size_t i>
  void forward_layer(int batch, std::size_t last) {
    if constexpr (i > 0)  // (layer 0 always runs; comparing an unsigned with 0 draws a warning)
      if (i > last) return;
    layer_kernels<i>::forward(ctx_, params() + plan::weight_offset[i], params() + plan::bias_offset[i],
                              activation(i), activation(i + 1), batch);
  }

  template <std::size_t... I>
  void backward_layers(int batch, std::index_sequence<I...>) {
    (backward_layer<L - 1 - I>(batch), ...);  // layers L-1..0, skipping those above top
  }
  template <std::size_t i>
  void backward_layer(int batch) {
    if constexpr (i <= top) {
      using B = typename Net::template bound_at<i>;
      float* dw = B::weight_count ? grads() + plan::weight_offset[i] : nullptr;
      float* db = B::bias_count ? grads() + plan::bias_offset[i] : nullptr;
      layer_kernels<i>::backward(ctx_, params() + plan::weight_offset[i], activation(i), activation(i + 1),
                                 activation_grad(i + 1), i == 0 ? nullptr : activation_grad(i), dw, db, batch);
    }
  }

  template <class T>
  std::vector<T> download(const T* src, std::size_t n) const {
    std::vector<T> h(n);
    CTNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, ctx_.stream));
    CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    return h;
  }
  template <class T>
  void upload(T* dst, const T* src, std::size_t n) {
    CTNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyHostToDevice, ctx_.stream));
    CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // src is pageable and may die after return
  }

  void release() noexcept {
    if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
    if (ctx_.blas) cublasDestroy(ctx_.blas);
    if (arena_) cudaFree(arena_);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
    ctx_ = {};
    arena_ = nullptr;
  }

  CudaContext ctx_{};
  std::array<float, 3> hyper_host_{};
  std::byte* arena_ = nullptr;
};

}  // namespace ctnn
