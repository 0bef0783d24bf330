#pragma once
// CudaNetwork<Net, MaxBatch>: the CUDA backend for a whole network. It owns one device arena (a
// single cudaMalloc at construction, sized at compile time from the buffer plan and MaxBatch), a
// stream and a cuBLAS handle bound to it. forward/backward only enqueue work on that stream: they
// neither allocate nor synchronise, so a training step can be captured as a CUDA graph. What training
// adds (optimizer state, labels, losses) belongs to the trainer, not here.
//
// Arena layout (byte offsets, each region starting on a 256-byte boundary):
//
//   params     plan::param_floats        the parameters, BufferPlan layout (PyTorch tensor layouts)
//   grads      plan::param_floats        their gradients (summed over the batch), same offsets
//   state      plan::state_floats        the layers' non-trainable state (running statistics)
//   acts       activations for MaxBatch  slot i at plan::act_offset(i, MaxBatch): 0 = input,
//                                        i = output of layer i-1. Fixed slots: a smaller run-time
//                                        batch uses the front of each slot.
//   act_grads  same plan as acts         gradient of the loss with respect to each activation
//   saved      plan::saved_floats        what layers keep from a training forward for backward
//   workspace  layer scratch             max over layers of cuda_layer::workspace_floats(MaxBatch)
//   cublas     32 MiB                    handed to cublasSetWorkspace, so that cuBLAS never
//                                        allocates (not even during graph capture); 32 MiB is
//                                        NVIDIA's recommendation for Hopper
//
// The parameter padding between tensors (plan alignment) is zero in params and grads and stays zero:
// the layers never write it and the optimizers map zero to zero.
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
  static constexpr std::size_t state_at = grads_at + detail::align_bytes(param_floats * sizeof(float));
  static constexpr std::size_t acts_at = state_at + detail::align_bytes(plan::state_floats * sizeof(float));
  static constexpr std::size_t act_grads_at = acts_at + detail::align_bytes(activation_floats * sizeof(float));
  static constexpr std::size_t saved_at = act_grads_at + detail::align_bytes(activation_floats * sizeof(float));
  static constexpr std::size_t workspace_at =
      saved_at + detail::align_bytes(plan::saved_floats(std::size_t(MaxBatch)) * sizeof(float));
  static constexpr std::size_t cublas_at = workspace_at + detail::align_bytes(workspace_floats * sizeof(float));
  // Total device memory of the arena (for the model card).
  static constexpr std::size_t arena_bytes = cublas_at + detail::align_bytes(cublas_workspace_bytes);

  // Parameters and state from init_parameters<Net>(seed) on the host, so that the host backend starts
  // from the same weights for the same seed. Throws ctnn::cuda_error when there is no CUDA device.
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
      // Zero everything once: gradient padding must be zero, and the activations of a fresh network
      // hold no stale garbage.
      CTNN_CUDA_CHECK(cudaMemsetAsync(arena_, 0, arena_bytes, ctx_.stream));
      std::vector<float> p(param_floats), st(plan::state_floats);
      init_parameters<Net>(p.data(), st.data(), seed);
      set_parameters(p);
      set_state(st);
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
  float* state() { return region<float>(state_at); }
  float* workspace() { return region<float>(workspace_at); }
  // FP32 (the default) or TF32 tensor-core matrix products, for the work enqueued after the call (set it
  // before a step is captured).
  void set_math(Math math) {
    CTNN_CUBLAS_CHECK(cublasSetMathMode(ctx_.blas, math == Math::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    ctx_.math = math;
  }
  Math math() const { return ctx_.math; }
  // Where layers that draw random numbers find the training step's number and the run's seed (see
  // CudaContext::step); set by the trainer before it captures a step.
  void set_random(const std::uint64_t* device_step, std::uint64_t seed) {
    ctx_.step = device_step;
    seed_ = seed;
  }
  // Activation i (0 = input, i = output of layer i-1) and its gradient; room for MaxBatch samples.
  float* activation(std::size_t i) { return region<float>(acts_at) + plan::act_offset(i, MaxBatch); }
  float* activation_grad(std::size_t i) { return region<float>(act_grads_at) + plan::act_offset(i, MaxBatch); }
  float* input() { return activation(0); }
  float* output() { return activation(L); }

  // Runs layers 0..last (default: all) on the `batch` samples in input(). Enqueue only.
  void forward(int batch, std::size_t last = L - 1, Mode mode = Mode::eval) {
    check_batch(batch);
    if (last >= L) throw std::out_of_range("ctnn: forward through layer " + std::to_string(last) +
                                           " of a network of " + std::to_string(L) + " layers");
    forward_layers(batch, last, mode, std::make_index_sequence<L>{});
  }

  // Back-propagates activation_grad(last + 1) (the loss gradient at the output of layer `last`)
  // through layers last..0, overwriting grads() and activation_grad(1..last). Layer 0 computes no
  // input gradient. Needs the (training) forward of the same batch. Enqueue only.
  void backward(int batch, std::size_t last = L - 1) {
    check_batch(batch);
    if (last >= L) throw std::out_of_range("ctnn: backward from layer " + std::to_string(last) +
                                           " of a network of " + std::to_string(L) + " layers");
    backward_layers(batch, last, std::make_index_sequence<L>{});
  }

  // Host copies (synchronous; not for use inside a step or during capture).
  std::vector<float> parameters() const { return download(region<float>(params_at), param_floats); }
  std::vector<float> gradients() const { return download(region<float>(grads_at), param_floats); }
  std::vector<float> state_values() const { return download(region<float>(state_at), plan::state_floats); }
  void set_parameters(const std::vector<float>& p) {
    if (p.size() != param_floats)
      throw std::invalid_argument("ctnn: set_parameters got " + std::to_string(p.size()) +
                                  " floats, expected " + std::to_string(param_floats) +
                                  " (BufferPlan::param_floats)");
    upload(params(), p.data(), p.size());
  }
  void set_state(const std::vector<float>& st) {
    if (st.size() != plan::state_floats)
      throw std::invalid_argument("ctnn: set_state got " + std::to_string(st.size()) + " floats, expected " +
                                  std::to_string(plan::state_floats) + " (BufferPlan::state_floats)");
    if (!st.empty()) upload(state(), st.data(), st.size());
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
  // Uploads the gradient at the output of layer `last` (what backward(batch, last) starts from).
  void upload_output_grad(const float* d, int batch, std::size_t last = L - 1) {
    check_batch(batch);
    upload(activation_grad(last + 1), d, plan::act_size[last + 1] * std::size_t(batch));
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

  float* saved(std::size_t i) {
    return plan::saved_size[i] ? region<float>(saved_at) + plan::saved_offset(i, MaxBatch) : nullptr;
  }

  template <std::size_t... I>
  void forward_layers(int batch, std::size_t last, Mode mode, std::index_sequence<I...>) {
    (forward_layer<I>(batch, last, mode), ...);
  }
  template <std::size_t i>
  void forward_layer(int batch, std::size_t last, Mode mode) {
    if constexpr (i > 0)  // (layer 0 always runs; comparing an unsigned with 0 draws a warning)
      if (i > last) return;
    ForwardArgs<float> a;
    a.w = params() + plan::weight_offset[i];
    a.b = params() + plan::bias_offset[i];
    a.state = plan::state_count[i] ? state() + plan::state_offset[i] : nullptr;
    a.x = activation(i);
    a.y = activation(i + 1);
    a.saved = saved(i);
    a.batch = batch;
    a.mode = mode;
    a.rng_key = layer_key(seed_, i);  // combined with *ctx.step on the device
    cuda_layer_forward<layer_kernels<i>>(ctx_, a);
  }

  template <std::size_t... I>
  void backward_layers(int batch, std::size_t last, std::index_sequence<I...>) {
    (backward_layer<L - 1 - I>(batch, last), ...);  // layers L-1..0, skipping those above last
  }
  template <std::size_t i>
  void backward_layer(int batch, std::size_t last) {
    if constexpr (i > 0)
      if (i > last) return;
    using B = typename Net::template bound_at<i>;
    BackwardArgs<float> a;
    a.w = params() + plan::weight_offset[i];
    a.state = plan::state_count[i] ? state() + plan::state_offset[i] : nullptr;
    a.x = activation(i);
    a.y = activation(i + 1);
    a.dy = activation_grad(i + 1);
    a.saved = saved(i);
    a.dx = i == 0 ? nullptr : activation_grad(i);
    a.dw = B::weight_count ? grads() + plan::weight_offset[i] : nullptr;
    a.db = B::bias_count ? grads() + plan::bias_offset[i] : nullptr;
    a.batch = batch;
    cuda_layer_backward<layer_kernels<i>>(ctx_, a);
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
  std::uint64_t seed_ = 0;
  std::byte* arena_ = nullptr;
};

}  // namespace ctnn
