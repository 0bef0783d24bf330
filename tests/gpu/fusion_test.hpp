#pragma once
// Shared by test_fusion_*.cu: a network's fused passes (CudaNetwork::forward_fused, loss_pass_fused;
// network/fusion.hpp) against the host reference (HostNetwork<Net, float> and the loss's host
// function) from identical parameters, on fresh random inputs and labels, every device output
// poisoned first, at batch 1, an odd batch and MaxBatch:
//   1. evaluation: the fused forward's output and every fused group's output slot it writes;
//   2. training: the loss of each sample, every parameter gradient, the gradient at each group's input,
//      the padding between gradient tensors left at zero; the conv groups' outputs bitwise equal to
//      the layer-by-layer forward's (the same sums in the same order); a second pass gives the same
//      bits (the in-kernel reductions' counters are back at zero, their order fixed), and so does one
//      with the weight gradients on the network's stream instead of its second one.
// The host backward starts from the device's activations (those of the layer-by-layer forward,
// replaced by the fused pass's where it wrote any), so that a ReLU or max-pool decision that rounding
// tipped the other way cannot make the gradients disagree; the forward itself is compared in 1.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <ctnn/core/cuda_graph.hpp>
#include <ctnn/ctnn.hpp>
#include <ctnn/network/cuda_network.hpp>
#include <ctnn/network/fusion.hpp>
#include <ctnn/network/host_network.hpp>

#include "kernel_test.hpp"

namespace fusion_test {

using namespace ctnn;
using ctnn_test::Tally;

constexpr int max_batch = 64;

inline bool compare(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  // As test_network.cu: relative 2e-4 and a floor scaled by the tensor's magnitude.
  return ctnn_test::close(got, want, what.c_str(), 2e-4, 1e-7 + 2e-5 * ctnn_test::max_abs(want));
}

inline void poison(cudaStream_t stream, void* device, std::size_t bytes) {
  CTNN_CUDA_CHECK(cudaMemsetAsync(device, 0xFF, bytes, stream));
}

template <class T>
std::vector<T> slice(const std::vector<T>& v, std::size_t at, std::size_t n) {
  return std::vector<T>(v.begin() + std::ptrdiff_t(at), v.begin() + std::ptrdiff_t(at + n));
}

// Returns how many activation backward passes the fused passes folded into the layer above (grad_folded).
// MaxBatch: the network's (and the largest batch tested).
template <class Net, class Loss, int MaxBatch = max_batch>
int test_network(Tally& t, const char* name, std::uint64_t seed, std::vector<int> batches = {1, 37, MaxBatch}) {
  if (!ctnn_test::case_selected(name)) return 0;
  using Gpu = CudaNetwork<Net, MaxBatch>;
  using plan = BufferPlan<Net>;
  using fusion = FusionPlan<Net>;
  constexpr std::size_t L = Net::layer_count;
  constexpr std::size_t top = Loss::template grad_layer<Net>;
  constexpr std::size_t tg = fusion::group_of(top);
  constexpr int width = int(plan::act_size[top + 1]);

  HostNetwork<Net, float> host(MaxBatch, seed);
  Gpu gpu(seed);
  const cudaStream_t s = gpu.stream();
  ctnn_test::DeviceBuffer<std::int32_t> d_labels(MaxBatch), d_correct(MaxBatch);
  ctnn_test::DeviceBuffer<float> d_loss(MaxBatch);
  kernels::LossRun<Loss> run;
  run.labels = d_labels.ptr, run.loss = d_loss.ptr, run.correct = d_correct.ptr;

  // Which slots the fused pass writes: each group's output, a dense chain's every slot (below the
  // loss's layer in training).
  auto written = [&](std::size_t slot) {
    bool w = false;
    for (std::size_t g = 0; g < fusion::group_count; ++g) {
      const FusedGroup grp = fusion::groups[g];
      if (slot == grp.last + 1) w = true;
      if (grp.kind != GroupKind::conv && slot > grp.first && slot <= grp.last + 1) w = true;
    }
    return w;
  };
  // The fused forward without a loss writes those too, except the slot of a Dense that ReLU follows in
  // a chain run layer by layer (ReLU is its product's epilogue there).
  std::vector<bool> dense_then_relu(L + 1, false);  // by the Dense's output slot
  kernels::static_for<int(L) - 1>([&](auto i) {
    constexpr std::size_t d = decltype(i)::value;
    dense_then_relu[d + 1] = detail::is_dense_layer<typename Net::template layer_at<d>>::value &&
                             std::is_same_v<typename Net::template layer_at<d + 1>, ReLU>;
  });
  auto written_in_forward = [&](std::size_t slot, int batch) {
    if (!written(slot)) return false;
    if (!dense_then_relu[slot]) return true;
    bool chain_fused = false;  // whether the chain holding this slot runs fused in the forward
    kernels::static_for<int(fusion::group_count)>([&](auto gi) {
      constexpr std::size_t g = decltype(gi)::value;
      if (fusion::groups[g].kind == GroupKind::dense_chain && slot > fusion::groups[g].first &&
          slot <= fusion::groups[g].last + 1)
        chain_fused = Gpu::template runs_fused<g>(batch, true);
    });
    return chain_fused;
  };
  auto group_fused = [&](std::size_t g) {
    bool f = false;
    kernels::static_for<int(fusion::group_count)>([&](auto gi) {
      if (std::size_t(decltype(gi)::value) == g) f = Gpu::template fused_group<decltype(gi)::value>;
    });
    return f;
  };

  int total_folds = 0;
  for (int batch : batches) {
    const std::string tag = std::string(name) + " batch " + std::to_string(batch) + ": ";
    const std::uint64_t case_seed = seed * 1000 + std::uint64_t(batch);
    const std::vector<float> x = ctnn_test::random_vector(plan::act_size[0] * std::size_t(batch), case_seed);
    std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
    {
      Random rng(case_seed + 7);
      for (auto& l : labels) l = std::int32_t(rng.below(std::uint64_t(width)));
    }
    CTNN_CUDA_CHECK(cudaMemcpy(d_labels.ptr, labels.data(), labels.size() * sizeof(std::int32_t),
                               cudaMemcpyHostToDevice));
    auto poison_all = [&] {
      poison(s, gpu.activation(1), (Gpu::activation_floats - plan::act_offset(1, MaxBatch)) * sizeof(float));
      poison(s, gpu.activation_grad(0), Gpu::activation_floats * sizeof(float));
      for (std::size_t i = 0; i < L; ++i) {
        poison(s, gpu.grads() + plan::weight_offset[i], plan::weight_count[i] * sizeof(float));
        poison(s, gpu.grads() + plan::bias_offset[i], plan::bias_count[i] * sizeof(float));
      }
      poison(s, d_loss.ptr, MaxBatch * sizeof(float));
      poison(s, d_correct.ptr, MaxBatch * sizeof(std::int32_t));
    };

    // 1. Evaluation: the fused groups' forward against the host's (from the same layer state: the
    // training passes below update running statistics a different number of times on each side).
    gpu.set_state(host.state());
    poison_all();
    gpu.upload_input(x.data(), batch);
    gpu.forward_groups(batch);
    gpu.synchronize();
    host.forward(x.data(), batch, Mode::eval);
    for (std::size_t i = 1; i <= L; ++i) {
      if (!written_in_forward(i, batch)) continue;
      const float* h = host.activation(i, batch);
      t(compare(gpu.download_activation(i, batch), std::vector<float>(h, h + plan::act_size[i] * std::size_t(batch)),
                tag + "evaluation, output of layer " + std::to_string(i - 1)));
    }
    // The network kernel's forward (network_forward.cuh), and forward_fused (whichever it runs).
    const float* host_out = host.activation(L, batch);
    const std::vector<float> want_out(host_out, host_out + plan::act_size[L] * std::size_t(batch));
    if constexpr (Gpu::has_network_kernel) {
      poison_all();
      gpu.upload_input(x.data(), batch);
      gpu.forward_network_kernel(batch);
      gpu.synchronize();
      t(compare(gpu.download_activation(L, batch), want_out, tag + "evaluation, the network kernel's output"));
    }
    poison_all();
    gpu.upload_input(x.data(), batch);
    gpu.forward_fused(batch);
    gpu.synchronize();
    t(compare(gpu.download_activation(L, batch), want_out,
              tag + "evaluation, forward_fused's output (" +
                  (Gpu::runs_network_kernel(batch) ? "network kernel"
                   : Gpu::runs_tail_kernel(batch)  ? "groups, then the tail kernel from layer " + std::to_string(Gpu::tail_first)
                                                   : "groups") + ")"));

    // The layer-by-layer training forward: every slot, for the host backward below.
    poison_all();
    gpu.upload_input(x.data(), batch);
    gpu.forward(batch, L - 1, Mode::train);
    gpu.synchronize();
    std::vector<std::vector<float>> layered(L + 1);
    for (std::size_t i = 1; i <= L; ++i) layered[i] = gpu.download_activation(i, batch);

    // 2. Training: the fused loss pass with backward.
    poison_all();
    gpu.upload_input(x.data(), batch);
    gpu.loss_pass_fused(batch, Mode::train, run, true);
    gpu.synchronize();
    const std::vector<float> grads = gpu.gradients();
    std::vector<std::vector<float>> fused(L + 1), fused_dx(L + 1);
    for (std::size_t i = 1; i <= top + 1; ++i) fused[i] = gpu.download_activation(i, batch);
    for (std::size_t i = 1; i <= top; ++i) fused_dx[i] = gpu.download_activation_grad(i, batch);
    std::vector<bool> folded(L + 1, false);  // activation_grad(i) unwritten: layer i folded activation i − 1
    for (std::size_t i = 1; i <= L; ++i) folded[i] = gpu.grad_folded(i);
    const std::vector<float> loss = d_loss.download();
    const std::vector<std::int32_t> correct = d_correct.download();

    // Conv groups: the same bits as the layers one by one.
    for (std::size_t g = 0; g <= tg; ++g)
      if (fusion::groups[g].kind == GroupKind::conv && group_fused(g)) {
        const std::size_t o = fusion::groups[g].last + 1;
        t(ctnn_test::same_bits(fused[o], layered[o], (tag + "conv group " + std::to_string(g) +
                                                      " output equals the layers' one by one").c_str()));
      }

    // The host from the device's activations, the fused pass's where it wrote them.
    host.forward(x.data(), batch, Mode::train);  // (saved buffers, layer state)
    for (std::size_t i = 1; i <= top + 1; ++i) {
      const std::vector<float>& a = written(i) ? fused[i] : layered[i];
      std::copy(a.begin(), a.end(), host.activation(i, batch));
    }
    const std::size_t nb = static_cast<std::size_t>(batch);
    std::vector<float> grad(nb * width), loss_h(nb), probs(nb * width);
    std::vector<std::int32_t> correct_h(nb);
    Loss::host(run.options, host.activation(top + 1, batch), labels.data(), nullptr, batch, width, grad.data(),
               loss_h.data(), correct_h.data(), probs.data());
    t(compare(slice(loss, 0, std::size_t(batch)), loss_h, tag + "loss of each sample"));
    t(ctnn_test::same_bits(slice(correct, 0, std::size_t(batch)), correct_h, (tag + "correct flags").c_str()));
    host.backward(grad.data(), batch, top);
    for (std::size_t i = 0; i <= top; ++i) {
      if (plan::weight_count[i]) {
        t(compare(slice(grads, plan::weight_offset[i], plan::weight_count[i]),
                  slice(host.grads(), plan::weight_offset[i], plan::weight_count[i]),
                  tag + "weight gradient of layer " + std::to_string(i)));
        // A bias gradient is a sum over the batch and positions of the gradient at the layer's output
        // and may cancel to near zero (a BatchNorm after the layer makes it zero): its rounding is
        // bounded by the sum of the terms' magnitudes, about 1e-7 of it in float; allowed: 1e-6.
        double terms = 0;
        const float* dy = host.activation_grad(i + 1, batch);
        for (std::size_t k = 0; k < plan::act_size[i + 1] * std::size_t(batch); ++k) terms += std::fabs(dy[k]);
        const std::vector<float> want = slice(host.grads(), plan::bias_offset[i], plan::bias_count[i]);
        t(ctnn_test::close(slice(grads, plan::bias_offset[i], plan::bias_count[i]), want,
                           (tag + "bias gradient of layer " + std::to_string(i)).c_str(), 2e-4,
                           1e-7 + 2e-5 * ctnn_test::max_abs(want) + 1e-6 * terms / double(plan::bias_count[i])));
      }
    }
    // The gradient at each group's input (group 0 has none); where the group's first layer folded the
    // activation below it, the gradient at that activation's input instead, and at any layer that
    // folded one inside a group.
    for (std::size_t g = 1; g <= tg; ++g) {
      const std::size_t first = fusion::groups[g].first;
      const std::size_t i = folded[first] ? first - 1 : first;
      if (i == 1 && gpu.stem_wgrad_folded()) continue;  // (the stem's weight gradient read it in layer 2)
      const float* h = host.activation_grad(i, batch);
      t(compare(fused_dx[i], std::vector<float>(h, h + plan::act_size[i] * std::size_t(batch)),
                tag + "gradient at the input of layer " + std::to_string(i) +
                    (folded[first] ? " (the activation's backward in layer " + std::to_string(first) + "'s)" : "")));
    }
    for (std::size_t i = 2; i <= top; ++i) {
      if (!folded[i] || fusion::group_of(i) != fusion::group_of(i - 1)) continue;
      const float* h = host.activation_grad(i - 1, batch);
      t(compare(fused_dx[i - 1], std::vector<float>(h, h + plan::act_size[i - 1] * std::size_t(batch)),
                tag + "gradient at the input of layer " + std::to_string(i - 1) + " (the activation's backward in layer " +
                    std::to_string(i) + "'s)"));
    }
    int folds = 0;
    for (std::size_t i = 1; i <= L; ++i) folds += folded[i];
    std::printf("     %sactivation backward passes folded into the layer above: %d\n", tag.c_str(), folds);
    total_folds += folds;
    {
      bool zero = true;
      for (std::size_t i = 0; i < L; ++i) {
        const std::size_t next = i + 1 < L ? plan::weight_offset[i + 1] : plan::param_floats;
        for (std::size_t k = plan::weight_offset[i] + plan::weight_count[i]; k < plan::bias_offset[i]; ++k)
          zero = zero && grads[k] == 0.f;
        for (std::size_t k = plan::bias_offset[i] + plan::bias_count[i]; k < next; ++k) zero = zero && grads[k] == 0.f;
      }
      std::printf("%s %sgradient padding untouched\n", zero ? "ok  " : "FAIL", tag.c_str());
      t(zero);
    }

    // The same pass again: the same bits.
    poison_all();
    gpu.upload_input(x.data(), batch);
    gpu.loss_pass_fused(batch, Mode::train, run, true);
    gpu.synchronize();
    t(ctnn_test::same_bits(gpu.gradients(), grads, (tag + "a second pass gives the same gradients").c_str()));

    // With the weight gradients on stream() after the data gradients, not on the second stream beside
    // them: the same bits again.
    poison_all();
    gpu.set_concurrent_weight_gradients(false);
    gpu.upload_input(x.data(), batch);
    gpu.loss_pass_fused(batch, Mode::train, run, true);
    gpu.synchronize();
    gpu.set_concurrent_weight_gradients(true);
    t(ctnn_test::same_bits(gpu.gradients(), grads,
                           (tag + "the weight gradients one after another on one stream give the same bits").c_str()));
  }
  return total_folds;
}

// The network kernel alone (kernels/network_forward.cuh) against the host's evaluation forward, from
// random parameters and random layer state (running means around 0, variances in [0.5, 2]), on fresh
// random inputs, the output poisoned first: for networks whose layers the training test above does not
// take (Dropout's training masks differ by design from nothing; GlobalAvgPool).
template <class Net>
void test_network_kernel(Tally& t, const char* name, std::uint64_t seed, std::vector<int> batches = {1, 5, max_batch}) {
  using Gpu = CudaNetwork<Net, max_batch>;
  using plan = BufferPlan<Net>;
  constexpr std::size_t L = Net::layer_count;
  static_assert(Gpu::has_network_kernel, "the network kernel test takes networks that have one");
  HostNetwork<Net, float> host(max_batch, seed);
  Gpu gpu(seed);
  Random rng(seed + 11);
  for (std::size_t i = 0; i < L; ++i)  // BatchNorm's state: running mean, running variance, count
    for (std::size_t k = 0; k + 1 < plan::state_count[i]; ++k) {
      const std::size_t c = (plan::state_count[i] - 1) / 2;
      host.state()[plan::state_offset[i] + k] = k < c ? float(rng.uniform() - 0.5) : float(0.5 + 1.5 * rng.uniform());
    }
  gpu.set_state(host.state());
  for (int batch : batches) {
    const std::string tag = std::string(name) + " batch " + std::to_string(batch) + ": ";
    const std::vector<float> x = ctnn_test::random_vector(plan::act_size[0] * std::size_t(batch), seed * 1000 + std::uint64_t(batch));
    poison(gpu.stream(), gpu.output(), plan::act_size[L] * max_batch * sizeof(float));
    gpu.upload_input(x.data(), batch);
    gpu.forward_network_kernel(batch);
    gpu.synchronize();
    const float* h = host.forward(x.data(), batch, Mode::eval);
    t(compare(gpu.download_activation(L, batch), std::vector<float>(h, h + plan::act_size[L] * std::size_t(batch)),
              tag + "the network kernel's output"));
  }
}

// Kernel launches of forward_fused at `batch`, counted from a captured graph.
template <class Net>
std::size_t forward_kernels(int batch) {
  CudaNetwork<Net, max_batch> gpu(1);
  CudaGraph graph;
  graph.capture(gpu.stream(), [&] { gpu.forward_fused(batch); });
  return graph.node_counts().kernels;
}

// Kernel launches of one fused training pass, counted from a captured graph.
template <class Net, class Loss>
std::size_t fused_pass_kernels(int batch) {
  CudaNetwork<Net, max_batch> gpu(1);
  ctnn_test::DeviceBuffer<std::int32_t> d_labels(max_batch), d_correct(max_batch);
  ctnn_test::DeviceBuffer<float> d_loss(max_batch);
  ctnn_test::fill_bytes_and_wait(d_labels.ptr, 0, max_batch * sizeof(std::int32_t));
  kernels::LossRun<Loss> run;
  run.labels = d_labels.ptr, run.loss = d_loss.ptr, run.correct = d_correct.ptr;
  CudaGraph graph;
  graph.capture(gpu.stream(), [&] { gpu.loss_pass_fused(batch, Mode::train, run, true); });
  return graph.node_counts().kernels;
}

}  // namespace fusion_test
