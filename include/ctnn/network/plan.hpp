#pragma once
// Buffer plan: where each tensor lives, computed at compile time.
//
//   parameters  [w0 b0 w1 b1 ...]   each tensor starts on a 64-float (256-byte) boundary, so that
//                                   vector loads and cuBLAS see aligned pointers; gradients and
//                                   optimizer state use the same offsets in arrays of the same size.
//   state       [s0 s1 ...]         each layer's non-trainable state (running statistics), aligned.
//   activations [x a0 a1 ... aL-1]  the input and every layer's output for a batch, each aligned.
//   saved       [v0 v1 ...]         what a layer keeps from its training forward for its backward
//                                   (empty for most layers), for a batch, each aligned.
#include <array>
#include <cstddef>

#include "network.hpp"

namespace ctnn {

inline constexpr std::size_t arena_alignment = 64;  // floats
constexpr std::size_t align_floats(std::size_t n) {
  return (n + arena_alignment - 1) / arena_alignment * arena_alignment;
}

template <class Net>
struct BufferPlan {  // not a Network: one message, and no members to cascade from
  static_assert(detail::always_false_v<Net>, "ctnn: BufferPlan takes a Network<Seq<...>, Input<...>>");
};

template <class SeqT, class InputT>
struct BufferPlan<Network<SeqT, InputT>> {
  using Net = Network<SeqT, InputT>;
  static constexpr std::size_t L = Net::layer_count;

 private:
  template <std::size_t... I>
  static constexpr auto per_layer(std::index_sequence<I...>) {
    struct Tables {
      std::array<std::size_t, L> weight_offset{}, bias_offset{}, weight_count{}, bias_count{};
      std::array<std::size_t, L> state_offset{}, state_count{}, saved_size{};
      std::array<std::size_t, L + 1> act_size{};  // floats per sample: input, then each output
      std::size_t param_floats = 0, state_floats = 0;
    } t;
    t.act_size[0] = Net::input_shape::size;
    std::size_t at = 0, state_at = 0;
    auto add = [&](std::size_t i, std::size_t wc, std::size_t bc, std::size_t sc, std::size_t saved,
                   std::size_t out) {
      t.weight_count[i] = wc;
      t.bias_count[i] = bc;
      t.weight_offset[i] = at;
      at += align_floats(wc);
      t.bias_offset[i] = at;
      at += align_floats(bc);
      t.state_count[i] = sc;
      t.state_offset[i] = state_at;
      state_at += align_floats(sc);
      t.saved_size[i] = saved;
      t.act_size[i + 1] = out;
    };
    (add(I, Net::template bound_at<I>::weight_count, Net::template bound_at<I>::bias_count,
         state_count_of<typename Net::template bound_at<I>>(),
         saved_size_of<typename Net::template bound_at<I>>(), Net::template bound_at<I>::out_size),
     ...);
    t.param_floats = at;
    t.state_floats = state_at;
    return t;
  }
  static constexpr auto tables_ = per_layer(std::make_index_sequence<L>{});

 public:
  static constexpr auto weight_offset = tables_.weight_offset;
  static constexpr auto bias_offset = tables_.bias_offset;
  static constexpr auto weight_count = tables_.weight_count;
  static constexpr auto bias_count = tables_.bias_count;
  static constexpr auto state_offset = tables_.state_offset;
  static constexpr auto state_count = tables_.state_count;
  static constexpr auto saved_size = tables_.saved_size;  // floats per sample, per layer
  static constexpr auto act_size = tables_.act_size;      // act_size[0] is the input
  static constexpr std::size_t param_floats = tables_.param_floats;  // padded; >= param_count
  static constexpr std::size_t state_floats = tables_.state_floats;  // padded

  // Offset of activation i (0 = input, i = output of layer i-1) for a batch of `batch` samples.
  static constexpr std::size_t act_offset(std::size_t i, std::size_t batch) {
    std::size_t at = 0;
    for (std::size_t j = 0; j < i; ++j) at += align_floats(act_size[j] * batch);
    return at;
  }
  static constexpr std::size_t activation_floats(std::size_t batch) { return act_offset(L + 1, batch); }
  // Offset of layer i's saved-for-backward buffer for a batch of `batch` samples.
  static constexpr std::size_t saved_offset(std::size_t i, std::size_t batch) {
    std::size_t at = 0;
    for (std::size_t j = 0; j < i; ++j) at += align_floats(saved_size[j] * batch);
    return at;
  }
  static constexpr std::size_t saved_floats(std::size_t batch) { return saved_offset(L, batch); }

  // Bytes, for the model card. Parameters count once; training also keeps their gradients and the
  // optimizer's state (a multiple of the parameters, see the optimizer).
  static constexpr std::size_t param_bytes = Net::param_count * sizeof(float);
  static constexpr std::size_t activation_bytes(std::size_t batch) {
    return activation_floats(batch) * sizeof(float);
  }
  // What training needs besides the optimizer's state: parameters, gradients, layer state,
  // activations and their gradients (same plan), saved buffers.
  static constexpr std::size_t training_floats(std::size_t batch) {
    return 2 * param_floats + state_floats + 2 * activation_floats(batch) + saved_floats(batch);
  }
};

}  // namespace ctnn
