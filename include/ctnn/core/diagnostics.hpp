#pragma once
// at_layer<Index, Layer, InputShape>: applies one layer's shape rules to its input. Every shape error
// is raised while this template is instantiated, so the compiler's "required from" notes show the
// 0-based layer position, the layer and the shape it received.
#include <type_traits>

#include "layer.hpp"
#include "shape.hpp"

namespace ctnn {

struct Softmax;

namespace detail {
template <class Layer, class In>
constexpr bool run_layer_rules() {
  if constexpr (!is_layer_v<Layer> || std::is_same_v<In, InvalidShape>) return false;
  else return Layer::template check<In>();
}

template <bool Valid, class Layer, class In>
struct lazy_output { using type = InvalidShape; };
template <class Layer, class In>
struct lazy_output<true, Layer, In> { using type = typename Layer::template bind<In>::output_shape; };
}  // namespace detail

template <int Index, class Layer, class InputShape>
struct at_layer {
  // After an earlier layer's error the input is InvalidShape: stay silent (no cascade).
  static constexpr bool input_valid = !std::is_same_v<InputShape, InvalidShape>;
  static_assert(!input_valid || is_layer_v<Layer>,
                "ctnn: an element of the Seq is not a layer (layers are Conv, Pool, MaxPool, "
                "AvgPool, Dense, ReLU, Sigmoid, Tanh and Softmax)");
  static constexpr bool valid = detail::run_layer_rules<Layer, InputShape>();
  using output_shape = typename detail::lazy_output<valid, Layer, InputShape>::type;

  // Rules about where a layer may stand in the Seq.
  template <bool IsLast>
  static constexpr bool check_position() {
    constexpr bool ok = IsLast || !std::is_same_v<Layer, Softmax>;
    static_assert(!valid || ok,
                  "ctnn: Softmax must be the last layer (it turns the output into probabilities "
                  "for the loss; nothing may follow it)");
    return ok;
  }
};

}  // namespace ctnn
