// lenet5's GPU backend: ctnn's CUDA trainer (compiled by nvcc). Nothing touches the device before
// make_cuda_backend has found one.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "backend.hpp"
#include "ctnn/core/cuda_check.hpp"
#include "ctnn/train/cuda_trainer.hpp"

namespace lenet5 {
namespace {

using CudaTrainer = ctnn::Trainer<Net, ctnn::cuda, cuda_max_batch>;

// The device the trainer will use (the current one), or no_device.
std::string device_description() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) throw no_device(cudaGetErrorString(status));
  if (count == 0) throw no_device("the CUDA runtime reports 0 devices");
  int device = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess)
    throw no_device("cannot query the device's properties");
  char buf[96];
  std::snprintf(buf, sizeof buf, " (GPU %d of %d, sm_%d%d, %.1f GiB)", device, count, p.major, p.minor,
                double(p.totalGlobalMem) / double(1u << 30));
  return p.name + std::string(buf);
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::uint64_t seed, std::string device) : device_(std::move(device)), trainer_(seed) {}
  std::string description() const override { return device_; }
  int max_batch() const override { return cuda_max_batch; }
  std::vector<ctnn::EpochStats> fit(const ctnn::Dataset& train, const ctnn::TrainOptions& o, const ctnn::Dataset* test,
                                    const SgdOptions& sgd) override {
    trainer_.optimizer.momentum = sgd.momentum;
    trainer_.optimizer.weight_decay = sgd.weight_decay;
    return trainer_.fit(train, o, test);
  }
  void stop() override { trainer_.stop(); }
  std::vector<float> predict(const std::uint8_t* images, std::size_t count) override {
    std::vector<float> out;
    out.reserve(count * classes);
    for (std::size_t done = 0; done < count;) {
      const std::size_t n = std::min<std::size_t>(count - done, std::size_t{1} << 20);
      const std::vector<float> p = trainer_.predict(images + done * pixels, int(n));
      out.insert(out.end(), p.begin(), p.end());
      done += n;
    }
    return out;
  }
  Model model() const override { return {trainer_.parameters(), trainer_.layer_state(), trainer_.mean(), trainer_.stddev()}; }
  void set_model(const Model& m) override {
    trainer_.set_parameters(m.params);
    trainer_.set_layer_state(m.state);
    trainer_.set_normalization(m.mean, m.std);
  }
  void save_weights(const std::string& path, const std::map<std::string, std::string>& extra) const override {
    trainer_.save_weights(path, extra);
  }

 private:
  std::string device_;
  CudaTrainer trainer_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(std::uint64_t seed) {
  std::string device = device_description();  // throws no_device first
  try {
    return std::make_unique<CudaBackend>(seed, std::move(device));
  } catch (const ctnn::cuda_error& e) {
    // A device that is listed but cannot be used (busy, wrong driver, out of memory).
    throw no_device(std::string("the CUDA device cannot be used: ") + e.what());
  }
}

}  // namespace lenet5
