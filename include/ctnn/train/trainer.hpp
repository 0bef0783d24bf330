#pragma once
// The training API shared by the backends:
//
//   ctnn::Trainer<Net, ctnn::cuda, 1024> trainer(seed);   // or ctnn::host
//   trainer.fit(train_set, options, &test_set);            // calls options.on_epoch after each epoch
//   ctnn::Evaluation e = trainer.evaluate(test_set);
//   std::vector<float> p = trainer.predict(images, count);  // count × output size probabilities
//
// Net must end in Softmax; the loss is cross-entropy, averaged over the batch. Data sets hold uint8
// pixels, normalised on the fly as (x/255 − mean)/std. A run-time batch may be any size from 1 to
// MaxBatch; the last, partial batch of an epoch is trained on. Parameters are in BufferPlan layout
// (PyTorch's tensor layouts, each tensor at its plan offset).
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../io/idx.hpp"
#include "../layers/softmax.hpp"
#include "../network/network.hpp"

namespace ctnn {

// Backend tags.
struct host {};
struct cuda {};

struct EpochStats {
  int epoch = 0;                 // 1-based
  double loss = 0;               // mean training cross-entropy over the epoch
  double train_accuracy = 0;     // fraction of training images classified right during the epoch
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();  // NaN when no test set given
  double seconds = 0;            // wall time of the epoch's training (evaluation excluded)
  double images_per_second = 0;
};

// How the learning rate changes from epoch to epoch.
enum class LrSchedule {
  constant,  // learning_rate throughout
  cosine,    // epoch e of E (1-based): learning_rate · (1 + cos(π·(e−1)/E)) / 2
};

struct TrainOptions {
  int epochs = 1;
  int batch = 64;                // 1..MaxBatch
  float learning_rate = 0.01f;
  LrSchedule schedule = LrSchedule::constant;
  float momentum = 0.9f;
  float weight_decay = 0.f;      // L2 term λ·p added to each gradient (PyTorch's SGD weight_decay)
  std::uint64_t seed = 1;        // shuffling
  float mean = 0.1307f, std = 0.3081f;  // normalisation (MNIST's)
  std::function<void(const EpochStats&)> on_epoch;                // optional
  std::function<void(std::size_t done, std::size_t total)> on_batch;  // optional progress

  // The learning rate of epoch `epoch` (1-based) under the schedule.
  float learning_rate_at(int epoch) const {
    if (schedule == LrSchedule::constant || epochs <= 1) return learning_rate;
    const double pi = 3.141592653589793;
    return float(learning_rate * 0.5 * (1.0 + std::cos(pi * double(epoch - 1) / double(epochs))));
  }
};

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
  std::size_t count = 0;
};

// Specialised for networks in host_trainer.hpp and cuda_trainer.hpp; this primary template only
// reports a misuse (one message, no cascade).
template <class Net, class Backend, int MaxBatch>
class Trainer {
  static_assert(is_network_v<Net>, "ctnn: Trainer<Net, Backend, MaxBatch> takes a Network<Seq<...>, Input<...>> as Net");
  static_assert(!is_network_v<Net>,
                "ctnn: no Trainer for this backend here: the backends are ctnn::host "
                "(<ctnn/train/host_trainer.hpp>) and ctnn::cuda (<ctnn/train/cuda_trainer.hpp>)");

 public:  // stand-ins, so that code using the Trainer adds no errors to the one above
  template <class... Args> explicit Trainer(Args&&...) {}
  template <class... Args> std::vector<EpochStats> fit(Args&&...) { return {}; }
  template <class... Args> Evaluation evaluate(Args&&...) { return {}; }
  template <class... Args> std::vector<float> predict(Args&&...) { return {}; }
};

namespace detail {
// Run-time checks of the options, shared by the backends.
inline void check_train_options(const TrainOptions& o, int max_batch) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("ctnn: " + what);
  };
  require(o.batch >= 1 && o.batch <= max_batch, "batch size " + std::to_string(o.batch) + " is outside 1.." +
                                                    std::to_string(max_batch) + " (the Trainer's MaxBatch)");
  require(o.epochs >= 0, "epochs must not be negative, got " + std::to_string(o.epochs));
  require(std::isfinite(o.learning_rate) && o.learning_rate >= 0,
          "learning rate must be finite and >= 0, got " + std::to_string(o.learning_rate));
  require(std::isfinite(o.momentum) && o.momentum >= 0,
          "momentum must be finite and >= 0, got " + std::to_string(o.momentum));
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0,
          "weight decay must be finite and >= 0, got " + std::to_string(o.weight_decay));
  require(std::isfinite(o.std) && o.std > 0 && std::isfinite(o.mean),
          "normalisation needs a finite mean and a std > 0, got mean " + std::to_string(o.mean) + ", std " +
              std::to_string(o.std));
}

// The Trainer's rules about the network, chained so that one mistake gives one message.
template <class Net, int MaxBatch>
constexpr bool trainer_rules() {
  static_assert(MaxBatch >= 1, "ctnn: a Trainer's MaxBatch must be at least 1");
  constexpr bool ends_in_softmax =
      std::is_same_v<typename Net::template layer_at<Net::layer_count - 1>, Softmax>;
  static_assert(!Net::valid || ends_in_softmax,
                "ctnn: the Trainer's loss is softmax cross-entropy, so the network's last layer must be Softmax");
  static_assert(!Net::valid || !ends_in_softmax || Net::layer_count >= 2,
                "ctnn: the Trainer needs at least one layer before the Softmax");
  return MaxBatch >= 1 && ends_in_softmax && Net::layer_count >= 2;
}
}  // namespace detail

}  // namespace ctnn
