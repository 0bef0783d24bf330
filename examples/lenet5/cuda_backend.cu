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

class CudaBackend final : public TrainerBackend<CudaTrainer, cuda_max_batch> {
 public:
  CudaBackend(std::uint64_t seed, std::string device)
      : TrainerBackend<CudaTrainer, cuda_max_batch>(seed), device_(std::move(device)) {}
  std::string description() const override { return device_; }

 private:
  std::string device_;
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
