#pragma once
// The host reference backend for a whole network: parameters, gradients and activations in plain
// vectors laid out by BufferPlan; forward and backward call each layer's host reference in turn.
// T = float for training on the CPU, double for finite-difference checks.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "init.hpp"
#include "plan.hpp"

namespace ctnn {

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
        acts_(plan::activation_floats(std::size_t(max_batch))),
        act_grads_(plan::activation_floats(std::size_t(max_batch))) {
    if (max_batch < 1) throw std::invalid_argument("ctnn: max_batch must be at least 1");
    init_parameters<Net>(params_.data(), seed);
  }

  int max_batch() const { return max_batch_; }
  std::vector<T>& params() { return params_; }
  const std::vector<T>& params() const { return params_; }
  std::vector<T>& grads() { return grads_; }
  T* weight(std::size_t i) { return params_.data() + plan::weight_offset[i]; }
  T* bias(std::size_t i) { return params_.data() + plan::bias_offset[i]; }

  // Activation i for the current batch: 0 is the input, i > 0 the output of layer i-1.
  T* activation(std::size_t i, int batch) { return acts_.data() + plan::act_offset(i, std::size_t(batch)); }
  T* activation_grad(std::size_t i, int batch) {
    return act_grads_.data() + plan::act_offset(i, std::size_t(batch));
  }

  // Runs the network on `batch` samples (batch-major, input_shape each); returns the output.
  const T* forward(const T* input, int batch) {
    check_batch(batch);
    std::copy(input, input + plan::act_size[0] * std::size_t(batch), activation(0, batch));
    Net::for_each_layer([&](auto index) {
      constexpr std::size_t i = decltype(index)::value;
      using B = typename Net::template bound_at<i>;
      B::forward(params_.data() + plan::weight_offset[i], params_.data() + plan::bias_offset[i],
                 activation(i, batch), activation(i + 1, batch), batch);
    });
    return activation(L, batch);
  }

  // Back-propagates d_out, the gradient of the loss with respect to the output of layer `last`
  // (default: the network's output), through layers last..0; fills grads() (overwritten, summed over
  // the batch). Training with softmax cross-entropy starts below the Softmax with last = L - 2.
  void backward(const T* d_out, int batch, std::size_t last = L - 1) {
    check_batch(batch);
    if (last >= L) throw std::out_of_range("ctnn: backward starts at a layer past the last");
    std::copy(d_out, d_out + plan::act_size[last + 1] * std::size_t(batch),
              activation_grad(last + 1, batch));
    backward_layers(batch, last, std::make_index_sequence<L>{});
  }

 private:
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
    T* dw = B::weight_count ? params_grad(plan::weight_offset[i]) : nullptr;
    T* db = B::bias_count ? params_grad(plan::bias_offset[i]) : nullptr;
    B::backward(params_.data() + plan::weight_offset[i], activation(i, batch), activation(i + 1, batch),
                activation_grad(i + 1, batch), i == 0 ? nullptr : activation_grad(i, batch), dw, db,
                batch);
  }
  T* params_grad(std::size_t offset) { return grads_.data() + offset; }
  void check_batch(int batch) const {
    if (batch < 1 || batch > max_batch_)
      throw std::invalid_argument("ctnn: batch of " + std::to_string(batch) +
                                  " is outside 1.." + std::to_string(max_batch_));
  }

  int max_batch_;
  std::vector<T> params_, grads_, acts_, act_grads_;
};

}  // namespace ctnn
