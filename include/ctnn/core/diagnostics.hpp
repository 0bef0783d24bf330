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
template <class L, class In>
constexpr bool run_layer_rules() {
  if constexpr (!Layer<L> || std::is_same_v<In, InvalidShape>) return false;
  else return L::template check<In>();
}

// In a function rather than in at_layer's body: clang drops the members of a class whose
// static_assert failed, which would add errors about at_layer's output_shape to this one.
template <class L, class In>
constexpr bool check_is_layer() {
  static_assert(std::is_same_v<In, InvalidShape> || Layer<L>,
                "ctnn: an element of the Seq is not a layer (a layer derives from ctnn::layer_tag and "
                "provides name, label(), check<In>() and bind<In>: see core/layer.hpp)");
  return Layer<L>;
}

template <bool Valid, class L, class In>
struct lazy_output { using type = InvalidShape; };
template <class L, class In>
struct lazy_output<true, L, In> {
  using Bound = typename L::template bind<In>;
  static_assert(BoundLayer<Bound>,
                "ctnn: this layer's bind<In> lacks a member of the bound-layer contract (input_shape, "
                "output_shape, weight_shape, bias_shape, in_size, out_size, weight_count, bias_count, "
                "flops: see core/layer.hpp)");
  using type = typename Bound::output_shape;
};
}  // namespace detail

template <int Index, class Layer, class InputShape>
struct at_layer {
  // After an earlier layer's error the input is InvalidShape: stay silent (no cascade).
  static constexpr bool input_valid = !std::is_same_v<InputShape, InvalidShape>;
  static constexpr bool is_layer = detail::check_is_layer<Layer, InputShape>();
  static constexpr bool valid = is_layer && detail::run_layer_rules<Layer, InputShape>();
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
