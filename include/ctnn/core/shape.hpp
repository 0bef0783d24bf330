#pragma once
// Shape<D...>: a tensor shape per sample, as a type. Input<C,H,W> / Input<N> name a network's input.
#include <cstddef>
#include <string>
#include <type_traits>

namespace ctnn {

template <int... D>
struct Shape {
  static constexpr std::size_t rank = sizeof...(D);
  static constexpr bool all_positive = ((D > 0) && ...);
  // Element count; only meaningful when all_positive.
  static constexpr std::size_t size = (std::size_t{1} * ... * static_cast<std::size_t>(D > 0 ? D : 0));
  static constexpr int dims[rank == 0 ? 1 : rank] = {D...};
  static constexpr int dim(std::size_t i) { return dims[i]; }

  static std::string str() {
    std::string s = "(";
    ((s += std::to_string(D) + "x"), ...);
    if (rank) s.pop_back();
    return s + ")";
  }
};

// The output of a layer whose shape rule failed. Layers after it see this and stay silent, so that the
// compiler reports the first broken rule and nothing that follows from it.
struct InvalidShape {
  static constexpr std::size_t rank = 0, size = 0;
  static std::string str() { return "(invalid)"; }
};

template <int... D>
struct Input {
  using shape = Shape<D...>;
};

template <class T> inline constexpr bool is_shape_v = false;
template <int... D> inline constexpr bool is_shape_v<Shape<D...>> = true;

template <class T> inline constexpr bool is_input_v = false;
template <int... D> inline constexpr bool is_input_v<Input<D...>> = true;

// Shape<C,H,W> accessors used by spatial layers (only instantiated on rank-3 shapes).
template <class S> struct chw;
template <int C, int H, int W>
struct chw<Shape<C, H, W>> {
  static constexpr int c = C, h = H, w = W;
};

}  // namespace ctnn
