#pragma once
// CudaNetwork<Net, MaxBatch>: the CUDA backend for a whole network. It owns one device arena (a
// single cudaMalloc at construction, sized at compile time from the buffer plan and MaxBatch), a
// stream and a cuBLAS handle bound to it, and a second stream on which the fused backward runs weight
// gradients (it forks from the first and joins it again within the pass). forward/backward only enqueue
// work: they neither allocate nor synchronise, so a training step can be captured as a CUDA graph. What training
// adds (optimizer state, labels, losses) belongs to the trainer, not here.
//
// Arena layout (byte offsets, each region starting on a 256-byte boundary):
//
//   params     plan::param_floats        the parameters, BufferPlan layout (PyTorch tensor layouts)
//   grads      plan::param_floats        their gradients (summed over the batch), same offsets
//   state      plan::state_floats        the layers' non-trainable state (running statistics)
//   acts       activations for MaxBatch  slot i at plan::act_offset(i, MaxBatch): 0 = input,
//                                        i = output of layer i-1. Fixed slots: a smaller run-time
//                                        batch uses the front of each slot.
//   act_grads  same plan as acts         gradient of the loss with respect to each activation
//   saved      plan::saved_floats        what layers keep from a training forward for backward
//   workspace  layer scratch             max over layers of cuda_layer::workspace_floats(MaxBatch)
//                                        and over fused groups of theirs
//   cublas     32 MiB                    handed to cublasSetWorkspace, so that cuBLAS never
//                                        allocates (not even during graph capture); 32 MiB is
//                                        NVIDIA's recommendation for Hopper
//   tickets    unsigned counters         for kernels that finish their split reductions themselves
//                                        (kernels/reduce.cuh); zero between launches
//   side workspace, side tickets         the same again, for the weight gradients that the fused
//                                        backward runs on a second stream (see loss_pass_fused)
//   wgmma      2 · wgmma_span floats     TF32 copies of the weights of the convolutions that run on
//                                        the wgmma kernels (see wgmma_layer); none in most networks
//
// Two ways to run it: layer by layer (forward, backward: every activation slot and gradient written,
// what the tests compare layer by layer), or by the fusion plan (network/fusion.hpp: forward_fused,
// loss_pass_fused: neighbouring layers in one kernel, fewer launches and memory round trips; the
// trainer's way). Both compute each layer as its host reference does, within float rounding.
//
// The parameter padding between tensors (plan alignment) is zero in params and grads and stays zero:
// the layers never write it and the optimizers map zero to zero.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/cuda_check.hpp"
#include "../core/cuda_context.hpp"
#include "../kernels/conv_fused.cuh"
#include "../kernels/dense_chain.cuh"
#include "../kernels/loss.cuh"
#include "../kernels/network_forward.cuh"
#include "../layers/batchnorm.hpp"
#include "../layers/dropout.hpp"
#include "../layers/global_avg_pool.hpp"
#include "fusion.hpp"
#include "init.hpp"
#include "plan.hpp"

namespace ctnn {

namespace detail {
// Throws ctnn::cuda_error when no CUDA device can be used (the message starts "ctnn: no CUDA
// device", which callers may match to fall back to the host backend).
inline void require_cuda_device() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();  // the failed query leaves its error behind; clear it
    throw cuda_error(std::string("ctnn: no CUDA device available (cudaGetDeviceCount: ") +
                     (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") + ")");
  }
}
constexpr std::size_t align_bytes(std::size_t n) { return (n + 255) / 256 * 256; }

// The device implementation of a fused group (network/fusion.hpp) of layers First..Last of Net.
template <class L, bool = is_tiling_pool<L>()>
struct tile_pool_of {
  using type = kernels::NoPool;
};
template <class L>
struct tile_pool_of<L, true> {
  using type = kernels::TilePool<L::kind, L::kernel>;
};
template <class Net, std::size_t First, std::size_t Last>
struct conv_group_of {
  template <std::size_t I> using at = typename Net::template layer_at<I>;
  static constexpr bool has_act = First < Last && is_activation_layer_v<at<(First < Last ? First + 1 : First)>>;
  using fn = std::conditional_t<has_act, activation_fn_t<at<(First < Last ? First + 1 : First)>>, identity_fn>;
  using type = cuda_conv_group<at<First>, typename Net::template input_at<First>, fn,
                               typename tile_pool_of<at<Last>>::type>;
};
// The positions of the Dense layers among layers First..Top.
template <class Net, std::size_t First, std::size_t Top>
constexpr auto dense_positions() {
  struct Positions {
    std::array<std::size_t, Top - First + 1> at{};
    int count = 0;
  } r;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((is_dense_layer<typename Net::template layer_at<First + I>>::value ? (void)(r.at[std::size_t(r.count++)] = First + I)
                                                                        : (void)0),
     ...);
  }(std::make_index_sequence<Top - First + 1>{});
  return r;
}
// Stage of a chain: the Dense at position D and the activation after it, if any, up to layer Top.
template <class Net, std::size_t D, std::size_t Top>
struct chain_stage_of {
  static constexpr std::size_t next = D < Top ? D + 1 : D;
  static constexpr bool act = D < Top && is_activation_layer_v<typename Net::template layer_at<next>>;
  using fn = std::conditional_t<act, activation_fn_t<typename Net::template layer_at<next>>, identity_fn>;
  using type = kernels::DenseStage<Net::template bound_at<D>::I, Net::template layer_at<D>::units, fn>;
};
template <class Net, std::size_t First, std::size_t Last>
struct chain_group_of {
  static constexpr bool softmax = std::is_same_v<typename Net::template layer_at<Last>, Softmax>;
  static constexpr std::size_t top = softmax ? Last - 1 : Last;  // the last stage's output layer
  static constexpr auto dense = dense_positions<Net, First, top>();
  static constexpr int S = dense.count;
  template <int Lk>
  static constexpr std::size_t dense_at = dense.at[std::size_t(Lk)];
  // Slot of stage Lk's output (after its activation).
  template <int Lk>
  static constexpr std::size_t out_at = chain_stage_of<Net, dense_at<Lk>, top>::act ? dense_at<Lk> + 2 : dense_at<Lk> + 1;
  template <int... Lk>
  static auto dims(std::integer_sequence<int, Lk...>)
      -> kernels::DenseChainDims<softmax, typename chain_stage_of<Net, dense.at[std::size_t(Lk)], top>::type...>;
  using type = cuda_dense_chain<decltype(dims(std::make_integer_sequence<int, S>{}))>;
};

template <float P> std::true_type dropout_probe(const Dropout<P>*);
std::false_type dropout_probe(...);
// Whether layer I exists and is a pooling, an activation.
template <class Net, std::size_t I>
constexpr bool is_pooling_at() {
  if constexpr (I >= Net::layer_count) return false;
  else return decltype(pooling_probe(static_cast<const typename Net::template layer_at<I>*>(nullptr)))::value;
}
template <class Net, std::size_t I>
constexpr bool is_activation_at() {
  if constexpr (I >= Net::layer_count) return false;
  else return is_activation_layer_v<typename Net::template layer_at<I>>;
}
// The activation function after layer I (identity_fn where none follows).
template <class Net, std::size_t I, bool = is_activation_at<Net, I + 1>()>
struct activation_after {
  using type = identity_fn;
};
template <class Net, std::size_t I>
struct activation_after<Net, I, true> {
  using type = activation_fn_t<typename Net::template layer_at<I + 1>>;
};
template <class Net, std::size_t I>
using activation_after_t = typename activation_after<Net, I>::type;
// The pooling layer that the Conv at I takes in, or 0 where none.
template <class Net, std::size_t I>
constexpr std::size_t conv_pool_of() {
  constexpr std::size_t J = is_activation_at<Net, I + 1>() ? I + 2 : I + 1;
  if constexpr (!is_conv_layer<typename Net::template layer_at<I>>::value || !is_pooling_at<Net, J>()) return 0;
  else return Net::template bound_at<I>::out_size <= kernels::network_step_partial_floats ? J : 0;
}
template <class Net, std::size_t I, std::size_t J = conv_pool_of<Net, I>()>
struct conv_pool_window {
  using PL = typename Net::template layer_at<J>;
  using type = kernels::PoolWindow<PL::kind, PL::kernel, PL::stride, PL::pad>;
};
template <class Net, std::size_t I>
struct conv_pool_window<Net, I, 0> {
  using type = void;
};
// The last layer the step of layer I covers (itself, or the last one it takes in).
template <class Net, std::size_t I>
constexpr std::size_t step_last_layer() {
  using Lay = typename Net::template layer_at<I>;
  if constexpr (is_conv_layer<Lay>::value && conv_pool_of<Net, I>() != 0) return conv_pool_of<Net, I>();
  else if constexpr ((is_conv_layer<Lay>::value || is_dense_layer<Lay>::value) && is_activation_at<Net, I + 1>()) return I + 1;
  else return I;
}
// Whether the step of an earlier layer in First .. I - 1 takes layer I in.
template <class Net, std::size_t I, std::size_t First>
constexpr bool taken_in() {
  if constexpr (I == First) return false;
  else if constexpr (step_last_layer<Net, I - 1>() >= I) return true;
  else if constexpr (I - 1 == First) return false;
  else return step_last_layer<Net, I - 2>() >= I;  // (a Conv step, never itself taken in)
}
// Layer I of Net as a step of the network kernel (kernels/network_forward.cuh), void where it has none.
// The kernel's layers are First .. L - 1. A Conv step takes in the activation after it and the pooling
// after that (or right after it) where its sums fit the step's scratch; a Dense step, the activation
// after it. The layers taken in become SampleAbsorbed steps (nothing to run).
template <class Net, std::size_t I, std::size_t First>
constexpr auto sample_op_of() {
  using Lay = typename Net::template layer_at<I>;
  using B = typename Net::template bound_at<I>;
  if constexpr (taken_in<Net, I, First>()) {  // the size of the output of the step that takes it in
    constexpr std::size_t last = [] {
      if constexpr (step_last_layer<Net, I - 1>() >= I) return step_last_layer<Net, I - 1>();
      else return step_last_layer<Net, I - 2>();
    }();
    return std::type_identity<kernels::SampleAbsorbed<Net::template bound_at<last>::out_size>>{};
  } else if constexpr (is_conv_layer<Lay>::value) {
    using Pool = typename conv_pool_window<Net, I>::type;
    return std::type_identity<kernels::SampleConv<B::C, B::H, B::W, Lay::out_channels, Lay::kernel, Lay::stride,
                                                  Lay::pad, Lay::dilation, activation_after_t<Net, I>, Pool>>{};
  } else if constexpr (is_pooling_at<Net, I>())
    return std::type_identity<kernels::SamplePool<Lay::kind, B::C, B::H, B::W, Lay::kernel, Lay::stride, Lay::pad>>{};
  else if constexpr (is_activation_layer_v<Lay>)
    return std::type_identity<kernels::SampleMap<activation_fn_t<Lay>, B::in_size>>{};
  else if constexpr (is_dense_layer<Lay>::value)
    return std::type_identity<kernels::SampleDense<B::I, Lay::units, activation_after_t<Net, I>>>{};
  else if constexpr (std::is_same_v<Lay, Softmax>)
    return std::type_identity<kernels::SampleSoftmax<B::N>>{};
  else if constexpr (std::is_same_v<Lay, BatchNorm>)
    return std::type_identity<kernels::SampleNorm<B::C, B::S>>{};
  else if constexpr (std::is_same_v<Lay, GlobalAvgPool>)
    return std::type_identity<kernels::SampleMean<B::C, B::HW>>{};
  else if constexpr (decltype(dropout_probe(static_cast<const Lay*>(nullptr)))::value)
    return std::type_identity<kernels::SampleAbsorbed<B::in_size>>{};
  else
    return std::type_identity<void>{};
}
template <class Net, std::size_t I, std::size_t First>
using sample_op_t = typename decltype(sample_op_of<Net, I, First>())::type;
// The network kernel of Net's layers First + I... (kernels::cuda_network_kernel), or void when one of
// them has no step. First = 0: the whole network.
template <class Net, std::size_t First, std::size_t... I>
constexpr auto network_kernel_of(std::index_sequence<I...>) {
  using plan = BufferPlan<Net>;
  if constexpr ((!std::is_void_v<sample_op_t<Net, First + I, First>> && ...)) {
    static_assert(((taken_in<Net, First + I, First>() ||
                    sample_op_t<Net, First + I, First>::out_size ==
                        Net::template bound_at<step_last_layer<Net, First + I>()>::out_size) &&
                   ...),
                  "a network kernel step disagrees with its layers' output size");
    return std::type_identity<kernels::cuda_network_kernel<
        kernels::SampleStep<sample_op_t<Net, First + I, First>, plan::weight_offset[First + I], plan::bias_offset[First + I],
                            plan::state_offset[First + I]>...>>{};
  } else {
    return std::type_identity<void>{};
  }
}

// The tail kernel's first layer (CudaNetwork::tail_first): the first t >= 1 whose suffix t .. L-1 has a
// step for every layer, a Dense layer and no convolution (a block's convolution of one sample is the
// network kernel's slow part), at most tail_max_weights parameters and two activations that fit a
// block (opting in to 96 KB of shared memory), and whose input slot the groups before it write: t
// starts a fused group, or t follows the convolution and activation that start a convolution group
// (tail_slot); L if none.
inline constexpr std::size_t tail_max_weights = 32 * 1024;
template <class Net, std::size_t t>
constexpr bool tail_slot() {
  constexpr FusedGroup grp = FusionPlan<Net>::groups[FusionPlan<Net>::group_of(t)];
  if constexpr (t == grp.first) return true;
  else if constexpr (grp.kind == GroupKind::conv && t == grp.first + 2)  // (t in the group: first + 1 too)
    return is_activation_layer_v<typename Net::template layer_at<grp.first + 1>>;
  else return false;
}
template <class Net, std::size_t t>
constexpr bool tail_from() {
  constexpr std::size_t L = Net::layer_count;
  if constexpr (t == 0 || !tail_slot<Net, t>()) {
    return false;
  } else {
    using K = typename decltype(network_kernel_of<Net, t>(std::make_index_sequence<L - t>{}))::type;
    if constexpr (std::is_void_v<K>) {
      return false;
    } else {
      using plan = BufferPlan<Net>;
      std::size_t weights = 0;
      for (std::size_t i = t; i < L; ++i) weights += plan::weight_count[i] + plan::bias_count[i];
      const bool dense = []<std::size_t... I>(std::index_sequence<I...>) {
        return (is_dense_layer<typename Net::template layer_at<t + I>>::value || ...);
      }(std::make_index_sequence<L - t>{});
      const bool conv = []<std::size_t... I>(std::index_sequence<I...>) {
        return (is_conv_layer<typename Net::template layer_at<t + I>>::value || ...);
      }(std::make_index_sequence<L - t>{});
      return K::fits_opt_in && dense && !conv && weights <= tail_max_weights;
    }
  }
}
template <class Net, std::size_t t = 1>
constexpr std::size_t tail_first_of() {
  if constexpr (t >= Net::layer_count) return Net::layer_count;
  else if constexpr (tail_from<Net, t>()) return t;
  else return tail_first_of<Net, t + 1>();
}
}  // namespace detail

template <class Net, int MaxBatch>
class CudaNetwork {
 public:
  static_assert(is_network_v<Net>, "ctnn: CudaNetwork takes a Network<Seq<...>, Input<...>>");
  static_assert(MaxBatch >= 1, "ctnn: MaxBatch must be at least 1");
  using plan = BufferPlan<Net>;
  static constexpr std::size_t L = Net::layer_count;
  static constexpr int max_batch = MaxBatch;

  template <std::size_t I>
  using layer_kernels = cuda_layer<typename Net::template layer_at<I>, typename Net::template input_at<I>>;

  using fusion = FusionPlan<Net>;
  // The device implementation of fused group g: cuda_conv_group, cuda_dense_chain, or void (a layer,
  // or a group the fused kernels cannot run: its layers run one by one).
  template <class K>
  static constexpr auto if_supported() {
    if constexpr (K::supported) return std::type_identity<K>{};
    else return std::type_identity<void>{};
  }
  template <std::size_t g>
  static constexpr auto group_kernels_of() {
    constexpr FusedGroup grp = fusion::groups[g];
    if constexpr (grp.kind == GroupKind::conv)
      return if_supported<typename detail::conv_group_of<Net, grp.first, grp.last>::type>();
    else if constexpr (grp.kind == GroupKind::dense_chain)
      return if_supported<typename detail::chain_group_of<Net, grp.first, grp.last>::type>();
    else
      return std::type_identity<void>{};
  }
  template <std::size_t g>
  using group_kernels = typename decltype(group_kernels_of<g>())::type;
  // Whether group g runs fused for `batch` samples: a group the fused kernels can run, at a batch where
  // they were measured faster than its layers one by one (kernels' min_batch; see docs/fusion.md). A
  // forward without a loss (inference: forward_fused) has its own threshold, forward_min_batch.
  template <std::size_t g>
  static constexpr bool runs_fused(int batch, bool forward_only = false) {
    if constexpr (std::is_void_v<group_kernels<g>>) return false;
    else return batch >= (forward_only ? group_kernels<g>::forward_min_batch : group_kernels<g>::min_batch);
  }
  // Whether the first group can gather its input itself at this batch (loss_pass_fused): a conv group
  // run fused, not its layers one by one.
  static constexpr bool first_group_gathers(int batch) {
    if constexpr (fusion::groups[0].kind == GroupKind::conv && fused_group<0>) return runs_fused<0>(batch);
    else
      return false;
  }
  // Whether group g has fused kernels at all (whether they run at a given batch: runs_fused).
  template <std::size_t g>
  static constexpr bool fused_group = !std::is_void_v<group_kernels<g>>;

  // The network kernel (kernels/network_forward.cuh): the whole forward in one launch, a block per
  // sample, for a network whose every layer has a step there, whose two largest activations fit a
  // block's shared memory (48 KB) and whose sample is small work for one multiprocessor.
  using network_kernel = typename decltype(detail::network_kernel_of<Net, 0>(std::make_index_sequence<L>{}))::type;
  // The work of a sample one block does faster than the fused groups at batch 1: measured at
  // LeNet-5's 0.83 MFLOP (a few microseconds faster; docs/fusion.md); a block's time grows with it,
  // the groups' (more blocks as the layers grow) far less.
  static constexpr std::size_t network_kernel_max_flops = std::size_t{1} << 20;
  static constexpr bool has_network_kernel = [] {
    if constexpr (std::is_void_v<network_kernel>) return false;
    else return network_kernel::fits && Net::flops_per_sample <= network_kernel_max_flops;
  }();
  // Whether forward_fused runs the network kernel: evaluation at a batch up to its max_batch.
  static constexpr bool runs_network_kernel(int batch, Mode mode = Mode::eval) {
    if constexpr (!has_network_kernel) return false;
    else return mode == Mode::eval && batch <= network_kernel::max_batch;
  }

  // The tail kernel: the network kernel's steps for the layers from tail_first (detail::tail_first_of)
  // to the end only, a block per sample, after the groups before them. It replaces the small kernels of
  // a head of pooling, Dense and Softmax (the strided CIFAR network's pooling, cuBLAS's split-K product,
  // its sum and the softmax: 23 µs at batch 256 on an H100; docs/fusion.md) with one launch. Each block
  // reads all the tail's parameters: at most detail::tail_max_weights.
  static constexpr std::size_t tail_first = detail::tail_first_of<Net>();
  using tail_kernel = typename decltype([] {
    if constexpr (tail_first < L)
      return detail::network_kernel_of<Net, tail_first>(std::make_index_sequence<L - tail_first>{});
    else return std::type_identity<void>{};
  }())::type;
  static constexpr bool has_tail_kernel = tail_first < L && !has_network_kernel;
  static constexpr std::size_t tail_group = has_tail_kernel ? fusion::group_of(tail_first) : 0;
  // Whether forward_fused runs the tail kernel: evaluation at a batch up to its max_batch, where the
  // groups before it write its input.
  static constexpr bool runs_tail_kernel(int batch, Mode mode = Mode::eval) {
    if constexpr (!has_tail_kernel) return false;
    else
      return mode == Mode::eval && batch <= tail_kernel::max_batch &&
             (tail_first == fusion::groups[tail_group].first || !runs_fused<tail_group>(batch, true));
  }

 private:
  // Whether layer i can fold the backward of the activation below it into its own (a Conv or a pooling
  // after an activation that is not layer 0, whose input gradient nothing needs).
  template <std::size_t i>
  static constexpr bool folds_activation_below() {
    if constexpr (i < 2) return false;
    else if constexpr (!is_activation_layer_v<typename Net::template layer_at<i - 1>>) return false;
    else if constexpr (requires { layer_kernels<i>::has_backward_data_act; }) return layer_kernels<i>::has_backward_data_act;
    else return false;
  }
  // Whether layer i (a Conv above the activation over layer 0, an RGB stem) computes the stem's weight
  // gradient in its backward data (cuda_layer<Conv>::backward_data_act_stem_wgrad): layer 0's weight
  // gradient then launches nothing, and nothing writes activation_grad(1).
  template <std::size_t i>
  static constexpr bool stem_wgrad_in() {
    if constexpr (i != 2 || !folds_activation_below<i>()) return false;
    else if constexpr (!detail::is_conv_layer<typename Net::template layer_at<0>>::value) return false;
    else if constexpr (requires { layer_kernels<i>::template has_stem_wgrad_below<typename layer_kernels<0>::dims>; })
      return layer_kernels<i>::template has_stem_wgrad_below<typename layer_kernels<0>::dims>;
    else return false;
  }
  static constexpr std::size_t stem_wgrad_workspace() {
    if constexpr (L < 3) return 0;
    else if constexpr (!stem_wgrad_in<2>()) return 0;
    else return layer_kernels<2>::template stem_wgrad_workspace_floats<typename layer_kernels<0>::dims>(MaxBatch);
  }

  template <std::size_t... I>
  static constexpr std::size_t max_layer_workspace(std::index_sequence<I...>) {
    std::size_t m = 0;
    ((m = std::max(m, std::size_t(layer_kernels<I>::workspace_floats(MaxBatch)))), ...);
    return align_floats(std::max(m, stem_wgrad_workspace()));
  }
  // Workspace floats (Tickets = false) or tickets (true) of the fused groups.
  template <bool Tickets, std::size_t... g>
  static constexpr std::size_t max_group_need(std::index_sequence<g...>) {
    std::size_t m = 0;
    auto need = [](auto gi) -> std::size_t {
      using K = group_kernels<decltype(gi)::value>;
      if constexpr (std::is_void_v<K>) return 0;
      else if constexpr (Tickets) return K::ticket_count(MaxBatch);
      else return K::workspace_floats(MaxBatch);
    };
    ((m = std::max(m, need(std::integral_constant<std::size_t, g>{}))), ...);
    return m;
  }

 public:
  // The layers whose TF32 forward and backward data run on the wgmma kernels (kernels/conv_wgmma.cuh,
  // sm_90a): the network keeps TF32 copies of their weights (region wgmma, the parameter floats
  // [wgmma_first, wgmma_first + wgmma_span) twice: forward and backward-data layouts), remade at the
  // start of every pass (refresh_wgmma_weights) while the math is TF32 and the device code has wgmma.
  template <std::size_t I>
  static constexpr bool wgmma_layer() {
    if constexpr (requires { layer_kernels<I>::has_wgmma; }) return layer_kernels<I>::has_wgmma;
    else return false;
  }
  struct WgmmaLayout {
    std::size_t first = plan::param_floats, end = 0;  // the parameter floats the wgmma layers' weights cover
    std::size_t layers = 0, first_layer = L;          // how many wgmma layers; the first one's index
  };
  template <std::size_t... I>
  static constexpr WgmmaLayout wgmma_layout(std::index_sequence<I...>) {
    WgmmaLayout r;
    auto add = [&r](bool yes, std::size_t i) {
      if (!yes) return;
      r.first = std::min(r.first, plan::weight_offset[i]);
      r.end = std::max(r.end, plan::weight_offset[i] + plan::weight_count[i]);
      ++r.layers;
      r.first_layer = std::min(r.first_layer, i);
    };
    (add(wgmma_layer<I>(), I), ...);
    return r;
  }
  static constexpr WgmmaLayout wgmma_layout_ = wgmma_layout(std::make_index_sequence<L>{});
  static constexpr std::size_t wgmma_layers = wgmma_layout_.layers;
  static constexpr std::size_t wgmma_first = wgmma_layers > 0 ? wgmma_layout_.first : 0;
  static constexpr std::size_t wgmma_span = wgmma_layers > 0 ? wgmma_layout_.end - wgmma_layout_.first : 0;
  // The fused group of the first wgmma layer: its forward waits for the copies (refresh_wgmma_weights).
  static constexpr std::size_t wgmma_group =
      wgmma_layers > 0 ? fusion::group_of(wgmma_layout_.first_layer) : fusion::group_count;

  // Region sizes.
  static constexpr std::size_t param_floats = plan::param_floats;
  static constexpr std::size_t activation_floats = plan::activation_floats(std::size_t(MaxBatch));
  static constexpr std::size_t workspace_floats =
      std::max(max_layer_workspace(std::make_index_sequence<L>{}),
               align_floats(max_group_need<false>(std::make_index_sequence<fusion::group_count>{})));
  static constexpr std::size_t cublas_workspace_bytes = std::size_t{32} << 20;
  static constexpr std::size_t ticket_count =
      std::max<std::size_t>(1, max_group_need<true>(std::make_index_sequence<fusion::group_count>{}));

  // Region offsets in bytes.
  static constexpr std::size_t params_at = 0;
  static constexpr std::size_t grads_at = params_at + detail::align_bytes(param_floats * sizeof(float));
  static constexpr std::size_t state_at = grads_at + detail::align_bytes(param_floats * sizeof(float));
  static constexpr std::size_t acts_at = state_at + detail::align_bytes(plan::state_floats * sizeof(float));
  static constexpr std::size_t act_grads_at = acts_at + detail::align_bytes(activation_floats * sizeof(float));
  static constexpr std::size_t saved_at = act_grads_at + detail::align_bytes(activation_floats * sizeof(float));
  static constexpr std::size_t workspace_at =
      saved_at + detail::align_bytes(plan::saved_floats(std::size_t(MaxBatch)) * sizeof(float));
  static constexpr std::size_t cublas_at = workspace_at + detail::align_bytes(workspace_floats * sizeof(float));
  static constexpr std::size_t tickets_at = cublas_at + detail::align_bytes(cublas_workspace_bytes);
  static constexpr std::size_t side_workspace_at = tickets_at + detail::align_bytes(ticket_count * sizeof(unsigned));
  static constexpr std::size_t side_tickets_at =
      side_workspace_at + detail::align_bytes(workspace_floats * sizeof(float));
  static constexpr std::size_t wgmma_at = side_tickets_at + detail::align_bytes(ticket_count * sizeof(unsigned));
  // Total device memory of the arena (for the model card).
  static constexpr std::size_t arena_bytes = wgmma_at + detail::align_bytes(2 * wgmma_span * sizeof(float));

  // Parameters and state from init_parameters<Net>(seed) on the host, so that the host backend starts
  // from the same weights for the same seed. Throws ctnn::cuda_error when there is no CUDA device.
  explicit CudaNetwork(std::uint64_t seed = 1) {
    detail::require_cuda_device();
    try {
      // The data gradients (this stream) are the step's critical path; the weight gradients beside them
      // (side stream) fill what is left: when SMs free up, the block scheduler serves the higher-priority
      // kernel's waiting blocks first. Captured graphs keep it (CudaGraph instantiates with node
      // priorities). vgg, FP32, batch 64 on an H200: 0.2135 -> 0.2113 s an epoch (the side stream first:
      // strided at 256 0.1383 -> 0.1446).
      int least = 0, greatest = 0;
      CTNN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      CTNN_CUDA_CHECK(cudaStreamCreateWithPriority(&ctx_.stream, cudaStreamNonBlocking, greatest));
      CTNN_CUDA_CHECK(cudaStreamCreateWithPriority(&side_stream_, cudaStreamNonBlocking, least));
      CTNN_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
      CTNN_CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
      CTNN_CUDA_CHECK(cudaEventCreateWithFlags(&wgmma_ready_, cudaEventDisableTiming));
      CTNN_CUDA_CHECK(cudaMalloc(&arena_, arena_bytes));
      CTNN_CUBLAS_CHECK(cublasCreate(&ctx_.blas));
      CTNN_CUBLAS_CHECK(cublasSetStream(ctx_.blas, ctx_.stream));
      // Plain FP32 (no TF32): results comparable with the host reference and reproducible.
      CTNN_CUBLAS_CHECK(cublasSetMathMode(ctx_.blas, CUBLAS_DEFAULT_MATH));
      CTNN_CUBLAS_CHECK(cublasSetAtomicsMode(ctx_.blas, CUBLAS_ATOMICS_NOT_ALLOWED));
      CTNN_CUBLAS_CHECK(cublasSetWorkspace(ctx_.blas, arena_ + cublas_at, cublas_workspace_bytes));
      CTNN_CUBLAS_CHECK(cublasLtCreate(&ctx_.blas_lt));
      ctx_.workspace = workspace();
      ctx_.workspace_floats = workspace_floats;
      ctx_.tickets = region<unsigned>(tickets_at);
      ctx_.ticket_count = ticket_count;
      // Zero everything once: gradient padding must be zero, and the activations of a fresh network
      // hold no stale garbage.
      CTNN_CUDA_CHECK(cudaMemsetAsync(arena_, 0, arena_bytes, ctx_.stream));
      std::vector<float> p(param_floats), st(plan::state_floats);
      init_parameters<Net>(p.data(), st.data(), seed);
      set_parameters(p);
      set_state(st);
      if constexpr (wgmma_layers > 0) wgmma_device_ = kernels::conv_wgmma_available();
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaNetwork() { release(); }
  CudaNetwork(const CudaNetwork&) = delete;
  CudaNetwork& operator=(const CudaNetwork&) = delete;

  const CudaContext& context() const { return ctx_; }
  cudaStream_t stream() const { return ctx_.stream; }

  // Device pointers into the arena.
  float* params() { return region<float>(params_at); }
  float* grads() { return region<float>(grads_at); }
  float* state() { return region<float>(state_at); }
  float* workspace() { return region<float>(workspace_at); }
  // FP32 (the default) or TF32 tensor-core matrix products, for the work enqueued after the call (set it
  // before a step is captured).
  void set_math(Math math) {
    CTNN_CUBLAS_CHECK(cublasSetMathMode(ctx_.blas, math == Math::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    ctx_.math = math;
    const bool wgmma = wgmma_layers > 0 && wgmma_device_ && math == Math::tf32;
    ctx_.wgmma_params = wgmma ? params() + wgmma_first : nullptr;
    ctx_.wgmma_floats = wgmma ? wgmma_span : 0;
    ctx_.wgmma_weights = wgmma ? region<float>(wgmma_at) : nullptr;
  }
  Math math() const { return ctx_.math; }
  // Whether the TF32 convolutions that fit run on the wgmma kernels (wgmma_layer): TF32 math, and device
  // code with wgmma (built for sm_90a, running on a Hopper GPU).
  bool wgmma() const { return ctx_.wgmma_weights != nullptr; }
  // Whether the fused backward (loss_pass_fused) runs weight gradients on a second stream, beside the
  // data gradients they do not feed (the default), or everything on stream() one kernel after another.
  // The results are the same bits either way; the switch is for measuring (docs/fusion.md).
  void set_concurrent_weight_gradients(bool on) { concurrent_weight_gradients_ = on; }
  bool concurrent_weight_gradients() const { return concurrent_weight_gradients_; }
  // Called by the fused backward (loss_pass_fused), at enqueue time, with a range [first, first + count)
  // of parameter floats whose gradients are final and which no later kernel of the pass reads, and the
  // stream on which they are ready (the second stream, which stream() joins at the end of the pass): a
  // trainer enqueues their optimizer step there, beside the rest of the backward. Today the block of a
  // large Dense whose weight gradient runs on the second stream (its weights, its bias and their
  // padding): a dense chain's too would cost LeNet-5 a launch (its step has the 10 issue 9 allows). An
  // empty function (the default): none.
  using ParametersDone = std::function<void(std::size_t first, std::size_t count, cudaStream_t stream)>;
  void on_parameters_done(ParametersDone f) { parameters_done_ = std::move(f); }
  // Where layers that draw random numbers find the training step's number and the run's seed (see
  // CudaContext::step); set by the trainer before it captures a step.
  void set_random(const std::uint64_t* device_step, std::uint64_t seed) {
    ctx_.step = device_step;
    seed_ = seed;
  }
  // Activation i (0 = input, i = output of layer i-1) and its gradient; room for MaxBatch samples.
  float* activation(std::size_t i) { return region<float>(acts_at) + plan::act_offset(i, MaxBatch); }
  float* activation_grad(std::size_t i) { return region<float>(act_grads_at) + plan::act_offset(i, MaxBatch); }
  float* input() { return activation(0); }
  float* output() { return activation(L); }

  // Runs layers 0..last (default: all) on the `batch` samples in input(). Enqueue only.
  void forward(int batch, std::size_t last = L - 1, Mode mode = Mode::eval) {
    check_batch(batch);
    if (last >= L) throw std::out_of_range("ctnn: forward through layer " + std::to_string(last) +
                                           " of a network of " + std::to_string(L) + " layers");
    refresh_wgmma_weights();
    wait_wgmma_weights();
    forward_layers(batch, last, mode, std::make_index_sequence<L>{});
  }

  // Back-propagates activation_grad(last + 1) (the loss gradient at the output of layer `last`)
  // through layers last..0, overwriting grads() and activation_grad(1..last). Layer 0 computes no
  // input gradient. Needs the (training) forward of the same batch. Enqueue only.
  void backward(int batch, std::size_t last = L - 1) {
    check_batch(batch);
    if (last >= L) throw std::out_of_range("ctnn: backward from layer " + std::to_string(last) +
                                           " of a network of " + std::to_string(L) + " layers");
    backward_layers(batch, last, std::make_index_sequence<L>{});
  }

  // The fastest forward of the `batch` samples in input() to output(): the network kernel where it
  // runs (runs_network_kernel: evaluation at small batches), else forward_groups. Enqueue only.
  void forward_fused(int batch, Mode mode = Mode::eval) {
    if constexpr (has_network_kernel)
      if (runs_network_kernel(batch, mode)) return forward_network_kernel(batch);
    if constexpr (has_tail_kernel)
      if (runs_tail_kernel(batch, mode)) return forward_tail(batch);
    forward_groups(batch, mode);
  }
  // The groups before tail_first, then the tail kernel (evaluation mode): writes output(), the groups'
  // outputs before the tail and its input slot. Enqueue only.
  void forward_tail(int batch) {
    static_assert(has_tail_kernel, "ctnn: this network has no tail kernel (see tail_first)");
    check_batch(batch);
    refresh_wgmma_weights();
    kernels::static_for<int(tail_group)>([&](auto g) { group_forward<decltype(g)::value>(batch, Mode::eval, true); });
    constexpr FusedGroup grp = fusion::groups[tail_group];
    if constexpr (tail_first > grp.first) conv_act_forward<grp.first>(batch);  // writes activation(tail_first)
    wait_wgmma_weights();
    // Over a block an SM, blocks of 256 threads (registers for two an SM): the strided CIFAR network's
    // tail at batch 256 took 7.3 µs against 9.4 with 512 (H100); at 64 and 1, 5.7 and 5.4 against 5.4
    // and 5.1 (docs/fusion.md).
    if (batch > 128) tail_kernel::template forward<(tail_kernel::threads < 256 ? tail_kernel::threads : 256)>(ctx_.stream, params(), state(), activation(tail_first), output(), batch);
    else tail_kernel::forward(ctx_.stream, params(), state(), activation(tail_first), output(), batch);
  }
  // The fused plan (network/fusion.hpp) through every layer: writes output() and each fused group's
  // output slot (a dense chain: all its slots, except a Dense's own when ReLU follows it and the chain
  // runs layer by layer: there ReLU is the product's epilogue; layers that run alone: theirs), not
  // the slots inside a conv group. Enqueue only.
  void forward_groups(int batch, Mode mode = Mode::eval) {
    check_batch(batch);
    refresh_wgmma_weights();
    kernels::static_for<int(fusion::group_count)>([&](auto g) { group_forward<decltype(g)::value>(batch, mode, true); });
    wait_wgmma_weights();
  }
  // The network kernel's forward (evaluation mode): one launch, output() its only write. Enqueue only.
  void forward_network_kernel(int batch) { forward_network_kernel(batch, input(), output()); }
  // The same reading the `batch` samples from x (input_shape each, batch-major) and writing their
  // outputs to y, its only write; x and y anywhere the device addresses, pinned host memory mapped into
  // it included: a resident image needs no copy into input(), a host one no copy at all
  // (Trainer::predict). x must not change until the kernel ends (read through the non-coherent cache).
  // Enqueue only.
  void forward_network_kernel(int batch, const float* x, float* y) {
    static_assert(has_network_kernel, "ctnn: this network has no network kernel (see has_network_kernel)");
    check_batch(batch);
    if (!x || !y)
      throw std::invalid_argument(std::string("ctnn: forward_network_kernel got a null ") +
                                  (!x ? "input" : "output") + " pointer");
    network_kernel::forward(ctx_.stream, params(), state(), x, y, batch);
  }

  // One pass of a loss, fused: forward (in `mode`) up to the layer the loss takes its input from
  // (Loss::grad_layer<Net>), the loss of each sample (loss.loss, loss.correct; with a final Softmax
  // its probabilities in output()), and with `backward` the gradient of the batch-mean loss back to
  // the input layer: grads() overwritten, as backward() does. A dense chain that ends at that layer
  // computes the loss and its own backward in its forward kernel. The activation-gradient slots it
  // leaves unwritten: those inside fused groups, and activation_grad(i) where grad_folded(i). Enqueue
  // only.
  // With `gather`, the pass first gathers its input from a dataset (kernels/data.cuh; into input(), with
  // the labels and the step's record): where the first group is a conv group run fused before the
  // loss's group, its forward kernel runs the gather in blocks of its own and reads the samples where
  // the dataset holds them (GatherLoad), so neither waits for the other; else a kernel of its own.
  template <class Loss>
  void loss_pass_fused(int batch, Mode mode, const kernels::LossRun<Loss>& loss, bool backward,
                       const kernels::GatherArgs* gather = nullptr) {
    check_batch(batch);
    constexpr std::size_t top = Loss::template grad_layer<Net>;
    constexpr std::size_t tg = fusion::group_of(top);
    constexpr FusedGroup grp = fusion::groups[tg];
    const bool gather_in_first = gather && tg > 0 && first_group_gathers(batch);
    refresh_wgmma_weights();
    if (gather && !gather_in_first) kernels::gather_normalize<int(plan::act_size[0])>(ctx_.stream, *gather);
    kernels::static_for<int(tg)>([&](auto g) {
      constexpr std::size_t gi = decltype(g)::value;
      if (gi == 0 && gather_in_first) gathering_group_forward<gi>(batch, mode, *gather);
      else group_forward<gi>(batch, mode, false);
    });
    wait_wgmma_weights();
    grad_folded_.fill(false);  // (before the top chain, which may fold the activation below it)
    stem_wgrad_folded_ = false;
    bool chain_done = false;   // the top chain's forward, loss and backward data are done
    using K = group_kernels<tg>;
    if constexpr (loss_in_chain<tg, top>()) {
      if (runs_fused<tg>(batch)) {
        if (backward) run_chain<tg, Loss, true>(batch, loss);
        else run_chain<tg, Loss, false>(batch, loss);
        chain_done = true;
      }
    }
    if (!chain_done) {
      group_forward<tg>(batch, mode, false);
      constexpr int width = int(plan::act_size[top + 1]);
      kernels::loss_forward_backward<Loss, width>(ctx_.stream, loss.options, activation(top + 1), loss.labels,
                                                  loss.targets, batch, backward ? activation_grad(top + 1) : nullptr,
                                                  loss.loss, loss.correct, top + 1 < L ? output() : nullptr,
                                                  loss.first, loss.first_stride);
      if constexpr (grp.kind == GroupKind::dense_chain && !std::is_void_v<K> && grp.last == top) {
        // A chain whose final Softmax is where the loss reads: the Softmax's own backward first.
        if (backward && std::is_same_v<typename Net::template layer_at<top>, Softmax> && runs_fused<tg>(batch)) {
          backward_layer<top>(batch, top);
          run_chain<tg, kernels::NoLoss, true>(batch, {});
          chain_done = true;
        }
      }
    }
    if (!backward) return;
    side_forked_ = false;
    group_backward<tg>(batch, top, chain_done);
    kernels::static_for<int(tg)>([&](auto g) { group_backward<tg - 1 - decltype(g)::value>(batch, top, false); });
    join_side();
  }

  // Whether the last fused backward (loss_pass_fused) folded the backward of activation layer i − 1
  // into layer i's (a Conv or a pooling: has_backward_data_act), which then wrote activation_grad(i − 1)
  // directly and left activation_grad(i) unwritten.
  bool grad_folded(std::size_t i) const { return i <= L && grad_folded_[i]; }
  // Whether it computed layer 0's weight gradient in layer 2's backward data (stem_wgrad_in), which then
  // wrote no activation_grad(1) either.
  bool stem_wgrad_folded() const { return stem_wgrad_folded_; }

  // Host copies (synchronous; not for use inside a step or during capture).
  std::vector<float> parameters() const { return download(region<float>(params_at), param_floats); }
  std::vector<float> gradients() const { return download(region<float>(grads_at), param_floats); }
  std::vector<float> state_values() const { return download(region<float>(state_at), plan::state_floats); }
  void set_parameters(const std::vector<float>& p) {
    if (p.size() != param_floats)
      throw std::invalid_argument("ctnn: set_parameters got " + std::to_string(p.size()) +
                                  " floats, expected " + std::to_string(param_floats) +
                                  " (BufferPlan::param_floats)");
    upload(params(), p.data(), p.size());
  }
  void set_state(const std::vector<float>& st) {
    if (st.size() != plan::state_floats)
      throw std::invalid_argument("ctnn: set_state got " + std::to_string(st.size()) + " floats, expected " +
                                  std::to_string(plan::state_floats) + " (BufferPlan::state_floats)");
    if (!st.empty()) upload(state(), st.data(), st.size());
  }
  // Batch-major copies of activation i (or its gradient) for `batch` samples.
  std::vector<float> download_activation(std::size_t i, int batch) const {
    check_batch(batch);
    return download(region<float>(acts_at) + plan::act_offset(i, MaxBatch), plan::act_size[i] * std::size_t(batch));
  }
  std::vector<float> download_activation_grad(std::size_t i, int batch) const {
    check_batch(batch);
    return download(region<float>(act_grads_at) + plan::act_offset(i, MaxBatch),
                    plan::act_size[i] * std::size_t(batch));
  }
  void upload_input(const float* x, int batch) {
    check_batch(batch);
    upload(input(), x, plan::act_size[0] * std::size_t(batch));
  }
  // Uploads the gradient at the output of layer `last` (what backward(batch, last) starts from).
  void upload_output_grad(const float* d, int batch, std::size_t last = L - 1) {
    check_batch(batch);
    upload(activation_grad(last + 1), d, plan::act_size[last + 1] * std::size_t(batch));
  }
  void synchronize() const { CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream)); }

  static void check_batch(int batch) {
    if (batch < 1 || batch > MaxBatch)
      throw std::invalid_argument("ctnn: batch of " + std::to_string(batch) + " is outside 1.." +
                                  std::to_string(MaxBatch) + " (the network's MaxBatch)");
  }

 private:
  template <class T>
  T* region(std::size_t at) const { return reinterpret_cast<T*>(arena_ + at); }

  float* saved(std::size_t i) {
    return plan::saved_size[i] ? region<float>(saved_at) + plan::saved_offset(i, MaxBatch) : nullptr;
  }

  template <std::size_t... I>
  void forward_layers(int batch, std::size_t last, Mode mode, std::index_sequence<I...>) {
    (forward_layer<I>(batch, last, mode), ...);
  }
  template <std::size_t i>
  void forward_layer(int batch, std::size_t last, Mode mode) {
    if constexpr (i > 0)  // (layer 0 always runs; comparing an unsigned with 0 draws a warning)
      if (i > last) return;
    ForwardArgs<float> a;
    a.w = params() + plan::weight_offset[i];
    a.b = params() + plan::bias_offset[i];
    a.state = plan::state_count[i] ? state() + plan::state_offset[i] : nullptr;
    a.x = activation(i);
    a.y = activation(i + 1);
    a.saved = saved(i);
    a.batch = batch;
    a.mode = mode;
    a.rng_key = layer_key(seed_, i);  // combined with *ctx.step on the device
    cuda_layer_forward<layer_kernels<i>>(ctx_, a);
  }

  template <std::size_t... I>
  void backward_layers(int batch, std::size_t last, std::index_sequence<I...>) {
    (backward_layer<L - 1 - I>(batch, last), ...);  // layers L-1..0, skipping those above last
  }
  template <std::size_t i>
  void backward_layer(int batch, std::size_t last, bool input_grad = true) {
    if constexpr (i > 0)
      if (i > last) return;
    using B = typename Net::template bound_at<i>;
    BackwardArgs<float> a;
    a.w = params() + plan::weight_offset[i];
    a.state = plan::state_count[i] ? state() + plan::state_offset[i] : nullptr;
    a.x = activation(i);
    a.y = activation(i + 1);
    a.dy = activation_grad(i + 1);
    a.saved = saved(i);
    a.dx = i == 0 || !input_grad ? nullptr : activation_grad(i);
    a.dw = B::weight_count ? grads() + plan::weight_offset[i] : nullptr;
    a.db = B::bias_count ? grads() + plan::bias_offset[i] : nullptr;
    a.batch = batch;
    cuda_layer_backward<layer_kernels<i>>(ctx_, a);
  }

  // ---- the fused plan ----
  // Whether group g is a fused chain that ends where the loss reads (the output of layer top).
  template <std::size_t g, std::size_t top>
  static constexpr bool loss_in_chain() {
    constexpr FusedGroup grp = fusion::groups[g];
    if constexpr (grp.kind == GroupKind::dense_chain && !std::is_void_v<group_kernels<g>>)
      return detail::chain_group_of<Net, grp.first, grp.last>::top == top;
    else
      return false;
  }

  // Whether conv group g starts with an RGB stem and its activation that the TF32 stem kernel runs
  // (cuda_layer<Conv>::has_stem_mma): with Math::tf32 an evaluation pass then runs the group layer by
  // layer, the stem kernel with the activation in its store, not the fused group's FP32 direct kernel
  // (docs/benchmarks.md, twenty-seventh stop). Training runs stems layer by layer already (min_batch).
  template <std::size_t g>
  bool stem_on_tensor_cores(Mode mode) const {
    constexpr FusedGroup grp = fusion::groups[g];
    if constexpr (grp.kind == GroupKind::conv && conv_then_activation<grp.first, grp.last>()) {
      if constexpr (requires { layer_kernels<grp.first>::has_stem_mma; })
        return layer_kernels<grp.first>::has_stem_mma && mode == Mode::eval && ctx_.math == Math::tf32;
    }
    return false;
  }

  // Forward of group g; forward_only: a pass without a loss (see runs_fused).
  template <std::size_t g>
  void group_forward(int batch, Mode mode, bool forward_only) {
    if constexpr (g == wgmma_group) wait_wgmma_weights();
    constexpr FusedGroup grp = fusion::groups[g];
    using K = group_kernels<g>;
    if (!runs_fused<g>(batch, forward_only) || (forward_only && stem_on_tensor_cores<g>(mode))) {
      if constexpr (grp.kind == GroupKind::dense_chain) return chain_layers_forward<grp.first, grp.last>(batch, mode);
      // A convolution followed by an activation runs both in one kernel (the activation in its store)
      // and writes the activation's slot; its own stays unwritten (nothing reads it: the activation's
      // backward reads its output).
      if constexpr (conv_then_activation<grp.first, grp.last>()) {
        conv_act_forward<grp.first>(batch);
        return kernels::static_for<int(grp.last - grp.first - 1)>(
            [&](auto i) { forward_layer<grp.first + 2 + decltype(i)::value>(batch, L - 1, mode); });
      }
      kernels::static_for<int(grp.last - grp.first + 1)>(
          [&](auto i) { forward_layer<grp.first + decltype(i)::value>(batch, L - 1, mode); });
    } else if constexpr (std::is_void_v<K>) {
      // (unreachable: runs_fused is false for a group without kernels)
    } else if constexpr (grp.kind == GroupKind::conv) {
      using G = typename K::G;
      conv_group_forward<g>(batch, mode, kernels::PlainLoad<G::C, G::H, G::W>{activation(grp.first)});
    } else {
      K::template run<kernels::NoLoss, false>(ctx_, chain_args<g>(batch), {});
    }
  }

  // The fused forward of conv group g with its input read through `x` (a Load: cuda_conv_group::forward).
  template <std::size_t g, class Load>
  void conv_group_forward(int batch, Mode mode, const Load& x) {
    using K = group_kernels<g>;
    constexpr FusedGroup grp = fusion::groups[g];
    void* keep = mode == Mode::train && K::keeps ? static_cast<void*>(activation(grp.last)) : nullptr;
    K::forward(ctx_, params() + plan::weight_offset[grp.first], params() + plan::bias_offset[grp.first], x,
               activation(grp.last + 1), keep, batch);
  }
  // The forward of conv group g (the first; first_group_gathers) reading its input from the dataset,
  // with the gather in blocks of its launch (loss_pass_fused).
  template <std::size_t g>
  void gathering_group_forward(int batch, Mode mode, const kernels::GatherArgs& gather) {
    if constexpr (g == wgmma_group) wait_wgmma_weights();
    if constexpr (fusion::groups[g].kind == GroupKind::conv && fused_group<g>) {
      using G = typename group_kernels<g>::G;
      conv_group_forward<g>(batch, mode, kernels::GatherLoad<G::C, G::H, G::W>{gather});
    }
  }

  // Whether layer i is a convolution followed, within the group ending at last, by an activation.
  template <std::size_t i, std::size_t last>
  static constexpr bool conv_then_activation() {
    if constexpr (i >= last) return false;
    else return detail::is_conv_layer<typename Net::template layer_at<i>>::value &&
                is_activation_layer_v<typename Net::template layer_at<i + 1>>;
  }
  // Layers i and i + 1 (conv, activation) as one kernel: cuda_layer<Conv>::forward_act.
  template <std::size_t i>
  void conv_act_forward(int batch) {
    using Fn = activation_fn_t<typename Net::template layer_at<i + 1>>;
    layer_kernels<i>::template forward_act<Fn>(ctx_, params() + plan::weight_offset[i], params() + plan::bias_offset[i],
                                               activation(i), activation(i + 2), batch);
  }

  // Layers i..last of a dense chain one by one (a group not run fused: a wide Dense's, or a chain at a
  // batch below its kernel's threshold): a Dense followed by ReLU runs as one product with ReLU in its
  // epilogue (kernels/dense_lt.cuh, or the split product's sum) and writes the ReLU's slot, not its own:
  // nothing reads it, in training either (the Dense's backward reads its input, ReLU's its output).
  template <std::size_t i, std::size_t last>
  static constexpr bool dense_then_relu() {
    if constexpr (i < last)
      return requires { &layer_kernels<i>::forward_relu; } && std::is_same_v<typename Net::template layer_at<i + 1>, ReLU>;
    else
      return false;
  }
  template <std::size_t i, std::size_t last>
  void chain_layers_forward(int batch, Mode mode) {
    if constexpr (i <= last) {
      if constexpr (dense_then_relu<i, last>()) {
        layer_kernels<i>::forward_relu(ctx_, params() + plan::weight_offset[i], params() + plan::bias_offset[i],
                                       activation(i), activation(i + 2), batch);
        chain_layers_forward<i + 2, last>(batch, mode);
      } else {
        forward_layer<i>(batch, L - 1, mode);
        chain_layers_forward<i + 1, last>(batch, mode);
      }
    }
  }

  // Layer i of the fused backward, layers above `top` skipped: as backward_layer, except that a layer
  // that folds the backward of the activation below it does so where that activation runs layer by
  // layer (its group is not fused at this batch) and the kernel has the epilogue (grad_folded); the
  // activation's own backward then launches nothing. A Conv's weight gradient goes to weights_context(i),
  // its data gradient to stream(); so does a large Dense's where its weight gradient needs no cuBLAS
  // (the second stream has no handle).
  template <std::size_t i>
  void backward_layer_folding(int batch, std::size_t top) {
    if constexpr (is_activation_layer_v<typename Net::template layer_at<i>>)
      if (grad_folded_[i + 1]) return;
    if constexpr (i > 0)
      if (i > top) return;
    constexpr bool conv = detail::is_conv_layer<typename Net::template layer_at<i>>::value;
    if constexpr (conv)
      if (i > 0 || !stem_wgrad_folded_)
        layer_kernels<i>::template backward_weights_with<ConvAlgo::automatic>(
            weights_context(i), activation(i), activation_grad(i + 1), grads() + plan::weight_offset[i],
            grads() + plan::bias_offset[i], batch);
    if constexpr (folds_activation_below<i>()) {
      if (!runs_fused<fusion::group_of(i - 1)>(batch)) {
        using Fn = activation_fn_t<typename Net::template layer_at<i - 1>>;
        if constexpr (stem_wgrad_in<i>())
          if (layer_kernels<i>::template backward_data_act_stem_wgrad<typename layer_kernels<0>::dims, Fn>(
                  ctx_, params() + plan::weight_offset[i], activation(i), activation_grad(i + 1), activation(0),
                  grads() + plan::weight_offset[0], grads() + plan::bias_offset[0], batch)) {
            grad_folded_[i] = stem_wgrad_folded_ = true;
            return;
          }
        grad_folded_[i] = layer_kernels<i>::template backward_data_act<Fn>(
            ctx_, params() + plan::weight_offset[i], activation(i), activation_grad(i + 1), activation_grad(i - 1), batch);
        if (grad_folded_[i]) return;  // (a pooling has no parameters; a Conv's weight gradient is above)
      }
    }
    if constexpr (requires { layer_kernels<i>::large; &layer_kernels<i>::weights_use_blas; })
      if (layer_kernels<i>::large && i > 0 && concurrent_weight_gradients_ &&
          (!layer_kernels<i>::weights_use_blas(batch) || layer_kernels<i>::on_tensor_cores(ctx_.math))) {
        // A large Dense (a CIFAR head: ~10 µs of weight gradient at batch 64) whose weight gradient needs
        // no cuBLAS: that beside, its data gradient on stream().
        layer_kernels<i>::backward_weights(weights_context(i), activation(i), activation_grad(i + 1),
                                           grads() + plan::weight_offset[i], grads() + plan::bias_offset[i], batch);
        layer_kernels<i>::backward_data(ctx_, params() + plan::weight_offset[i], activation_grad(i + 1),
                                        activation_grad(i), batch);
        if (parameters_done_) {  // its parameters, once the data gradient (which reads the weights) is done
          CTNN_CUDA_CHECK(cudaEventRecord(fork_, ctx_.stream));
          CTNN_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_, 0));
          parameters_done_(plan::weight_offset[i], params_end(i) - plan::weight_offset[i], side_stream_);
        }
        return;
      }
    if constexpr (!conv) backward_layer<i>(batch, top);
    else if constexpr (i > 0)
      layer_kernels<i>::template backward_data_with<ConvAlgo::automatic>(
          ctx_, params() + plan::weight_offset[i], activation_grad(i + 1), activation_grad(i), batch);
  }

  // The end of layer i's block of parameter floats (its weights, its bias, their padding): where the
  // next layer's begins.
  static constexpr std::size_t params_end(std::size_t i) {
    return i + 1 < L ? plan::weight_offset[i + 1] : plan::param_floats;
  }

  // The context for the weight gradient of layer i in the fused backward: the second stream, once it has
  // waited for everything enqueued on stream() so far, with its own workspace and tickets (the data
  // gradients running beside it on stream() use the first ones). Its kernels use no cuBLAS. Layer 0's
  // stays on stream(): no data gradient follows it, and there it need not queue behind the second
  // stream's. With concurrent_weight_gradients off: ctx_ itself.
  CudaContext weights_context(std::size_t i) {
    if (!concurrent_weight_gradients_ || i == 0) return ctx_;
    CTNN_CUDA_CHECK(cudaEventRecord(fork_, ctx_.stream));
    CTNN_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_, 0));
    side_forked_ = true;
    CudaContext side = ctx_;
    side.stream = side_stream_;
    side.blas = nullptr;
    side.blas_lt = nullptr;
    side.workspace = region<float>(side_workspace_at);
    side.tickets = region<unsigned>(side_tickets_at);
    return side;
  }
  // stream() waits for the second stream's work (the end of the fused backward).
  void join_side() {
    if (!side_forked_) return;
    CTNN_CUDA_CHECK(cudaEventRecord(join_, side_stream_));
    CTNN_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, join_, 0));
    side_forked_ = false;
  }

  // Backward of group g from the gradient at its output (layers above `top` skipped); a chain whose
  // backward data is done (chain_done) computes its weight gradients only.
  template <std::size_t g>
  void group_backward(int batch, std::size_t top, bool chain_done) {
    constexpr FusedGroup grp = fusion::groups[g];
    using K = group_kernels<g>;
    if (!runs_fused<g>(batch)) {
      kernels::static_for<int(grp.last - grp.first + 1)>(
          [&](auto i) { backward_layer_folding<grp.last - decltype(i)::value>(batch, top); });
    } else if constexpr (std::is_void_v<K>) {
      // (unreachable: runs_fused is false for a group without kernels)
    } else if constexpr (grp.kind == GroupKind::conv) {
      constexpr std::size_t i = grp.first;
      const float* dy = activation_grad(grp.last + 1);
      const void* keep = K::keeps ? activation(grp.last) : nullptr;
      K::backward_weights(weights_context(i), activation(i), activation(grp.last + 1), dy, keep,
                          grads() + plan::weight_offset[i], grads() + plan::bias_offset[i], batch);
      if constexpr (i > 0)
        K::backward_data(ctx_, params() + plan::weight_offset[i], activation(grp.last + 1), dy, keep,
                         activation_grad(i), batch);
    } else {
      if (!chain_done) run_chain<g, kernels::NoLoss, true>(batch, {});
      using C = detail::chain_group_of<Net, grp.first, grp.last>;
      kernels::DenseChainGrads<C::S> a;
      kernels::static_for<C::S>([&](auto stage) {
        constexpr int l = decltype(stage)::value;
        constexpr std::size_t d = C::template dense_at<l>;
        if constexpr (l == 0) a.x[l] = activation(grp.first);
        else a.x[l] = activation(C::template out_at<l - 1>);
        a.dpre[l] = activation_grad(d + 1);
        a.dw[l] = grads() + plan::weight_offset[d];
        a.db[l] = grads() + plan::bias_offset[d];
      });
      a.batch = batch;
      K::weights(weights_context(grp.first), a);
    }
  }

  // Whether chain group g does the backward of the activation layer right below it (layer
  // grp.first − 1, not layer 0): where that activation runs as a layer of its own (its group has no fused
  // kernels: a wide Dense's, or it stands alone), the chain's gradient at its input goes through the
  // activation's derivative to activation_grad(grp.first − 1), and the activation's backward launches
  // nothing (grad_folded_).
  template <std::size_t g>
  static constexpr bool chain_folds_below() {
    constexpr FusedGroup grp = fusion::groups[g];
    if constexpr (grp.kind != GroupKind::dense_chain || grp.first < 2) return false;
    else if constexpr (!is_activation_layer_v<typename Net::template layer_at<grp.first - 1>>) return false;
    else return !fused_group<fusion::group_of(grp.first - 1)>;
  }

  // Chain group g's kernel (cuda_dense_chain::run) for `batch` samples; in backward with the activation
  // below folded in where chain_folds_below.
  template <std::size_t g, class Loss, bool Backward>
  void run_chain(int batch, const kernels::LossRun<Loss>& loss) {
    using K = group_kernels<g>;
    auto a = chain_args<g>(batch);
    if constexpr (Backward && chain_folds_below<g>()) {
      constexpr std::size_t first = fusion::groups[g].first;
      a.dx = activation_grad(first - 1);
      grad_folded_[first] = true;
      K::template run<Loss, true, activation_fn_t<typename Net::template layer_at<first - 1>>>(ctx_, a, loss);
    } else {
      K::template run<Loss, Backward>(ctx_, a, loss);
    }
  }

  template <std::size_t g>
  auto chain_args(int batch) {
    constexpr FusedGroup grp = fusion::groups[g];
    using C = detail::chain_group_of<Net, grp.first, grp.last>;
    kernels::DenseChainArgs<C::S> a;
    a.x = activation(grp.first);
    kernels::static_for<C::S>([&](auto stage) {
      constexpr int l = decltype(stage)::value;
      constexpr std::size_t d = C::template dense_at<l>;
      a.w[l] = params() + plan::weight_offset[d];
      a.b[l] = params() + plan::bias_offset[d];
      a.pre[l] = activation(d + 1);
      a.out[l] = activation(C::template out_at<l>);
      a.dpre[l] = activation_grad(d + 1);
    });
    a.probs = C::softmax ? activation(grp.last + 1) : nullptr;
    a.dtop = activation_grad(C::top + 1);
    a.dx = grp.first == 0 ? nullptr : activation_grad(grp.first);
    a.batch = batch;
    return a;
  }

  // The TF32 copies of the wgmma layers' weights from params(), where the context keeps them: one launch
  // at the start of each pass, since the weights may have changed since the last (an optimizer step,
  // set_parameters). On the second stream, beside the pass's first kernels (the gather, an RGB stem),
  // which do not read them; stream() waits for them before the first group that does (wait_wgmma_weights).
  void refresh_wgmma_weights() {
    if constexpr (wgmma_layers > 0) {
      if (!ctx_.wgmma_weights) return;
      CTNN_CUDA_CHECK(cudaEventRecord(fork_, ctx_.stream));
      CTNN_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_, 0));
      kernels::WgmmaWeightsJobs<int(2 * wgmma_layers)> jobs{};
      int at = 0;
      kernels::static_for<int(L)>([&](auto i) {
        constexpr std::size_t I = decltype(i)::value;
        if constexpr (wgmma_layer<I>()) {
          float* fwd = region<float>(wgmma_at) + (plan::weight_offset[I] - wgmma_first);
          kernels::WgmmaWeightsJob two[2];
          layer_kernels<I>::wgmma_jobs(params() + plan::weight_offset[I], fwd, fwd + wgmma_span, two);
          jobs.job[at++] = two[0], jobs.job[at++] = two[1];
        }
      });
      kernels::launch_wgmma_weights(side_stream_, jobs);
      CTNN_CUDA_CHECK(cudaEventRecord(wgmma_ready_, side_stream_));
      wgmma_pending_ = true;
    }
  }
  void wait_wgmma_weights() {
    if (!wgmma_pending_) return;
    CTNN_CUDA_CHECK(cudaStreamWaitEvent(ctx_.stream, wgmma_ready_, 0));
    wgmma_pending_ = false;
  }

  template <class T>
  std::vector<T> download(const T* src, std::size_t n) const {
    std::vector<T> h(n);
    CTNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), src, n * sizeof(T), cudaMemcpyDeviceToHost, ctx_.stream));
    CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
    return h;
  }
  template <class T>
  void upload(T* dst, const T* src, std::size_t n) {
    CTNN_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyHostToDevice, ctx_.stream));
    CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));  // src is pageable and may die after return
  }

  void release() noexcept {
    if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
    if (side_stream_) cudaStreamSynchronize(side_stream_);
    if (fork_) cudaEventDestroy(fork_);
    if (join_) cudaEventDestroy(join_);
    if (wgmma_ready_) cudaEventDestroy(wgmma_ready_);
    wgmma_ready_ = nullptr;
    if (side_stream_) cudaStreamDestroy(side_stream_);
    fork_ = join_ = nullptr;
    side_stream_ = nullptr;
    if (ctx_.blas_lt) cublasLtDestroy(ctx_.blas_lt);
    if (ctx_.blas) cublasDestroy(ctx_.blas);
    if (arena_) cudaFree(arena_);
    if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
    ctx_ = {};
    arena_ = nullptr;
  }

  CudaContext ctx_{};
  cudaStream_t side_stream_ = nullptr;  // the weight gradients of the fused backward (weights_context)
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  cudaEvent_t wgmma_ready_ = nullptr;  // the wgmma copies of this pass are made (refresh_wgmma_weights)
  bool wgmma_pending_ = false;         // stream() has not waited for them yet
  ParametersDone parameters_done_;  // see on_parameters_done
  bool side_forked_ = false;  // the second stream has work that stream() has not yet waited for
  bool concurrent_weight_gradients_ = true;
  std::array<bool, L + 1> grad_folded_{};  // see grad_folded
  bool stem_wgrad_folded_ = false;         // see stem_wgrad_folded
  std::uint64_t seed_ = 0;
  bool wgmma_device_ = false;  // the device code has wgmma (kernels::conv_wgmma_available, at construction)
  std::byte* arena_ = nullptr;
};

}  // namespace ctnn
