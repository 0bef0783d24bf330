#pragma once
// lenet5's two backends behind one interface: the CPU (ctnn's host trainer on several threads,
// cpu_backend.cpp) and the GPU (ctnn's CUDA trainer, cuda_backend.cu, compiled by nvcc). main.cpp
// is plain C++ and knows only this header.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ctnn/core/dataset.hpp"
#include "ctnn/models/lenet5.hpp"
#include "ctnn/train/trainer.hpp"

namespace lenet5 {

using Net = ctnn::models::LeNet5;
constexpr int classes = 10;
constexpr std::size_t pixels = Net::input_shape::size;  // 784
static_assert(Net::output_shape::size == classes);

constexpr int cuda_max_batch = 1024;  // compiled into the CUDA trainer: its device buffers are sized for it
constexpr int cpu_max_batch = 256;    // the host trainer's buffers (per thread)

// Thrown when no usable CUDA device is found (exit status 4 for --device cuda).
struct no_device : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The optimizer and loss options lenet5 exposes (SGD with softmax cross-entropy).
struct SgdOptions {
  float momentum = 0.9f;
  bool nesterov = true;
  float weight_decay = 5e-4f;
  float label_smoothing = 0.1f;
};

// A trained model as plain numbers: what moves between the backends.
struct Model {
  std::vector<float> params, state;
  float mean = 0.1307f, std = 0.3081f;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string description() const = 0;  // "CPU, 2 threads" or the GPU's name
  virtual int max_batch() const = 0;
  virtual std::vector<ctnn::EpochStats> fit(const ctnn::Dataset& train, const ctnn::TrainOptions& o,
                                            const ctnn::Dataset* test, const SgdOptions& sgd) = 0;
  virtual void stop() = 0;  // from on_epoch / on_batch: end fit after this epoch
  // count × classes probabilities for raw uint8 images (normalised with the model's mean and std).
  virtual std::vector<float> predict(const std::uint8_t* images, std::size_t count) = 0;
  virtual Model model() const = 0;
  virtual void set_model(const Model& m) = 0;
  virtual void save_weights(const std::string& path, const std::map<std::string, std::string>& extra) const = 0;
};

// What both backends do the same way, over their Trainer type T (host or CUDA).
template <class T, int MaxBatch>
class TrainerBackend : public Backend {
 public:
  explicit TrainerBackend(std::uint64_t seed) : trainer_(seed) {}
  int max_batch() const override { return MaxBatch; }
  std::vector<ctnn::EpochStats> fit(const ctnn::Dataset& train, const ctnn::TrainOptions& o, const ctnn::Dataset* test,
                                    const SgdOptions& sgd) override {
    trainer_.optimizer.momentum = sgd.momentum;
    trainer_.optimizer.nesterov = sgd.nesterov && sgd.momentum > 0;
    trainer_.optimizer.weight_decay = sgd.weight_decay;
    trainer_.loss.label_smoothing = sgd.label_smoothing;
    return trainer_.fit(train, o, test);
  }
  void stop() override { trainer_.stop(); }
  std::vector<float> predict(const std::uint8_t* images, std::size_t count) override {
    std::vector<float> out;
    out.reserve(count * classes);
    for (std::size_t done = 0; done < count;) {  // Trainer::predict takes an int count
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

 protected:
  T trainer_;
};

// The CPU backend with `threads` threads (results deterministic for a given count), initial weights
// from `seed`.
std::unique_ptr<Backend> make_cpu_backend(std::uint64_t seed, int threads);
// The GPU backend; throws no_device when there is no usable CUDA device (checked before anything is
// allocated).
std::unique_ptr<Backend> make_cuda_backend(std::uint64_t seed);

// Reads and checks a weight file on the CPU (no device needed): the network must be LeNet-5 (else an
// io_error listing what differs), every tensor finite. Returns the model and the file's metadata.
Model load_model(const std::string& path, std::map<std::string, std::string>* metadata);

// For a model whose outputs are not finite on `image`: where it first happens, e.g.
// "layer 9 (Dense 84) gives inf", and the largest weight magnitude, found with a host forward pass.
std::string explain_non_finite(const Model& m, const std::uint8_t* image);

}  // namespace lenet5
