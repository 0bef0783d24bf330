#pragma once
// The training API shared by the backends:
//
//   ctnn::Trainer<Net, ctnn::cuda, 1024> trainer(seed);          // or ctnn::host; Optimizer, Loss below
//   trainer.optimizer.weight_decay = 1e-3f;                       // the optimizer's run-time options
//   auto history = trainer.fit(train_set, options, &test_set);   // one EpochStats per epoch
//   ctnn::Evaluation e = trainer.evaluate(test_set);
//   std::vector<float> p = trainer.predict(images, count);       // count × output size
//   trainer.save_checkpoint("run.ckpt"); trainer.load_checkpoint("run.ckpt");
//
// Trainer<Net, Backend, MaxBatch, Optimizer = Sgd, Loss = SoftmaxCrossEntropy>: the optimizer
// (train/sgd.hpp, train/adam.hpp) and the loss (train/softmax_cross_entropy.hpp, train/mse.hpp) are
// types; their options are the members `optimizer` and `loss`. One training loop (train/loop.hpp)
// drives both backends: the same shuffle, schedule, loss and update on each. Data sets hold uint8
// pixels, normalised on the fly as (x/255 − mean)/std. A run-time batch may be any size from 1 to
// MaxBatch; the last, partial batch of an epoch is trained on. Parameters are in BufferPlan layout.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/dataset.hpp"
#include "../network/network.hpp"
#include "adam.hpp"
#include "mse.hpp"
#include "schedule.hpp"
#include "sgd.hpp"
#include "softmax_cross_entropy.hpp"

namespace ctnn {

// The learning-rate schedule (train/schedule.hpp); LrSchedule::constant, LrSchedule::cosine, ...
using LrSchedule = Schedule;

// Backend tags.
struct host {};
struct cuda {};

struct EpochStats {
  int epoch = 0;                 // 1-based
  double loss = 0;               // mean training loss over the epoch
  double train_accuracy = 0;     // fraction of training images classified right during the epoch
  double test_accuracy = std::numeric_limits<double>::quiet_NaN();  // NaN when no test set given
  double test_loss = std::numeric_limits<double>::quiet_NaN();
  double learning_rate = 0;      // of the epoch's last step
  double seconds = 0;            // wall time of the epoch's training (evaluation excluded)
  double images_per_second = 0;
};

// What early stopping watches.
enum class Monitor { test_loss, test_accuracy, train_loss };

struct TrainOptions {
  int epochs = 1;                // the run's last epoch: fit continues from the epoch reached
  int batch = 64;                // 1..MaxBatch
  float learning_rate = 0.01f;   // the base rate that the schedule scales
  LrSchedule schedule = LrSchedule::constant;
  std::uint64_t seed = 1;        // shuffling (and layers' random numbers): epoch e's order is a
                                 // function of (seed, e), the same on every backend
  float mean = 0.1307f, std = 0.3081f;  // normalisation (MNIST's), kept with the model
  // Early stopping: after `patience` epochs (0: off) without an improvement of `min_delta` in
  // `monitor` (the test metrics need a test set), stop; with restore_best, the parameters and state of
  // the best epoch are put back.
  int patience = 0;
  Monitor monitor = Monitor::test_loss;
  double min_delta = 0;
  bool restore_best = true;
  // A classifier (3 or more classes) whose training accuracy stays below 1.5× chance for a whole
  // epoch after the first has diverged (dead units, constant outputs): fit throws numeric_error.
  // Turn off for data that is meant to be unlearnable (random labels).
  bool stop_when_stuck = true;
  std::function<void(const EpochStats&)> on_epoch;                    // optional
  std::function<void(std::size_t done, std::size_t total)> on_batch;  // optional progress
};

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
  std::size_t count = 0;
};

// Thrown when training produces a non-finite loss.
struct numeric_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The loss a network gets when none is named: softmax cross-entropy for a network ending in Softmax,
// else the mean squared error.
template <class Net>
using default_loss_t = std::conditional_t<
    std::is_same_v<typename Net::template layer_at<(Net::layer_count > 0 ? Net::layer_count - 1 : 0)>, Softmax>,
    SoftmaxCrossEntropy, Mse>;

namespace detail {
template <class Net> struct default_loss { using type = SoftmaxCrossEntropy; };
template <class S, class I> struct default_loss<Network<S, I>> { using type = default_loss_t<Network<S, I>>; };
}  // namespace detail

// Specialised for networks in host_trainer.hpp and cuda_trainer.hpp; this primary template only
// reports a misuse (one message, no cascade).
template <class Net, class Backend, int MaxBatch, class Opt = Sgd, class Loss = typename detail::default_loss<Net>::type>
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
  require(std::isfinite(o.std) && o.std > 0 && std::isfinite(o.mean),
          "normalisation needs a finite mean and a std > 0, got mean " + std::to_string(o.mean) + ", std " +
              std::to_string(o.std));
  require(o.patience >= 0, "patience must not be negative, got " + std::to_string(o.patience));
  require(std::isfinite(o.min_delta) && o.min_delta >= 0, "min_delta must be finite and >= 0");
}

// The Trainer's rules about its arguments, chained so that one mistake gives one message.
template <class Net, int MaxBatch, class Opt, class Loss>
constexpr bool trainer_rules() {
  static_assert(MaxBatch >= 1, "ctnn: a Trainer's MaxBatch must be at least 1");
  static_assert(MaxBatch < 1 || Optimizer<Opt>,
                "ctnn: the Trainer's optimizer is not an optimizer type (ctnn::Sgd, ctnn::Adam, ctnn::AdamW, or "
                "one that provides what train/optimizer.hpp lists)");
  if constexpr (MaxBatch >= 1 && Optimizer<Opt>) return Loss::template fits<Net>();
  else return false;
}
}  // namespace detail

}  // namespace ctnn
