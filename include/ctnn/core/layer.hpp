#pragma once
// The layer contract, as code.
//
// A layer type L (Conv<6,5>, ReLU, ...) derives from layer_tag and provides
//   static constexpr const char* name;
//   static std::string label();          // readable, with its settings: "Conv 6@5x5 pad 2"
//   template <class In> static constexpr bool check();
//       The layer's shape rules for input shape In, as static_asserts whose messages start "ctnn:".
//       Returns whether all rules hold. Rules are chained (each assert is vacuous once an earlier one
//       failed) so a mistake produces exactly one message.
//   template <class In> struct bind;
//       Instantiated only when check<In>() holds. Everything ctnn knows about L applied to In
//       (the BoundLayer concept below):
//         using input_shape, output_shape, weight_shape, bias_shape;   // Shape<> when no parameters
//         static constexpr std::size_t in_size, out_size;              // floats per sample
//         static constexpr std::size_t weight_count, bias_count;
//         static constexpr std::size_t flops;                          // forward FLOPs per sample
//       and the host reference, plain C++ on batch-major NCHW buffers, in one of two forms:
//         simple (layers without state, mode or saved data):
//           template <class T> static void forward(const T* w, const T* b, const T* x, T* y, int batch);
//           template <class T> static void backward(const T* w, const T* x, const T* y, const T* dy,
//                                                   T* dx, T* dw, T* db, int batch);
//         full:
//           template <class T> static void forward(const ForwardArgs<T>&);
//           template <class T> static void backward(const BackwardArgs<T>&);
//       backward overwrites dw/db with the gradient summed over the batch (null for layers without
//       parameters) and skips dx when it is null (the first layer needs none).
//       Optional members (defaults in brackets):
//         static constexpr std::array<StateTensor, N> state;   // non-trainable state [none]
//         static constexpr std::size_t saved_size;             // floats per sample kept for backward [0]
//         template <class T> static void init(T* w, T* b, T* state, Random&);  // [He/Xavier, zero bias,
//                                                              //  zero state: network/init.hpp]
//
// The CUDA implementation of L on In is the specialisation cuda_layer<L, In> (core/cuda_context.hpp),
// with the same two forms taking a CudaContext first.
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "shape.hpp"

namespace ctnn {

struct layer_tag {};

template <class L>
inline constexpr bool is_layer_v = std::is_base_of_v<layer_tag, L>;

// Training or evaluation: passed to every layer's forward (BatchNorm uses batch statistics in
// training and running statistics in evaluation; Dropout is the identity in evaluation).
enum class Mode { train, eval };

// One tensor of a layer's non-trainable state, as it appears in weight files ("running_mean", ...).
// `integer` state is kept as float in the arena (exact up to 2^24) and written as int64.
struct StateTensor {
  const char* name;
  std::size_t count;
  bool integer = false;
};

// What a layer's forward receives. T is float or double on the host, float on the device.
template <class T>
struct ForwardArgs {
  const T* w = nullptr;       // weight (null without parameters)
  const T* b = nullptr;       // bias
  T* state = nullptr;         // the layer's state; forward in training mode may update it
  const T* x = nullptr;       // [batch][in_size]
  T* y = nullptr;             // [batch][out_size]
  T* saved = nullptr;         // [batch][saved_size]: written by a training forward for backward
  int batch = 0;
  Mode mode = Mode::eval;
  std::uint64_t rng_key = 0;  // this step's random stream for this layer (core/random.hpp)
  // Sample n of this call is sample first_sample + n of the step (a step's batch split into shards
  // starts past 0). A layer draws the numbers of element j of sample m as counter_uniform(key,
  // m·in_size + j) with m = first_sample + n, so a step draws the same numbers however it is split.
  std::uint64_t first_sample = 0;
};

template <class T>
struct BackwardArgs {
  const T* w = nullptr;
  const T* state = nullptr;
  const T* x = nullptr;       // the forward's input and output
  const T* y = nullptr;
  const T* dy = nullptr;      // [batch][out_size]
  const T* saved = nullptr;
  T* dx = nullptr;            // [batch][in_size], or null: not wanted
  T* dw = nullptr;            // overwritten with the batch's sum, or null without parameters
  T* db = nullptr;
  int batch = 0;
};

template <class L>
concept Layer = is_layer_v<L> && requires {
  { L::name } -> std::convertible_to<const char*>;
  { L::label() } -> std::convertible_to<std::string>;
};

template <class B>
concept BoundLayer = requires {
  typename B::input_shape;
  typename B::output_shape;
  typename B::weight_shape;
  typename B::bias_shape;
  { B::in_size } -> std::convertible_to<std::size_t>;
  { B::out_size } -> std::convertible_to<std::size_t>;
  { B::weight_count } -> std::convertible_to<std::size_t>;
  { B::bias_count } -> std::convertible_to<std::size_t>;
  { B::flops } -> std::convertible_to<std::size_t>;
};

// The optional members, with their defaults.
template <class B>
constexpr auto state_tensors_of() {
  if constexpr (requires { B::state; }) return B::state;
  else return std::array<StateTensor, 0>{};
}
template <class B>
constexpr std::size_t state_count_of() {
  std::size_t n = 0;
  for (const StateTensor& s : state_tensors_of<B>()) n += s.count;
  return n;
}
template <class B>
constexpr std::size_t saved_size_of() {
  if constexpr (requires { B::saved_size; }) return B::saved_size;
  else return 0;
}

// Calls the host reference in whichever form the layer provides.
template <class B, class T>
void layer_forward(const ForwardArgs<T>& a) {
  if constexpr (requires { B::forward(a); }) B::forward(a);
  else B::forward(a.w, a.b, a.x, a.y, a.batch);
}
template <class B, class T>
void layer_backward(const BackwardArgs<T>& a) {
  if constexpr (requires { B::backward(a); }) B::backward(a);
  else B::backward(a.w, a.x, a.y, a.dy, a.dx, a.dw, a.db, a.batch);
}

namespace detail {
// Dimension i of a shape, or 0 when the shape has fewer dimensions: lets a rule talk about H and W
// of an input that turns out not to be C×H×W without instantiating anything invalid.
template <class In>
constexpr int dim_or_zero(std::size_t i) {
  if constexpr (is_shape_v<In>) return i < In::rank ? In::dims[i] : 0;
  else return 0;
}
// Output size of a sliding window (convolution, pooling); only used once the window is known to fit.
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
