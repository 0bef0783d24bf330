// ResidentPredictor (network/resident_predictor.hpp): the resident network kernel answers each request
// with the same bits as the network kernel launched on the same images (CudaNetwork::
// forward_network_kernel), on fresh random images and parameters, its outputs poisoned first: single
// images many times in a row, batches of every size up to its max_batch in a changing order, a network
// with layer state, the parameters as of construction (not later ones), bad arguments and a second
// predictor on the device refused, and predictors made and destroyed in a row. While a predictor
// runs nothing here frees device memory (cudaFree waits for an idle device, which it never is then)
// or launches a kernel (compute-sanitizer runs kernels one at a time): every reference comes first.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/network/cuda_network.hpp>
#include <ctnn/network/resident_predictor.hpp>

#include "gpu_test.hpp"

namespace {

using namespace ctnn;
using ctnn_test::same_bits;

using LeNet5 = models::LeNet5;
// Layer state (BatchNorm's running statistics) and a padded convolution.
using Bn = Network<Seq<Conv<8, 3, Pad<1>>, BatchNorm, ReLU, Pool<2>, Dense<10>, Softmax>, Input<3, 12, 12>>;
using Mlp = Network<Seq<Dense<96>, Sigmoid, Dense<48>, ReLU, Dense<10>, Softmax>, Input<3, 8, 8>>;

constexpr int net_batch = 8;

int passed = 0, failed = 0;
void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  ok ? ++passed : ++failed;
}

bool finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return !v.empty();
}

// The network kernel launched on `count` images (the reference the resident kernel must equal).
template <class CN>
std::vector<float> launched(CN& net, const std::vector<float>& x, int count) {
  constexpr std::size_t in = CN::network_kernel::plan::in_size, out = CN::network_kernel::plan::out_size;
  CTNN_CUDA_CHECK(cudaMemcpyAsync(net.input(), x.data(), std::size_t(count) * in * sizeof(float),
                                  cudaMemcpyHostToDevice, net.stream()));
  CTNN_CUDA_CHECK(cudaMemsetAsync(net.output(), 0xFF, std::size_t(count) * out * sizeof(float), net.stream()));
  net.forward_network_kernel(count);
  std::vector<float> y(std::size_t(count) * out);
  CTNN_CUDA_CHECK(cudaMemcpyAsync(y.data(), net.output(), y.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                  net.stream()));
  net.synchronize();
  return y;
}

template <class R>
std::vector<float> resident_predict(R& r, const std::vector<float>& x, int count) {
  std::vector<float> y(std::size_t(count) * R::outputs);
  std::memset(y.data(), 0xFF, y.size() * sizeof(float));  // poisoned: NaN unless written
  r.predict(x.data(), count, y.data());
  return y;
}

template <class Net>
void randomize(CudaNetwork<Net, net_batch>& net, std::uint64_t seed) {
  net.set_parameters(ctnn_test::random_vector(BufferPlan<Net>::param_floats, seed, -0.3f, 0.3f));
  if constexpr (BufferPlan<Net>::state_floats > 0)
    net.set_state(ctnn_test::random_vector(BufferPlan<Net>::state_floats, seed + 1, 0.5f, 1.5f));
}

template <class Net>
void test_network(const char* name, std::uint64_t seed) {
  using CN = CudaNetwork<Net, net_batch>;
  constexpr std::size_t in = CN::network_kernel::plan::in_size;
  CN net(seed);
  randomize(net, seed);
  const std::string tag = std::string(name) + ": ";
  constexpr int images = 6;
  const std::vector<float> x = ctnn_test::random_vector(in * images, seed + 2, -0.5f, 2.5f);
  std::vector<std::vector<float>> want(images);
  for (int i = 0; i < images; ++i)
    want[std::size_t(i)] = launched(net, std::vector<float>(x.begin() + i * in, x.begin() + (i + 1) * in), 1);
  const std::vector<float> want_all = launched(net, x, images);
  bool references = finite(want_all);
  for (const auto& w : want) references = references && finite(w);
  report(references, tag + "the launched kernel's outputs are written and finite");

  {  // single images, many requests in a row
    ResidentPredictor resident(net);
    bool each = resident.max_batch() == 1;
    for (int k = 0; k < 300; ++k) {
      const int i = (k * 5) % images;
      const std::vector<float> one(x.begin() + i * in, x.begin() + (i + 1) * in);
      each = each && same_bits(resident_predict(resident, one, 1), want[std::size_t(i)]);
    }
    report(each, tag + "300 single images in a row, each equal to the launched kernel bit for bit");
  }
  {  // batches of 1..max_batch in a changing order, each sample equal to the launched batch's
    ResidentPredictor resident(net, images);
    bool each = resident.max_batch() == images;
    for (int count : {images, 1, 3, images, 2, 5, 4, 1, images}) {
      const std::vector<float> part(x.begin(), x.begin() + count * in);
      const std::vector<float> got = resident_predict(resident, part, count);
      const std::vector<float> w(want_all.begin(), want_all.begin() + count * std::ptrdiff_t(ResidentPredictor<CN>::outputs));
      each = each && same_bits(got, w);
    }
    report(each, tag + "batches of 6, 1, 3, 6, 2, 5, 4, 1, 6 images through 6 resident blocks, equal to the launched batch");
    report(resident.predict(x.data(), 0).empty(), tag + "a request of 0 images returns nothing");
  }
  // The parameters as of construction; a new predictor (after the first is gone) follows new ones.
  const std::vector<float> one(x.begin(), x.begin() + in);
  const std::vector<float> new_params = ctnn_test::random_vector(BufferPlan<Net>::param_floats, seed + 10, -0.3f, 0.3f);
  std::vector<float> changed;
  {
    CN other(seed);
    other.set_parameters(new_params);
    if constexpr (BufferPlan<Net>::state_floats > 0) other.set_state(net.state_values());
    changed = launched(other, one, 1);
  }
  if (std::getenv("CTNN_QUICK")) {
    // (under compute-sanitizer, which may hold set_parameters' copy until the resident kernel ends)
    net.set_parameters(new_params);
    std::printf("skip %sthe parameters kept after set_parameters (CTNN_QUICK)\n", tag.c_str());
  } else {
    ResidentPredictor resident(net);
    net.set_parameters(new_params);
    const std::vector<float> got = resident_predict(resident, one, 1);
    report(same_bits(got, want[0]) && finite(changed) && !same_bits(changed, want[0]),
           tag + "a predictor keeps the parameters it was made with after set_parameters");
  }
  ResidentPredictor fresh(net);
  report(same_bits(resident_predict(fresh, one, 1), changed), tag + "a new predictor follows the new parameters");
}

template <class F>
bool throws_invalid(F&& f, const std::string& needle) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

void test_arguments() {
  using CN = CudaNetwork<LeNet5, net_batch>;
  CN net(7);
  using R = ResidentPredictor<CN>;
  report(throws_invalid([&] { R r(net, 0); }, "max_batch must be 1.."), "max_batch 0 is refused");
  report(throws_invalid([&] { R r(net, 1 << 20); }, "got 1048576"), "max_batch beyond the resident blocks is refused");
  R r(net, 2);
  bool second = false;
  try {
    R other(net);
  } catch (const std::logic_error& e) {
    second = std::string(e.what()).find("already runs on device") != std::string::npos;
  }
  report(second, "a second predictor on the device while one runs is refused");
  const std::vector<float> x(3 * R::input_size, 0.5f);
  std::vector<float> y(3 * R::outputs);
  report(throws_invalid([&] { r.predict(x.data(), 3, y.data()); }, "takes 0..2 images"),
         "a request over max_batch is refused");
  report(throws_invalid([&] { r.predict(nullptr, 1, y.data()); }, "null image pointer"), "a null image is refused");
  report(throws_invalid([&] { r.predict(x.data(), 1, nullptr); }, "null output pointer"), "a null output is refused");
  r.predict(x.data(), 2, y.data());
  report(finite(std::vector<float>(y.begin(), y.begin() + 2 * R::outputs)), "and it still answers afterwards");
}

// Predictors made and destroyed one after another on one network (each stops its kernel).
void test_lifetimes() {
  using CN = CudaNetwork<LeNet5, net_batch>;
  CN net(9);
  randomize(net, 9);
  const std::vector<float> x = ctnn_test::random_vector(CN::network_kernel::plan::in_size, 90, -0.5f, 2.5f);
  const std::vector<float> want = launched(net, x, 1);
  bool each = true;
  for (int i = 0; i < 10; ++i) {
    ResidentPredictor r(net, 1 + i % 3);
    each = each && same_bits(resident_predict(r, x, 1), want);
  }
  report(each && finite(want), "ten predictors made and destroyed in a row, each answering");
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // (each line out at once, should a request hang)
  ctnn_test::require_cuda_device();
  try {
    test_network<LeNet5>("LeNet-5", 11);
    test_network<Bn>("Conv + BatchNorm", 12);
    test_network<Mlp>("MLP", 13);
    test_arguments();
    test_lifetimes();
  } catch (const std::exception& e) {
    std::printf("FAIL unexpected exception: %s\n", e.what());
    ++failed;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
