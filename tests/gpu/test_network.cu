// Whole-network forward and backward on the GPU (CudaNetwork) against the host reference
// (HostNetwork<Net, float>) from identical parameters, on fresh random inputs, with every device
// output poisoned first: LeNet-5, an RGB network with strided, padded and dilated convolutions and
// average pooling, and an MLP, each at batch 1, 37 and MaxBatch.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/network/cuda_network.hpp>
#include <ctnn/network/host_network.hpp>

#include "gpu_test.hpp"

namespace {

using namespace ctnn;

using LeNet5 = models::LeNet5;
// 3x32x32 -> 8x16x16 (stride 2, pad 2) -> avg 8x8x8 -> 12x8x8 (dilated, pad 2) -> max 12x4x4
// (stride 2, pad 1 window 3) -> dense.
using RgbNet = Network<Seq<Conv<8, 5, Stride<2>, Pad<2>>, Tanh, AvgPool<2>,
                           Conv<12, 3, Pad<2>, Dilation<2>>, ReLU, Pool<3, Stride<2>, Pad<1>>,
                           Dense<32>, Sigmoid,
                           Dense<10>, Softmax>,
                       Input<3, 32, 32>>;
using Mlp = Network<Seq<Dense<96>, Sigmoid, Dense<48>, ReLU, Dense<10>, Softmax>, Input<3, 8, 8>>;

constexpr int max_batch = 64;

int passed = 0, failed = 0;
void check(bool ok) { ok ? ++passed : ++failed; }

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}
// Float against a reference computed in float with double accumulation: relative error 2e-4, plus
// an absolute floor scaled by the tensor's magnitude for elements that cancel to near zero. (On an
// H100 the worst element used under 2% of this.)
bool compare(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  return ctnn_test::close(got, want, what.c_str(), 2e-4, 1e-7 + 2e-5 * max_abs(want));
}

// Fills with NaN bit patterns, on the network's stream (a non-blocking stream: work on the legacy
// default stream would not be ordered with it).
void poison(cudaStream_t stream, float* device, std::size_t floats) {
  CTNN_CUDA_CHECK(cudaMemsetAsync(device, 0xFF, floats * sizeof(float), stream));
}

template <class Net>
void test_network(const char* name, std::uint64_t seed) {
  using Gpu = CudaNetwork<Net, max_batch>;
  using plan = BufferPlan<Net>;
  constexpr std::size_t L = Net::layer_count;
  // Where training's gradient arrives: below a final Softmax (fused with the loss), else the last layer.
  constexpr std::size_t top = std::is_same_v<typename Net::template layer_at<L - 1>, Softmax> ? L - 2 : L - 1;
  static_assert(Gpu::arena_bytes >= plan::training_floats(max_batch) * sizeof(float),
                "the arena holds at least what the plan says training needs");

  HostNetwork<Net, float> host(max_batch, seed);
  Gpu gpu(seed);
  {  // Same initialisation on both sides, bit for bit.
    const std::vector<float> p = gpu.parameters();
    const bool same = p.size() == host.params().size() &&
                      std::memcmp(p.data(), host.params().data(), p.size() * sizeof(float)) == 0;
    std::printf("%s %s: GPU parameters equal the host's after initialisation\n", same ? "ok  " : "FAIL", name);
    check(same);
  }

  for (int batch : {1, 37, max_batch}) {
    const std::string tag = std::string(name) + " batch " + std::to_string(batch) + ": ";
    const std::uint64_t case_seed = seed * 1000 + std::uint64_t(batch);
    const std::vector<float> x = ctnn_test::random_vector(plan::act_size[0] * std::size_t(batch), case_seed);
    const std::vector<float> dlogits =
        ctnn_test::random_vector(plan::act_size[top + 1] * std::size_t(batch), case_seed + 1, -0.5f, 0.5f);

    // Poison every activation, every activation gradient and every gradient tensor (the alignment
    // padding between gradient tensors must stay zero, so it is left alone).
    poison(gpu.stream(), gpu.activation(0), Gpu::activation_floats);
    poison(gpu.stream(), gpu.activation_grad(0), Gpu::activation_floats);
    for (std::size_t i = 0; i < L; ++i) {
      poison(gpu.stream(), gpu.grads() + plan::weight_offset[i], plan::weight_count[i]);
      poison(gpu.stream(), gpu.grads() + plan::bias_offset[i], plan::bias_count[i]);
    }

    // Forward: every layer's output.
    host.forward(x.data(), batch);
    gpu.upload_input(x.data(), batch);
    gpu.forward(batch);
    gpu.synchronize();
    for (std::size_t i = 1; i <= L; ++i) {
      const float* h = host.activation(i, batch);
      const std::vector<float> want(h, h + plan::act_size[i] * std::size_t(batch));
      check(compare(gpu.download_activation(i, batch), want, tag + "output of layer " + std::to_string(i - 1)));
    }

    // Backward from the logits' gradient. The host starts from the GPU's activations (identical
    // bits), so a ReLU or max-pool decision that rounding tipped the other way in the forward pass
    // cannot make the gradients disagree; the forward pass was compared above.
    for (std::size_t i = 1; i <= L; ++i) {
      const std::vector<float> a = gpu.download_activation(i, batch);
      std::copy(a.begin(), a.end(), host.activation(i, batch));
    }
    host.backward(dlogits.data(), batch, top);
    gpu.upload_output_grad(dlogits.data(), batch, top);
    gpu.backward(batch, top);
    gpu.synchronize();
    const std::vector<float> grads = gpu.gradients();
    for (std::size_t i = 0; i <= top; ++i) {
      auto tensor = [&](const std::vector<float>& all, std::size_t at, std::size_t n) {
        return std::vector<float>(all.begin() + std::ptrdiff_t(at), all.begin() + std::ptrdiff_t(at + n));
      };
      if (plan::weight_count[i]) {
        check(compare(tensor(grads, plan::weight_offset[i], plan::weight_count[i]),
                      tensor(host.grads(), plan::weight_offset[i], plan::weight_count[i]),
                      tag + "weight gradient of layer " + std::to_string(i)));
        check(compare(tensor(grads, plan::bias_offset[i], plan::bias_count[i]),
                      tensor(host.grads(), plan::bias_offset[i], plan::bias_count[i]),
                      tag + "bias gradient of layer " + std::to_string(i)));
      }
      if (i > 0) {  // the gradient flowing into layer i (layer 0 computes none)
        const float* h = host.activation_grad(i, batch);
        const std::vector<float> want(h, h + plan::act_size[i] * std::size_t(batch));
        check(compare(gpu.download_activation_grad(i, batch), want,
                      tag + "gradient at the input of layer " + std::to_string(i)));
      }
    }
    {  // The padding between gradient tensors is still zero.
      bool zero = true;
      for (std::size_t i = 0; i < L; ++i) {
        const std::size_t w_end = plan::weight_offset[i] + plan::weight_count[i];
        const std::size_t b_end = plan::bias_offset[i] + plan::bias_count[i];
        const std::size_t next = i + 1 < L ? plan::weight_offset[i + 1] : plan::param_floats;
        for (std::size_t k = w_end; k < plan::bias_offset[i]; ++k) zero = zero && grads[k] == 0.f;
        for (std::size_t k = b_end; k < next; ++k) zero = zero && grads[k] == 0.f;
      }
      std::printf("%s %sgradient padding untouched\n", zero ? "ok  " : "FAIL", tag.c_str());
      check(zero);
    }
  }

  // Run-time batch outside 1..MaxBatch is refused with std::invalid_argument.
  for (int bad : {0, max_batch + 1}) {
    bool threw = false;
    try {
      gpu.forward(bad);
    } catch (const std::invalid_argument& e) {
      threw = std::string(e.what()).find("outside 1.." + std::to_string(max_batch)) != std::string::npos;
    }
    std::printf("%s %s: batch %d is refused with a clear message\n", threw ? "ok  " : "FAIL", name, bad);
    check(threw);
  }
}

}  // namespace

int main() {
  ctnn_test::require_cuda_device();
  try {
    test_network<LeNet5>("LeNet-5", 11);
    test_network<RgbNet>("RGB net", 12);
    test_network<Mlp>("MLP", 13);
  } catch (const std::exception& e) {
    std::printf("FAIL unexpected exception: %s\n", e.what());
    ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
