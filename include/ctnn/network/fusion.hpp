#pragma once
// FusionPlan<Net>: which neighbouring layers the CUDA backend runs as one fused group, read off the
// layer list at compile time. The rules, by layer kind (any network, not one model):
//
//   conv group   Conv, then optionally an element-wise activation (ReLU, Sigmoid, Tanh, LeakyReLU),
//                then optionally a max or average pooling whose windows tile its input (stride =
//                window, no padding). Forward: one kernel, bias + activation + pooling as the
//                convolution's epilogue; it keeps what backward needs (max pooling: the position of
//                each window's maximum, one byte; average pooling after an activation: the
//                activation's output). Backward: the weight-gradient kernel (bias gradient included,
//                its batch reduction finished in the same kernel) and the input-gradient kernel, both
//                computing the convolution's output gradient while loading it: the pooling's
//                backward and the activation's derivative (from its output) applied on the fly.
//   dense chain  Dense, optionally an activation, repeated; then the network's final Softmax when it
//                follows. Forward and input-gradient backward for a tile of samples in one kernel
//                (activations of the tile in shared memory, weights streamed through the cache), the
//                loss and its gradient fused in when the chain ends where the loss takes its input;
//                all the chain's weight and bias gradients in one more kernel. A wide Dense (at least
//                dense_chain_wide_weights weights: a CIFAR head's 4096 -> 256) forms a group of its own
//                with its activation (which its layers run: a product split over the whole GPU beats
//                streaming a million weights once per tile of samples), and the chain starts after it.
//   layer        anything else, alone, through its cuda_layer (BatchNorm, Dropout, Residual,
//                GlobalAvgPool, an overlapping pooling, an activation that follows no Conv or Dense).
//
// A group whose device kernels cannot run it (kernels/conv_fused.cuh, kernels/dense_chain.cuh say
// when: a convolution wide enough for the implicit-GEMM kernels, a chain whose tile does not fit in
// shared memory) runs its layers one by one, as layers. Fusion changes where intermediate results
// live, not the arithmetic of each layer: every group is tested against the host reference.
//
// Which activation slots a fused group writes (BufferPlan numbering: slot i is the output of layer
// i−1): a conv group writes its last layer's slot (and in training, what its backward keeps, in the
// slot of the pooling's input); a dense chain writes the slots of all its layers (run layer by layer,
// not that of a Dense that ReLU follows: the product's epilogue applies it). Backward writes the
// parameter gradients and the gradient at the group's input slot (none for layer 0); a chain also
// writes the gradient at each of its Dense outputs (what its weight-gradient kernel reads). Where an
// activation right below a chain runs as a layer (after a wide Dense), the chain does that
// activation's backward too and writes the gradient at the activation's input instead
// (CudaNetwork::grad_folded).
#include <array>
#include <cstddef>
#include <type_traits>

#include "../layers/activation.hpp"
#include "../layers/conv.hpp"
#include "../layers/dense.hpp"
#include "../layers/pool.hpp"
#include "../layers/softmax.hpp"
#include "network.hpp"

namespace ctnn {

enum class GroupKind { layer, conv, dense_chain };

// Layers first..last (inclusive) of a network, run as one unit.
struct FusedGroup {
  GroupKind kind = GroupKind::layer;
  std::size_t first = 0, last = 0;
};

namespace detail {
enum class LayerRole { other, conv, dense, activation, tiling_pool, softmax };

template <class Fn> Fn activation_fn_probe(const Activation<Fn>*);
void activation_fn_probe(...);
template <PoolKind Kind, int K, class... Opts> std::true_type pooling_probe(const Pooling<Kind, K, Opts...>*);
std::false_type pooling_probe(...);

template <class L> struct is_conv_layer : std::false_type {};
template <int Out, int K, class... Opts> struct is_conv_layer<Conv<Out, K, Opts...>> : std::true_type {};
template <class L> struct is_dense_layer : std::false_type {};
template <int N> struct is_dense_layer<Dense<N>> : std::true_type {};
}  // namespace detail

// The element-wise function of an activation layer (relu_fn, ...), void for any other layer.
template <class L>
using activation_fn_t = decltype(detail::activation_fn_probe(static_cast<const L*>(nullptr)));
template <class L>
inline constexpr bool is_activation_layer_v = !std::is_void_v<activation_fn_t<L>>;
// A max or average pooling whose windows tile its input: every input element in at most one window.
template <class L>
constexpr bool is_tiling_pool() {
  if constexpr (decltype(detail::pooling_probe(static_cast<const L*>(nullptr)))::value)
    return L::stride == L::kernel && L::pad == 0;
  else
    return false;
}

namespace detail {
template <class L>
constexpr LayerRole role_of() {
  if constexpr (is_conv_layer<L>::value) return LayerRole::conv;
  else if constexpr (is_dense_layer<L>::value) return LayerRole::dense;
  else if constexpr (is_activation_layer_v<L>) return LayerRole::activation;
  else if constexpr (is_tiling_pool<L>()) return LayerRole::tiling_pool;
  else if constexpr (std::is_same_v<L, Softmax>) return LayerRole::softmax;
  else return LayerRole::other;
}

// The groups of a list of roles, greedily from the first layer (see the rules at the top); wide[i]: layer
// i is a wide Dense.
template <std::size_t L>
constexpr auto group_roles(const std::array<LayerRole, L>& role, const std::array<bool, L>& wide = {}) {
  struct Groups {
    std::array<FusedGroup, L> g{};
    std::size_t count = 0;
  } out;
  auto is = [&](std::size_t i, LayerRole r) { return i < L && role[i] == r; };
  for (std::size_t i = 0; i < L;) {
    FusedGroup grp{GroupKind::layer, i, i};
    if (role[i] == LayerRole::conv) {
      grp.kind = GroupKind::conv;
      if (is(grp.last + 1, LayerRole::activation)) ++grp.last;
      if (is(grp.last + 1, LayerRole::tiling_pool)) ++grp.last;
    } else if (role[i] == LayerRole::dense) {
      grp.kind = GroupKind::dense_chain;
      while (true) {
        if (is(grp.last + 1, LayerRole::activation)) ++grp.last;
        if (wide[grp.first] || !is(grp.last + 1, LayerRole::dense) || wide[grp.last + 1]) break;
        ++grp.last;
      }
      if (grp.last + 2 == L && is(grp.last + 1, LayerRole::softmax)) ++grp.last;
    }
    out.g[out.count++] = grp;
    i = grp.last + 1;
  }
  return out;
}
}  // namespace detail

// A Dense with at least this many weights is wide (see the rules at the top): a large Dense
// (layers/dense.hpp), whose backward also turns to cuBLAS's GEMM (kernels/dense.cuh).
inline constexpr std::size_t dense_chain_wide_weights = dense_large_weights;

template <class Net>
struct FusionPlan {
  static_assert(is_network_v<Net>, "ctnn: FusionPlan takes a Network<Seq<...>, Input<...>>");
};

template <class SeqT, class InputT>
struct FusionPlan<Network<SeqT, InputT>> {
  using Net = Network<SeqT, InputT>;
  static constexpr std::size_t L = Net::layer_count;

 private:
  template <std::size_t... I>
  static constexpr std::array<detail::LayerRole, L> roles_of(std::index_sequence<I...>) {
    return {detail::role_of<typename Net::template layer_at<I>>()...};
  }
  template <std::size_t I>
  static constexpr bool wide_at() {
    if constexpr (detail::is_dense_layer<typename Net::template layer_at<I>>::value)
      return std::size_t(Net::template bound_at<I>::weight_count) >= dense_chain_wide_weights;
    else
      return false;
  }
  template <std::size_t... I>
  static constexpr std::array<bool, L> wide_of(std::index_sequence<I...>) {
    return {wide_at<I>()...};
  }
  static constexpr auto all_ =
      detail::group_roles(roles_of(std::make_index_sequence<L>{}), wide_of(std::make_index_sequence<L>{}));

 public:
  static constexpr std::size_t group_count = all_.count;
  static constexpr std::array<FusedGroup, group_count> groups = [] {
    std::array<FusedGroup, group_count> g{};
    for (std::size_t k = 0; k < group_count; ++k) g[k] = all_.g[k];
    return g;
  }();
  // The group that holds layer i.
  static constexpr std::size_t group_of(std::size_t i) {
    for (std::size_t k = 0; k < group_count; ++k)
      if (groups[k].first <= i && i <= groups[k].last) return k;
    return group_count;
  }
};

}  // namespace ctnn
