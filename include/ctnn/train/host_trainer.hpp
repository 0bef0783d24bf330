#pragma once
// Trainer<Net, host, MaxBatch>: the training API of train/trainer.hpp on the CPU, over a
// HostNetwork<Net, float>. It is the reference the CUDA trainer is compared with: same shuffling,
// same normalisation, same loss and the same SGD-with-momentum formula.
//
//   ctnn::Trainer<Net, ctnn::host, 64> trainer(seed);
//   auto history = trainer.fit(train_set, options, &test_set);  // one EpochStats per epoch
//
// Each step: normalise a batch of images, forward, softmax cross-entropy on the logits (the fused
// gradient ŷ − y), backward from below the Softmax, one SGD step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/random.hpp"
#include "../layers/softmax.hpp"
#include "../network/host_network.hpp"
#include "loss.hpp"
#include "normalize.hpp"
#include "sgd.hpp"
#include "trainer.hpp"

namespace ctnn {

// The order in which epoch `epoch` visits `count` samples: a Fisher–Yates shuffle of 0..count-1 with
// a Random seeded from (seed, epoch). It depends on nothing else, so a run is reproducible and every
// backend can visit the samples in the same order.
inline std::vector<std::size_t> epoch_order(std::size_t count, std::uint64_t seed, int epoch) {
  std::vector<std::size_t> order(count);
  std::iota(order.begin(), order.end(), std::size_t{0});
  Random rng(Random(seed).next_u64() + std::uint64_t(epoch));
  for (std::size_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

template <class Net, int MaxBatch>
  requires is_network_v<Net>
class Trainer<Net, host, MaxBatch> {
  // trainer_rules reports a broken rule itself; "|| true" keeps this line from adding a second error.
  static_assert(detail::trainer_rules<Net, MaxBatch>() || true);

 public:
  using net_type = Net;
  using input_shape = typename Net::input_shape;
  static constexpr int max_batch = MaxBatch;
  static constexpr std::size_t input_size = input_shape::size;
  static constexpr int classes = int(Net::output_shape::size);

  explicit Trainer(std::uint64_t seed = 1)
      : net_(MaxBatch, seed),
        sgd_(plan::param_floats),
        input_(std::size_t(MaxBatch) * input_size),
        labels_(std::size_t(MaxBatch)),
        dlogits_(std::size_t(MaxBatch) * classes) {}

  // Trains for options.epochs epochs; returns the statistics of each (also passed to on_epoch).
  // on_batch(done, total) is called after every step with the images of this epoch trained so far
  // and the epoch's total. Momentum carries over from one fit to the next.
  std::vector<EpochStats> fit(const io::Dataset& train, const TrainOptions& options,
                              const io::Dataset* test = nullptr) {
    detail::check_train_options(options, MaxBatch);
    check_dataset(train, "training set");
    if (test) check_dataset(*test, "test set");
    mean_ = options.mean;
    std_ = options.std;
    constexpr std::size_t L = Net::layer_count;
    std::vector<EpochStats> history;
    for (int epoch = 1; epoch <= options.epochs; ++epoch) {
      const auto start = std::chrono::steady_clock::now();
      const std::vector<std::size_t> order = epoch_order(train.count, options.seed, epoch);
      const float learning_rate = options.learning_rate_at(epoch);
      double loss_sum = 0;
      std::size_t correct = 0;
      for (std::size_t done = 0; done < train.count;) {
        const int batch = int(std::min<std::size_t>(std::size_t(options.batch), train.count - done));
        load_batch(train, order.data() + done, batch);
        net_.forward(input_.data(), batch);
        const CrossEntropy ce = softmax_cross_entropy<classes>(net_.activation(L - 1, batch),
                                                               labels_.data(), batch, dlogits_.data());
        net_.backward(dlogits_.data(), batch, L - 2);  // below the Softmax: dlogits is ŷ − y
        sgd_.step(net_.params(), net_.grads(), learning_rate, options.momentum, options.weight_decay);
        loss_sum += ce.loss * batch;
        correct += ce.correct;
        done += std::size_t(batch);
        if (options.on_batch) options.on_batch(done, train.count);
      }
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      EpochStats stats;
      stats.epoch = epoch;
      stats.loss = loss_sum / double(train.count);
      stats.train_accuracy = double(correct) / double(train.count);
      stats.seconds = elapsed.count();
      stats.images_per_second = stats.seconds > 0 ? double(train.count) / stats.seconds : 0.0;
      if (test) stats.test_accuracy = evaluate(*test).accuracy;
      history.push_back(stats);
      if (options.on_epoch) options.on_epoch(stats);
    }
    return history;
  }

  // Mean cross-entropy and accuracy over a data set, normalised as in the last fit (MNIST's mean
  // and std before any fit).
  Evaluation evaluate(const io::Dataset& data) {
    check_dataset(data, "evaluation set");
    constexpr std::size_t L = Net::layer_count;
    std::vector<std::size_t> order(data.count);
    std::iota(order.begin(), order.end(), std::size_t{0});
    double loss_sum = 0;
    std::size_t correct = 0;
    for (std::size_t done = 0; done < data.count;) {
      const int batch = int(std::min<std::size_t>(MaxBatch, data.count - done));
      load_batch(data, order.data() + done, batch);
      net_.forward(input_.data(), batch);
      const CrossEntropy ce =
          softmax_cross_entropy<classes>(net_.activation(L - 1, batch), labels_.data(), batch);
      loss_sum += ce.loss * batch;
      correct += ce.correct;
      done += std::size_t(batch);
    }
    Evaluation e;
    e.count = data.count;
    e.loss = loss_sum / double(data.count);
    e.accuracy = double(correct) / double(data.count);
    return e;
  }

  // Class probabilities, count × classes, for `count` already normalised images (input_shape each,
  // batch-major).
  std::vector<float> predict(const float* normalised_images, int count) {
    if (count < 0) throw std::invalid_argument("ctnn: predict needs count >= 0, got " + std::to_string(count));
    if (count > 0 && !normalised_images) throw std::invalid_argument("ctnn: predict got a null image pointer");
    std::vector<float> out(std::size_t(count) * classes);
    for (int done = 0; done < count;) {
      const int batch = std::min(MaxBatch, count - done);
      const float* p = net_.forward(normalised_images + std::size_t(done) * input_size, batch);
      std::copy(p, p + std::size_t(batch) * classes, out.begin() + std::ptrdiff_t(done) * classes);
      done += batch;
    }
    return out;
  }

  // Parameters in BufferPlan layout: BufferPlan<Net>::param_floats floats, each tensor at its offset.
  const std::vector<float>& parameters() const { return net_.params(); }
  // Replaces the parameters (same layout and size) and restarts the momentum from zero.
  void set_parameters(const std::vector<float>& params) {
    if (params.size() != plan::param_floats)
      throw std::invalid_argument("ctnn: set_parameters expected " + std::to_string(plan::param_floats) +
                                  " floats (the BufferPlan layout of this network), got " +
                                  std::to_string(params.size()));
    net_.params() = params;
    sgd_.reset();
  }

  HostNetwork<Net, float>& network() { return net_; }

 private:
  using plan = BufferPlan<Net>;

  static std::string shape_text(std::size_t rows, std::size_t cols) {
    return std::to_string(rows) + "x" + std::to_string(cols);
  }


  // Images of rows x cols pixels with C channels each, C·rows·cols == input_size (rows x cols must be
  // the input's H x W when the input is C x H x W); labels below the output size.
  static void check_dataset(const io::Dataset& d, const std::string& what) {
    if (d.count == 0) throw std::invalid_argument("ctnn: the " + what + " is empty");
    const std::size_t plane = d.rows * d.cols;
    bool fits = plane > 0 && input_size % plane == 0;
    if constexpr (input_shape::rank == 3)
      fits = fits && d.rows == std::size_t(input_shape::dims[1]) && d.cols == std::size_t(input_shape::dims[2]);
    if (!fits)
      throw std::invalid_argument("ctnn: the " + what + " has images of " + shape_text(d.rows, d.cols) +
                                  " pixels, but the network expects " + input_shape::str() + " = " +
                                  std::to_string(input_size) + " values per image");
    if (d.pixels.size() != d.count * input_size)
      throw std::invalid_argument("ctnn: the " + what + " holds " + std::to_string(d.pixels.size()) +
                                  " pixel values, expected " + std::to_string(d.count) + " images x " +
                                  std::to_string(input_size) + " = " + std::to_string(d.count * input_size));
    if (d.labels.size() != d.count)
      throw std::invalid_argument("ctnn: the " + what + " holds " + std::to_string(d.labels.size()) +
                                  " labels, expected " + std::to_string(d.count) + " (one per image)");
    for (std::size_t i = 0; i < d.count; ++i)
      if (d.labels[i] >= classes)
        throw std::invalid_argument("ctnn: label " + std::to_string(d.labels[i]) + " of image " +
                                    std::to_string(i) + " in the " + what + " is outside 0.." +
                                    std::to_string(classes - 1) + " (the network has " +
                                    std::to_string(classes) + " outputs)");
  }

  // Normalises images indices[0..batch) into input_ and copies their labels into labels_.
  void load_batch(const io::Dataset& d, const std::size_t* indices, int batch) {
    for (int n = 0; n < batch; ++n) {
      normalize_pixels(d.pixels.data() + indices[n] * input_size, input_size, mean_, std_,
                       input_.data() + std::size_t(n) * input_size);
      labels_[std::size_t(n)] = d.labels[indices[n]];
    }
  }

  HostNetwork<Net, float> net_;
  SgdMomentum<float> sgd_;
  std::vector<float> input_;
  std::vector<std::uint8_t> labels_;
  std::vector<float> dlogits_;
  float mean_ = TrainOptions{}.mean, std_ = TrainOptions{}.std;
};

}  // namespace ctnn
