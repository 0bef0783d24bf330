// lenet5's CPU backend: ctnn's host trainer, multithreaded (Trainer::set_threads), and the model
// loading and diagnosis that never need a device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "backend.hpp"
#include "ctnn/core/normalize.hpp"
#include "ctnn/train/host_trainer.hpp"

namespace lenet5 {
namespace {

using HostTrainer = ctnn::Trainer<Net, ctnn::host, cpu_max_batch>;

class CpuBackend final : public TrainerBackend<HostTrainer, cpu_max_batch> {
 public:
  CpuBackend(std::uint64_t seed, int threads) : TrainerBackend<HostTrainer, cpu_max_batch>(seed), threads_(threads) {
    trainer_.set_threads(threads);
  }
  std::string description() const override {
    return "CPU (host backend, " + std::to_string(threads_) + (threads_ == 1 ? " thread)" : " threads)");
  }
 private:
  int threads_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(std::uint64_t seed, int threads) {
  return std::make_unique<CpuBackend>(seed, threads);
}

Model load_model(const std::string& path, std::map<std::string, std::string>* metadata) {
  ctnn::Trainer<Net, ctnn::host, 1> t;
  t.load_weights(path);  // checks the network (saying what differs) and every value
  if (metadata) *metadata = ctnn::weight_file_metadata(path);
  return {t.parameters(), t.layer_state(), t.mean(), t.stddev()};
}

std::string explain_non_finite(const Model& m, const std::uint8_t* image) {
  ctnn::HostNetwork<Net, float> net(1);
  net.params() = m.params;
  net.state() = m.state;
  std::vector<float> x(pixels);
  ctnn::normalize_pixels(image, pixels, m.mean, m.std, x.data());
  net.forward(x.data(), 1);
  std::string where = "the output";
  bool found = false;
  Net::for_each_layer([&](auto index) {
    constexpr std::size_t i = decltype(index)::value;
    if (found) return;
    const float* y = net.activation(i + 1, 1);
    const std::size_t n = ctnn::BufferPlan<Net>::act_size[i + 1];
    for (std::size_t k = 0; k < n; ++k)
      if (!std::isfinite(y[k])) {
        char value[32];
        std::snprintf(value, sizeof value, "%g", double(y[k]));
        where = "layer " + std::to_string(i) + " (" + Net::template layer_at<i>::label() + ") first gives " + value;
        found = true;
        return;
      }
  });
  float largest = 0;
  for (float w : m.params) largest = std::max(largest, std::fabs(w));
  char text[48];
  std::snprintf(text, sizeof text, "%.3g", double(largest));
  return where + "; the largest weight magnitude is " + text;
}

}  // namespace lenet5
