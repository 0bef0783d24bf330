#pragma once
// The host reference backend for a whole network: parameters, gradients, layer state, activations and
// saved buffers in plain vectors laid out by BufferPlan; forward and backward call each layer's host
// reference in turn. T = float for training on the CPU, double for finite-difference checks.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/random.hpp"
#include "init.hpp"
#include "plan.hpp"

namespace ctnn {

// Which random numbers a training step's layers draw: stream counter_key(seed, step, layer), from
// sample first_sample of the step on (ForwardArgs::first_sample).
struct StepRandom {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint64_t first_sample = 0;
};

template <class Net, class T = float>
class HostNetwork {
 public:
  static_assert(is_network_v<Net>, "ctnn: HostNetwork takes a Network<Seq<...>, Input<...>>");
  using plan = BufferPlan<Net>;
  static constexpr std::size_t L = Net::layer_count;

  explicit HostNetwork(int max_batch, std::uint64_t seed = 1)
      : max_batch_(max_batch),
        params_(plan::param_floats),
        grads_(plan::param_floats),
        state_(plan::state_floats),
        acts_(plan::activation_floats(std::size_t(max_batch > 0 ? max_batch : 0))),
        act_grads_(acts_.size()),
        saved_(plan::saved_floats(std::size_t(max_batch > 0 ? max_batch : 0))) {
    if (max_batch < 1) throw std::invalid_argument("ctnn: max_batch must be at least 1");
    init_parameters<Net>(params_.data(), state_.data(), seed);
  }

  int max_batch() const { return max_batch_; }
  std::vector<T>& params() { return params_; }
  const std::vector<T>& params() const { return params_; }
  std::vector<T>& grads() { return grads_; }
  std::vector<T>& state() { return state_; }  // every layer's non-trainable state (running statistics)
  const std::vector<T>& state() const { return state_; }
  T* weight(std::size_t i) { return params_.data() + plan::weight_offset[i]; }
  T* bias(std::size_t i) { return params_.data() + plan::bias_offset[i]; }

  // Activation i for the current batch: 0 is the input, i > 0 the output of layer i-1.
  T* activation(std::size_t i, int batch) { return acts_.data() + plan::act_offset(i, std::size_t(batch)); }
  T* activation_grad(std::size_t i, int batch) {
    return act_grads_.data() + plan::act_offset(i, std::size_t(batch));
  }

  // Runs the network on `batch` samples (batch-major, input_shape each); returns the output. In
  // training mode layers may update their state and keep what their backward needs.
  const T* forward(const T* input, int batch, Mode mode = Mode::eval, StepRandom random = {}) {
    check_batch(batch);
    std::copy(input, input + plan::act_size[0] * std::size_t(batch), activation(0, batch));
    Net::for_each_layer([&](auto index) {
      constexpr std::size_t i = decltype(index)::value;
      ForwardArgs<T> a;
      a.w = params_.data() + plan::weight_offset[i];
      a.b = params_.data() + plan::bias_offset[i];
      a.state = plan::state_count[i] ? state_.data() + plan::state_offset[i] : nullptr;
      a.x = activation(i, batch);
      a.y = activation(i + 1, batch);
      a.saved = saved(i, batch);
      a.batch = batch;
      a.mode = mode;
      a.rng_key = counter_key(random.seed, random.step, i);
      a.first_sample = random.first_sample;
      layer_forward<typename Net::template bound_at<i>>(a);
    });
    return activation(L, batch);
  }

  // Back-propagates d_out, the gradient of the loss with respect to the output of layer `last`
  // (default: the network's output), through layers last..0; fills grads() (overwritten, summed over
  // the batch). Needs the forward of the same batch (in training mode for layers that save data).
  void backward(const T* d_out, int batch, std::size_t last = L - 1) {
    check_batch(batch);
    if (last >= L) throw std::out_of_range("ctnn: backward starts at a layer past the last");
    std::copy(d_out, d_out + plan::act_size[last + 1] * std::size_t(batch),
              activation_grad(last + 1, batch));
    backward_layers(batch, last, std::make_index_sequence<L>{});
  }

 private:
  T* saved(std::size_t i, int batch) {
    return plan::saved_size[i] ? saved_.data() + plan::saved_offset(i, std::size_t(batch)) : nullptr;
  }
  template <std::size_t... I>
  void backward_layers(int batch, std::size_t last, std::index_sequence<I...>) {
    // Reverse order: layer L-1-k for k = 0..L-1, skipping those above `last`.
    (backward_layer<L - 1 - I>(batch, last), ...);
  }
  template <std::size_t i>
  void backward_layer(int batch, std::size_t last) {
    if constexpr (i > 0)  // layer 0 always runs (i > last would compare an unsigned with 0)
      if (i > last) return;
    using B = typename Net::template bound_at<i>;
    BackwardArgs<T> a;
    a.w = params_.data() + plan::weight_offset[i];
    a.state = plan::state_count[i] ? state_.data() + plan::state_offset[i] : nullptr;
    a.x = activation(i, batch);
    a.y = activation(i + 1, batch);
    a.dy = activation_grad(i + 1, batch);
    a.saved = saved(i, batch);
    a.dx = i == 0 ? nullptr : activation_grad(i, batch);
    a.dw = B::weight_count ? grads_.data() + plan::weight_offset[i] : nullptr;
    a.db = B::bias_count ? grads_.data() + plan::bias_offset[i] : nullptr;
    a.batch = batch;
    layer_backward<B>(a);
  }
  void check_batch(int batch) const {
    if (batch < 1 || batch > max_batch_)
      throw std::invalid_argument("ctnn: batch of " + std::to_string(batch) +
                                  " is outside 1.." + std::to_string(max_batch_));
  }

  int max_batch_;
  std::vector<T> params_, grads_, state_, acts_, act_grads_, saved_;
};

}  // namespace ctnn
