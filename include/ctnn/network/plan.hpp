#pragma once
// Buffer plan: where each tensor lives inside one flat float arena, computed at compile time.
//
//   parameters  [w0 b0 w1 b1 ...]   each tensor starts on a 64-float (256-byte) boundary, so that
//                                   vector loads and cuBLAS see aligned pointers; gradients and
//                                   optimizer state use the same offsets in arrays of the same size.
//   activations [x a0 a1 ... aL-1]  the input and every layer's output for a batch, each aligned.
//   workspace                       the largest per-layer scratch (im2col columns) for a batch.
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
      std::array<std::size_t, L + 1> act_size{};  // floats per sample: input, then each output
      std::size_t param_floats = 0, workspace_per_sample = 0;
    } t;
    t.act_size[0] = Net::input_shape::size;
    std::size_t at = 0;
    auto add = [&](std::size_t i, std::size_t wc, std::size_t bc, std::size_t out, std::size_t ws) {
      t.weight_count[i] = wc;
      t.bias_count[i] = bc;
      t.weight_offset[i] = at;
      at += align_floats(wc);
      t.bias_offset[i] = at;
      at += align_floats(bc);
      t.act_size[i + 1] = out;
      t.workspace_per_sample = ws > t.workspace_per_sample ? ws : t.workspace_per_sample;
    };
    (add(I, Net::template bound_at<I>::weight_count, Net::template bound_at<I>::bias_count,
         Net::template bound_at<I>::out_size, Net::template bound_at<I>::workspace_size),
     ...);
    t.param_floats = at;
    return t;
  }
  static constexpr auto tables_ = per_layer(std::make_index_sequence<L>{});

 public:
  static constexpr auto weight_offset = tables_.weight_offset;
  static constexpr auto bias_offset = tables_.bias_offset;
  static constexpr auto weight_count = tables_.weight_count;
  static constexpr auto bias_count = tables_.bias_count;
  static constexpr auto act_size = tables_.act_size;  // act_size[0] is the input
  static constexpr std::size_t param_floats = tables_.param_floats;  // padded; >= param_count

  // Offset of activation i (0 = input, i = output of layer i-1) for a batch of `batch` samples.
  static constexpr std::size_t act_offset(std::size_t i, std::size_t batch) {
    std::size_t at = 0;
    for (std::size_t j = 0; j < i; ++j) at += align_floats(act_size[j] * batch);
    return at;
  }
  static constexpr std::size_t activation_floats(std::size_t batch) { return act_offset(L + 1, batch); }
  static constexpr std::size_t workspace_floats(std::size_t batch) {
    return align_floats(tables_.workspace_per_sample * batch);
  }

  // Bytes, for the model card. Parameters count once; training also keeps a gradient and a momentum
  // buffer of the same size.
  static constexpr std::size_t param_bytes = Net::param_count * sizeof(float);
  static constexpr std::size_t activation_bytes(std::size_t batch) {
    return activation_floats(batch) * sizeof(float);
  }
  static constexpr std::size_t workspace_bytes(std::size_t batch) {
    return workspace_floats(batch) * sizeof(float);
  }
  // Everything training needs: parameters, gradients, momentum, activations, their gradients
  // (same plan as activations), workspace.
  static constexpr std::size_t training_floats(std::size_t batch) {
    return 3 * param_floats + 2 * activation_floats(batch) + workspace_floats(batch);
  }
};

}  // namespace ctnn
