// cifar_bench: ctnn on two CIFAR-sized networks (benchmarks/cifar_nets.hpp), to compare with
// benchmarks/pytorch_cifar.py in the same run on the same GPU.
//
//   cifar_bench [--images 50000] [--batches 64,256] [--epochs 3] [--seed 1] [--math fp32,tf32]
//
// The data are synthetic (uint8 3×32×32 images, uniform; labels from the mean brightness of the image,
// so that a network can learn something): timing needs the shapes, not CIFAR itself. Per network and
// batch it prints
//   epoch_s       median over `epochs` timed epochs (after 1 warm-up) of EpochStats::seconds of
//                 Trainer<Net, cuda, 256>::fit (SGD momentum 0.9, lr 0.01), for each math in --math
//                 (fp32: the default; tf32: set_math(Math::tf32), convolutions and dense layers on the
//                 TF32 tensor cores)
//   step_nodes    kernel and memcpy nodes of the captured training step (launches per step)
//   infer_img_s   forward throughput over 10,000 device-resident normalised images, in chunks of 256,
//                 each chunk one captured graph (copy into the input slot + forward), CUDA events
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cifar_nets.hpp"
#include "ctnn/train/cuda_trainer.hpp"

namespace {

constexpr int max_batch = 256;

ctnn::Dataset synthetic(std::size_t count, std::uint64_t seed) {
  ctnn::Dataset d;
  d.count = count, d.rows = 32, d.cols = 32;
  d.pixels.resize(count * 3 * 32 * 32);
  ctnn::Random rng(seed);
  for (auto& p : d.pixels) p = std::uint8_t(rng.below(256));
  d.labels.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    unsigned sum = 0;
    for (std::size_t k = 0; k < 3 * 32 * 32; k += 97) sum += d.pixels[i * 3 * 32 * 32 + k];
    d.labels[i] = std::uint8_t(sum % 10);
  }
  return d;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

const char* math_name(ctnn::Math m) { return m == ctnn::Math::tf32 ? "tf32" : "fp32"; }

template <class Net>
void bench(const char* name, const std::vector<int>& batches, int epochs, const ctnn::Dataset& train,
           const ctnn::Dataset& test, std::uint64_t seed, ctnn::Math math, bool serial_weight_gradients) {
  for (const int batch : batches) {
    ctnn::Trainer<Net, ctnn::cuda, max_batch> trainer(seed);
    trainer.set_math(math);
    trainer.network().set_concurrent_weight_gradients(!serial_weight_gradients);
    ctnn::TrainOptions o;
    o.epochs = 1 + epochs;
    o.batch = batch;
    o.learning_rate = 0.01f;
    o.stop_when_stuck = false;  // synthetic labels
    o.mean = 0.5f, o.std = 0.29f;
    std::vector<double> seconds;
    o.on_epoch = [&](const ctnn::EpochStats& s) {
      if (s.epoch > 1) seconds.push_back(s.seconds);
    };
    trainer.fit(train, o);
    const auto nodes = trainer.step_graph_nodes();
    std::printf("%-8s train  %s  batch %4d  epoch_s %.4f  step_nodes %zu kernels + %zu copies%s\n", name,
                math_name(math), batch, median(seconds), nodes.kernels, nodes.copies,
                serial_weight_gradients ? "  (weight gradients serial)" : "");
    std::fflush(stdout);
  }

  // Inference: 10k normalised images resident on the device, chunks of max_batch, one graph per chunk.
  ctnn::CudaNetwork<Net, max_batch> net(seed);
  net.set_math(math);
  constexpr std::size_t per = Net::input_shape::size;
  std::vector<float> x(test.count * per);
  ctnn::normalize_pixels(test.pixels.data(), x.size(), 0.5f, 0.29f, x.data());
  float* dx = nullptr;
  CTNN_CUDA_CHECK(cudaMalloc(&dx, x.size() * sizeof(float)));
  CTNN_CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  const cudaStream_t s = net.stream();
  std::vector<std::unique_ptr<ctnn::CudaGraph>> graphs;
  for (std::size_t at = 0; at < test.count; at += max_batch) {
    const int b = int(std::min<std::size_t>(max_batch, test.count - at));
    net.upload_input(x.data() + at * per, b);
    net.forward_fused(b);  // warm-up outside capture
    net.synchronize();
    graphs.push_back(std::make_unique<ctnn::CudaGraph>());
    graphs.back()->capture(s, [&] {
      CTNN_CUDA_CHECK(cudaMemcpyAsync(net.input(), dx + at * per, std::size_t(b) * per * sizeof(float),
                                      cudaMemcpyDeviceToDevice, s));
      net.forward_fused(b);
    });
  }
  cudaEvent_t e0, e1;
  CTNN_CUDA_CHECK(cudaEventCreate(&e0));
  CTNN_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> rates;
  for (int run = 0; run < 21; ++run) {
    CTNN_CUDA_CHECK(cudaEventRecord(e0, s));
    for (auto& g : graphs) g->launch(s);
    CTNN_CUDA_CHECK(cudaEventRecord(e1, s));
    CTNN_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CTNN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (run > 0) rates.push_back(double(test.count) / (ms / 1e3));
  }
  std::printf("%-8s infer  %s  batch %4d  infer_img_s %.0f\n", name, math_name(math), max_batch, median(rates));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(dx);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ctnn on two CIFAR-sized networks (compare with pytorch_cifar.py in the same run)"};
  std::size_t images = 50000;
  std::vector<int> batches{64, 256};
  int epochs = 3;
  std::uint64_t seed = 1;
  std::vector<std::string> maths{"fp32"};
  app.add_option("--images", images, "training images per epoch")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--batches", batches, "batch sizes, 1..256")->delimiter(',')->check(CLI::Range(1, max_batch));
  app.add_option("--epochs", epochs, "timed epochs (after 1 warm-up)")->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--seed", seed, "seed")->capture_default_str();
  app.add_option("--math", maths, "fp32, tf32 or both (fp32,tf32)")->delimiter(',')->check(CLI::IsMember({"fp32", "tf32"}));
  bool serial_weight_gradients = false;
  app.add_flag("--serial-weight-gradients", serial_weight_gradients,
               "train with the weight gradients on the network's stream after the data gradients, not on a "
               "second stream beside them (for comparison)");
  CLI11_PARSE(app, argc, argv);
  try {
    int device = 0;
    cudaDeviceProp prop{};
    CTNN_CUDA_CHECK(cudaGetDevice(&device));
    CTNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    std::printf("device: %s\n", prop.name);
    const ctnn::Dataset train = synthetic(images, seed), test = synthetic(10000, seed + 1);
    for (const std::string& m : maths) {
      const ctnn::Math math = m == "tf32" ? ctnn::Math::tf32 : ctnn::Math::fp32;
      bench<cifar::Vgg>("vgg", batches, epochs, train, test, seed, math, serial_weight_gradients);
      bench<cifar::Strided>("strided", batches, epochs, train, test, seed, math, serial_weight_gradients);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cifar_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
