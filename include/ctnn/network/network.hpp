#pragma once
// Network<Seq<Layers...>, Input<...>>: shape propagation over the layer list (a Hana fold through
// at_layer), parameter count and per-layer access. Sizes of buffers are in plan.hpp.
#include <array>
// Only the Hana algorithms used here: the umbrella <boost/hana.hpp> is twice as many lines to parse.
#include <boost/hana/append.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/back.hpp>
#include <boost/hana/fold_left.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <cstddef>
#include <type_traits>
#include <utility>

#include "../core/diagnostics.hpp"
#include "../core/layer.hpp"
#include "../core/shape.hpp"

namespace ctnn {

template <class... Layers>
struct Seq {};

namespace detail {
template <class T> inline constexpr bool always_false_v = false;
namespace hana = boost::hana;

template <class T>
using type_of = typename std::decay_t<T>::type;  // hana::type_c<X> value -> X

// Input, then the output of each layer, as a hana tuple of types.
template <bool Checked, class Start, class... Layers>
constexpr auto propagate_shapes() {
  constexpr std::size_t count = sizeof...(Layers);
  return hana::fold_left(hana::tuple_t<Layers...>, hana::make_tuple(hana::type_c<Start>),
                         [](auto shapes, auto layer) {
                           constexpr int index = int(decltype(hana::length(shapes))::value) - 1;
                           using Step = at_layer<index, type_of<decltype(layer)>,
                                                 type_of<decltype(hana::back(shapes))>>;
                           static_cast<void>(Step::template check_position<index + 1 == int(count)>());
                           return hana::append(shapes, hana::type_c<typename Step::output_shape>);
                         });
}

// What bound_at<I> is once a rule has failed: a layer without sizes, parameters or work, so that code
// written against the network (buffer plan, initialisation, host driver) stays quiet after the one
// message instead of instantiating a layer on a shape its rules rejected.
struct unbound_layer : no_params {
  using input_shape = InvalidShape;
  using output_shape = InvalidShape;
  static constexpr std::size_t in_size = 0, out_size = 0, flops = 0;
  template <class T>
  static void forward(const T*, const T*, const T*, T*, int) {}
  template <class T>
  static void backward(const T*, const T*, const T*, const T*, T*, T*, T*, int) {}
};

// Parameters of a bound layer: weight and bias, or param_count where the layer says (a Residual block,
// whose weight is an inner parameter array with alignment padding).
template <class B>
constexpr std::size_t bound_param_count() {
  if constexpr (requires { B::param_count; }) return B::param_count;
  else return B::weight_count + B::bias_count;
}

template <bool Valid, class Layer, class In>
struct bind_if { using type = unbound_layer; };
template <class Layer, class In>
struct bind_if<true, Layer, In> { using type = typename Layer::template bind<In>; };
}  // namespace detail

template <class SeqT, class InputT>
struct Network {
  static_assert(detail::always_false_v<SeqT>,
                "ctnn: a Network is declared as Network<Seq<Layers...>, Input<C, H, W>> "
                "(or Input<N>)");
  // A network without layers stands in, so that code using it adds no errors to the one above.
  using input_shape = InvalidShape;
  using output_shape = InvalidShape;
  static constexpr std::size_t layer_count = 0, param_count = 0, flops_per_sample = 0;
  static constexpr bool valid = false;
  template <std::size_t> using shape_at = InvalidShape;
  template <std::size_t> using input_at = InvalidShape;
  template <std::size_t> using layer_at = void;
  template <std::size_t> using bound_at = detail::unbound_layer;
  template <class F>
  static constexpr void for_each_layer(F&&) {}
};

template <class... Layers, int... D>
struct Network<Seq<Layers...>, Input<D...>> {
  static_assert(sizeof...(Layers) > 0, "ctnn: the Seq is empty; a network needs at least one layer");
  static_assert(sizeof...(Layers) == 0 || sizeof...(D) == 1 || sizeof...(D) == 3,
                "ctnn: the input is Input<C, H, W> or Input<N>");
  static_assert(sizeof...(Layers) == 0 || !(sizeof...(D) == 1 || sizeof...(D) == 3) ||
                    ((D > 0) && ...),
                "ctnn: every Input dimension must be positive");
  static constexpr bool input_ok =
      sizeof...(Layers) > 0 && (sizeof...(D) == 1 || sizeof...(D) == 3) && ((D > 0) && ...);

  using input_shape = Shape<D...>;
  static constexpr std::size_t layer_count = sizeof...(Layers);

 private:
  static constexpr auto layer_types_ = boost::hana::tuple_t<Layers...>;
  static constexpr auto shapes_ =
      detail::propagate_shapes<input_ok, std::conditional_t<input_ok, input_shape, InvalidShape>,
                               Layers...>();

 public:
  // Output shape of layer I (0-based); shape_at<-1>-style access to the input is input_shape.
  template <std::size_t I>
  using shape_at = detail::type_of<decltype(boost::hana::at_c<I + 1>(shapes_))>;
  template <std::size_t I>
  using input_at = detail::type_of<decltype(boost::hana::at_c<I>(shapes_))>;
  template <std::size_t I>
  using layer_at = detail::type_of<decltype(boost::hana::at_c<I>(layer_types_))>;
  using output_shape = shape_at<layer_count - 1>;
  // Whether every shape rule holds (when not, the compiler has reported the first broken one).
  static constexpr bool valid = input_ok && !std::is_same_v<output_shape, InvalidShape>;

  // Everything about layer I bound to its input shape (see core/layer.hpp); detail::unbound_layer
  // when the network is not valid.
  template <std::size_t I>
  using bound_at = typename detail::bind_if<valid, layer_at<I>, input_at<I>>::type;

  // Calls f(std::integral_constant<std::size_t, I>{}) for every layer in order.
  template <class F>
  static constexpr void for_each_layer(F&& f) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (f(std::integral_constant<std::size_t, I>{}), ...);
    }(std::make_index_sequence<layer_count>{});
  }

 private:
  template <std::size_t... I>
  static constexpr std::size_t param_count_of(std::index_sequence<I...>) {
    return (std::size_t{0} + ... + detail::bound_param_count<bound_at<I>>());
  }
  template <std::size_t... I>
  static constexpr std::size_t flops_of(std::index_sequence<I...>) {
    return (std::size_t{0} + ... + bound_at<I>::flops);
  }
  template <class F>
  static constexpr std::size_t if_valid(F f) {
    if constexpr (valid) return f(std::make_index_sequence<layer_count>{});
    else return 0;  // an error has been reported already; keep quiet
  }

 public:
  static constexpr std::size_t param_count =
      if_valid([](auto seq) { return param_count_of(seq); });
  static constexpr std::size_t flops_per_sample = if_valid([](auto seq) { return flops_of(seq); });
};

template <class T> inline constexpr bool is_network_v = false;
template <class S, class I> inline constexpr bool is_network_v<Network<S, I>> = true;

}  // namespace ctnn
