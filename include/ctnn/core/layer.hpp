#pragma once
// The layer contract, written down once.
//
// A layer type L (Conv<6,5>, ReLU, ...) derives from layer_tag and provides
//   static constexpr const char* name;
//   static std::string label();          // readable, with its settings: "Conv 6@5x5 pad 2"
//   template <class In> static constexpr bool check();
//       The layer's shape rules for input shape In, as static_asserts whose messages start "ctnn:".
//       Returns whether all rules hold. Rules are chained (each assert is vacuous once an earlier one
//       failed) so a mistake produces exactly one message.
//   template <class In> struct bind;
//       Instantiated only when check<In>() holds. Everything ctnn knows about L applied to In:
//         using input_shape, output_shape, weight_shape, bias_shape;   // Shape<> when no parameters
//         static constexpr std::size_t in_size, out_size;              // floats per sample
//         static constexpr std::size_t weight_count, bias_count;
//         static constexpr std::size_t workspace_size;                 // floats per sample of scratch
//         static constexpr std::size_t flops;                          // forward FLOPs per sample
//         template <class T> static void forward(const T* w, const T* b, const T* x, T* y, int batch);
//         template <class T> static void backward(const T* w, const T* x, const T* y, const T* dy,
//                                                 T* dx, T* dw, T* db, int batch);
//       forward/backward are the host reference: plain C++, batch-major NCHW buffers. backward
//       overwrites dw/db with the gradient summed over the batch (they are null for layers without
//       parameters) and skips dx when it is null (the first layer needs none).
#include <cstddef>
#include <type_traits>

#include "shape.hpp"

namespace ctnn {

struct layer_tag {};

template <class L>
inline constexpr bool is_layer_v = std::is_base_of_v<layer_tag, L>;

namespace detail {
// Dimension i of a shape, or 0 when the shape has fewer dimensions: lets a rule talk about H and W
// of an input that turns out not to be C×H×W without instantiating anything invalid.
template <class In>
constexpr int dim_or_zero(std::size_t i) {
  if constexpr (is_shape_v<In>) return i < In::rank ? In::dims[i] : 0;
  else return 0;
}
// Output size of a sliding window; only used once the window is known to fit.
constexpr int window_out(int in, int k, int stride, int pad, int dilation) {
  return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}
}  // namespace detail

// Base of layers without parameters.
struct no_params {
  using weight_shape = Shape<>;
  using bias_shape = Shape<>;
  static constexpr std::size_t weight_count = 0, bias_count = 0;
};

}  // namespace ctnn
