// Whole-network forward and backward on the GPU (CudaNetwork) against the host reference
// (HostNetwork<Net, float>) from identical parameters, on fresh random inputs, with every device
// output poisoned first: LeNet-5, an RGB network with strided, padded and dilated convolutions and
// average pooling, and an MLP, each at batch 1, 37 and MaxBatch. Then the network kernel on buffers
// of the caller's (device memory, mapped pinned host memory) against the same kernel on the network's
// slots, and Trainer::predict (mapped staging where the network kernel runs) against the network's
// own forwards.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/network/cuda_network.hpp>
#include <ctnn/network/host_network.hpp>
#include <ctnn/train/cuda_trainer.hpp>

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

// Pinned host memory mapped into the device: what the host writes, the device reads, and back.
struct MappedFloats {
  float* host = nullptr;
  float* device = nullptr;
  explicit MappedFloats(std::size_t n) {
    CTNN_CUDA_CHECK(cudaHostAlloc(&host, n * sizeof(float), cudaHostAllocMapped));
    CTNN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device), host, 0));
  }
  ~MappedFloats() { cudaFreeHost(host); }
  MappedFloats(const MappedFloats&) = delete;
  MappedFloats& operator=(const MappedFloats&) = delete;
};

using ctnn_test::same_bits;
// No NaN (poison) and no infinity: the reference was written.
bool finite(const std::vector<float>& v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}
bool poisoned(const float* v, std::size_t n) {
  return std::all_of(v, v + n, [](float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    return bits == 0xFFFFFFFFu;
  });
}

template <class F>
void expect_invalid(const std::string& what, const std::string& needle, F&& f) {
  std::string message;
  const bool ok = ctnn_test::throws_invalid_argument(needle, message, f);
  std::printf("%s %s: %s\n", ok ? "ok  " : "FAIL", what.c_str(), message.c_str());
  check(ok);
}

// forward_network_kernel(batch, x, y) with x and y in device memory and in mapped pinned host memory:
// the bits forward_network_kernel(batch) writes to output() from the same samples in input(), y's
// rows past the batch and the output slot untouched.
template <class Net>
void test_network_kernel_buffers(const char* name, std::uint64_t seed) {
  using Gpu = CudaNetwork<Net, max_batch>;
  static_assert(Gpu::has_network_kernel, "the test's network runs the network kernel");
  constexpr std::size_t in = Net::input_shape::size, out = Net::output_shape::size;
  Gpu gpu(seed);
  const cudaStream_t stream = gpu.stream();
  ctnn_test::DeviceBuffer<float> device_x(in * max_batch), device_y(out * max_batch);
  MappedFloats mapped_x(in * max_batch), mapped_y(out * max_batch);
  for (int batch : {1, 3, max_batch}) {
    const std::string tag = std::string(name) + " network kernel, batch " + std::to_string(batch) + ": ";
    const std::size_t n_out = out * std::size_t(batch);
    // Normalised MNIST pixels lie in about -0.42..2.8.
    const std::vector<float> x = ctnn_test::random_vector(in * std::size_t(batch), seed * 1000 + std::uint64_t(batch), -0.5f, 2.5f);

    poison(stream, gpu.output(), out * max_batch);
    gpu.upload_input(x.data(), batch);
    gpu.forward_network_kernel(batch);
    const std::vector<float> want = gpu.download_activation(Net::layer_count, batch);
    std::printf("%s %sthe reference through input() and output() is written and finite\n",
                finite(want) ? "ok  " : "FAIL", tag.c_str());
    check(finite(want));

    {  // device buffers
      poison(stream, gpu.output(), out * max_batch);
      poison(stream, device_y.ptr, out * max_batch);
      CTNN_CUDA_CHECK(cudaMemcpyAsync(device_x.ptr, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
      gpu.forward_network_kernel(batch, device_x.ptr, device_y.ptr);
      gpu.synchronize();
      const std::vector<float> y = device_y.download();
      const bool same = same_bits(std::vector<float>(y.begin(), y.begin() + std::ptrdiff_t(n_out)), want);
      const bool rest = poisoned(y.data() + n_out, y.size() - n_out);
      const std::vector<float> slot = gpu.download_activation(Net::layer_count, max_batch);
      const bool slot_untouched = poisoned(slot.data(), slot.size());
      std::printf("%s %sdevice x, y: equal bit for bit\n", same ? "ok  " : "FAIL", tag.c_str());
      std::printf("%s %sdevice y past the batch and output() untouched\n", rest && slot_untouched ? "ok  " : "FAIL",
                  tag.c_str());
      check(same);
      check(rest && slot_untouched);
    }
    {  // mapped host buffers
      std::memcpy(mapped_x.host, x.data(), x.size() * sizeof(float));
      std::memset(mapped_y.host, 0xFF, out * max_batch * sizeof(float));
      gpu.forward_network_kernel(batch, mapped_x.device, mapped_y.device);
      gpu.synchronize();
      const bool same = same_bits(std::vector<float>(mapped_y.host, mapped_y.host + n_out), want);
      const bool rest = poisoned(mapped_y.host + n_out, out * max_batch - n_out);
      std::printf("%s %smapped host x, y: equal bit for bit\n", same ? "ok  " : "FAIL", tag.c_str());
      std::printf("%s %smapped y past the batch untouched\n", rest ? "ok  " : "FAIL", tag.c_str());
      check(same);
      check(rest);
    }
  }
  const std::string tag = std::string(name) + " network kernel";
  expect_invalid(tag + ": null input", "null input pointer",
                 [&] { gpu.forward_network_kernel(1, nullptr, device_y.ptr); });
  expect_invalid(tag + ": null output", "null output pointer",
                 [&] { gpu.forward_network_kernel(1, device_x.ptr, nullptr); });
  expect_invalid(tag + ": batch 0", "outside 1..", [&] { gpu.forward_network_kernel(0, device_x.ptr, device_y.ptr); });
}

// Trainer::predict of LeNet-5: its chunks the network kernel runs go through mapped staging, the others
// through the network's slots. Counts 1 and 200 (one chunk of the network kernel), and 515 (a chunk of
// 512, the groups, then one of 3, the network kernel). Each must equal, bit for bit, the network's
// forward_fused of each chunk through input() and output() (the path predict took before the
// staging) and, within rounding, forward_groups; a second call, and a call after another trainer's,
// the same bits.
void test_predict() {
  constexpr int chunk = 512;
  using T = Trainer<LeNet5, ctnn::cuda, chunk>;
  static_assert(T::network_type::runs_network_kernel(3) && !T::network_type::runs_network_kernel(chunk),
                "predict's chunks of 512 and 3 take the two paths");
  T a(31), b(32);
  constexpr std::size_t in = LeNet5::input_shape::size, out = LeNet5::output_shape::size;
  // The network's own forward (forward_fused, else forward_groups) of `count` images, per chunk.
  auto reference = [&](T& t, const std::vector<float>& x, int count, bool groups) {
    auto& net = t.network();
    std::vector<float> y;
    for (int done = 0, batch = 0; done < count; done += batch) {
      batch = std::min(chunk, count - done);
      poison(net.stream(), net.output(), out * std::size_t(batch));
      net.upload_input(x.data() + std::size_t(done) * in, batch);
      if (groups) net.forward_groups(batch);
      else net.forward_fused(batch);
      const std::vector<float> p = net.download_activation(LeNet5::layer_count, batch);
      y.insert(y.end(), p.begin(), p.end());
    }
    return y;
  };
  for (int count : {1, 200, chunk + 3}) {
    const std::string tag = "predict of " + std::to_string(count) + ": ";
    const std::vector<float> x = ctnn_test::random_vector(in * std::size_t(count), 4000 + std::uint64_t(count), -0.5f, 2.5f);
    const std::vector<float> got = a.predict(x.data(), count);
    const std::vector<float> from_b = b.predict(x.data(), count);
    const std::vector<float> again = a.predict(x.data(), count);
    const std::vector<float> fused = reference(a, x, count, false), groups = reference(a, x, count, true);
    const std::vector<float> fused_b = reference(b, x, count, false);
    const bool written = finite(fused) && finite(fused_b);
    std::printf("%s %sthe references are written and finite\n", written ? "ok  " : "FAIL", tag.c_str());
    check(written);
    std::printf("%s %sequal bit for bit to forward_fused per chunk\n", same_bits(got, fused) ? "ok  " : "FAIL",
                tag.c_str());
    check(same_bits(got, fused));
    check(compare(got, groups, tag + "against forward_groups"));
    std::printf("%s %sa second call, after another trainer's, gives the same bits\n",
                same_bits(again, got) ? "ok  " : "FAIL", tag.c_str());
    check(same_bits(again, got));
    std::printf("%s %sthe other trainer's (other parameters) equal its forward_fused\n",
                same_bits(from_b, fused_b) && !same_bits(from_b, got) ? "ok  " : "FAIL", tag.c_str());
    check(same_bits(from_b, fused_b) && !same_bits(from_b, got));
  }
  // Single images, from the second on a replayed graph: each a new image, each its own forward; and
  // after set_parameters the new parameters.
  T c(33);
  bool each = true;
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> x = ctnn_test::random_vector(in, 5000 + std::uint64_t(i), -0.5f, 2.5f);
    const std::vector<float> got = c.predict(x.data(), 1);
    each = each && finite(got) && same_bits(got, reference(c, x, 1, false));
  }
  std::printf("%s predict of single images: four images in a row, each equal to its forward_fused\n",
              each ? "ok  " : "FAIL");
  check(each);
  const std::vector<float> x = ctnn_test::random_vector(in, 6000, -0.5f, 2.5f);
  const std::vector<float> before = c.predict(x.data(), 1);
  c.set_parameters(b.parameters());
  const std::vector<float> after = c.predict(x.data(), 1), want = reference(b, x, 1, false);
  std::printf("%s predict of a single image follows set_parameters\n",
              same_bits(after, want) && !same_bits(after, before) ? "ok  " : "FAIL");
  check(same_bits(after, want) && !same_bits(after, before));
}

}  // namespace

int main() {
  ctnn_test::require_cuda_device();
  try {
    test_network<LeNet5>("LeNet-5", 11);
    test_network<RgbNet>("RGB net", 12);
    test_network<Mlp>("MLP", 13);
    test_network_kernel_buffers<LeNet5>("LeNet-5", 14);
    test_predict();
  } catch (const std::exception& e) {
    std::printf("FAIL unexpected exception: %s\n", e.what());
    ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
