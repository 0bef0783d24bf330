#pragma once
// The one training loop, shared by the host and CUDA trainers: epochs, shuffling, the learning-rate
// schedule, the optimizer's per-step record, callbacks, divergence checks, early stopping and the
// bookkeeping a checkpoint needs. A backend (the derived Trainer) supplies only data residency, the
// steps of an epoch, evaluation and access to its parameters, state and optimizer state:
//
//   void prepare(const Dataset& train, const Dataset* test, const TrainOptions&);  // upload, capture
//   void start_epoch(const std::vector<std::uint32_t>& order, const std::vector<Record>& steps,
//                    const TrainOptions&);   // runs or enqueues step k on order[k·batch, ...)
//   EpochTotals finish_epoch();              // waits; per-sample sums in a fixed order
//   Evaluation evaluate_test();              // on the test set given to prepare
//   void end_fit();                          // releases what prepare made
//   std::vector<float> parameters() / layer_state() / optimizer_state();  and their setters
//
// Epoch e (1-based) visits the samples in epoch_order(count, seed, e): the same permutation on every
// backend. Step k of the run (0-based, counted over every fit) uses learning rate
// lr_at(schedule, base, k, steps per epoch, epochs) and optimizer record Opt::hyper(options, lr, k+1).
// Both depend only on numbers a checkpoint stores, so a resumed run repeats the straight one.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/dataset.hpp"
#include "../core/normalize.hpp"
#include "../core/random.hpp"
#include "trainer.hpp"

namespace ctnn {

// The order in which epoch `epoch` visits `count` samples: a Fisher–Yates shuffle of 0..count-1 with a
// Random seeded from (seed, epoch). It depends on nothing else.
inline std::vector<std::uint32_t> epoch_order(std::size_t count, std::uint64_t seed, int epoch) {
  std::vector<std::uint32_t> order(count);
  std::iota(order.begin(), order.end(), std::uint32_t{0});
  Random rng(Random(seed).next_u64() + std::uint64_t(epoch));
  for (std::size_t i = count; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

// What one optimizer step needs besides the data: its 0-based number in the run (layers' random
// numbers) and the optimizer's per-step record. Laid out for a device copy as it is.
template <std::size_t HyperCount>
struct StepRecord {
  std::uint64_t step = 0;
  float hyper[HyperCount] = {};
};

struct EpochTotals {
  double loss = 0;          // sum of per-sample losses
  std::size_t correct = 0;  // samples classified right
};

namespace detail {

template <class Opt>
using optimizer_or_sgd = std::conditional_t<Optimizer<Opt>, Opt, Sgd>;

template <class Derived, class Net, int MaxBatch, class Opt, class Loss>
class TrainingLoop {
 public:
  using net_type = Net;
  using optimizer_type = Opt;
  using loss_type = Loss;
  using input_shape = typename Net::input_shape;
  using Record = StepRecord<Opt::hyper_count>;
  static constexpr int max_batch = MaxBatch;
  static constexpr std::size_t input_size = input_shape::size;
  static constexpr int outputs = int(Net::output_shape::size);
  static constexpr std::size_t grad_layer = Loss::template grad_layer<Net>;

  typename Opt::Options optimizer{};  // the optimizer's hyperparameters (the learning rate is in TrainOptions)
  typename Loss::Options loss{};      // the loss's options

  // Epochs completed and optimizer steps taken, over every fit and any loaded checkpoint.
  int epoch() const { return epoch_; }
  std::int64_t step() const { return step_; }
  // The normalisation the model was trained with (set by fit, stored in weight files and checkpoints).
  float mean() const { return mean_; }
  float stddev() const { return std_; }
  void set_normalization(float mean, float std) {
    if (!(std::isfinite(mean) && std::isfinite(std) && std > 0))
      throw std::invalid_argument("ctnn: normalisation needs a finite mean and a std > 0");
    mean_ = mean, std_ = std;
  }
  // The network's outputs for `count` raw uint8 images, normalised here with mean() and stddev(); the
  // backend's predict(const float*, int) runs them.
  std::vector<float> predict(const std::uint8_t* pixels, int count) {
    if (count < 0) throw std::invalid_argument("ctnn: predict needs count >= 0, got " + std::to_string(count));
    std::vector<float> x(std::size_t(count) * input_size);
    if (count > 0) normalize_pixels(pixels, x.size(), mean_, std_, x.data());
    return self().predict(static_cast<const float*>(x.data()), count);
  }

  // Ends fit after the epoch in progress (callable from on_epoch or on_batch).
  void stop() { stop_ = true; }

  // Trains epochs epoch()+1 .. options.epochs; returns the statistics of each (also passed to
  // on_epoch). Optimizer state carries over from one fit to the next.
  std::vector<EpochStats> fit(const Dataset& train, const TrainOptions& o, const Dataset* test = nullptr) {
    check_train_options(o, MaxBatch);
    Opt::validate(optimizer);
    Loss::validate(loss);
    const SampleSpec spec = SampleSpec::of<Net>();
    check_dataset(train, spec, "training set");
    if (test) check_dataset(*test, spec, "test set");
    if (o.patience > 0 && o.monitor != Monitor::train_loss && !test)
      throw std::invalid_argument("ctnn: early stopping on a test metric needs a test set");
    mean_ = o.mean;
    std_ = o.std;
    stop_ = false;
    std::vector<EpochStats> history;
    if (epoch_ >= o.epochs) return history;

    const std::size_t n = train.count;
    const std::int64_t steps = std::int64_t((n + std::size_t(o.batch) - 1) / std::size_t(o.batch));
    struct EndFit {
      Derived& d;
      ~EndFit() { d.end_fit(); }
    };
    self().prepare(train, test, o);
    const EndFit end{self()};

    std::optional<double> best;
    int since_best = 0;
    std::vector<float> best_params, best_state;
    std::vector<std::uint32_t> order = epoch_order(n, o.seed, epoch_ + 1);
    std::vector<Record> records(std::size_t(steps), Record{});
    while (epoch_ < o.epochs && !stop_) {
      const int e = epoch_ + 1;
      float lr = o.learning_rate;
      for (std::int64_t k = 0; k < steps; ++k) {
        const std::int64_t global = step_ + k;
        lr = lr_at(o.schedule, o.learning_rate, global, steps, o.epochs);
        const auto h = Opt::hyper(optimizer, lr, global + 1);
        records[std::size_t(k)].step = std::uint64_t(global);
        std::copy(h.begin(), h.end(), records[std::size_t(k)].hyper);
      }
      const auto start = std::chrono::steady_clock::now();
      self().start_epoch(order, records, o);
      if (e < o.epochs) order = epoch_order(n, o.seed, e + 1);  // while the GPU works
      const EpochTotals totals = self().finish_epoch();
      const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
      epoch_ = e;
      step_ += steps;

      EpochStats s;
      s.epoch = e;
      s.loss = totals.loss / double(n);
      s.train_accuracy = double(totals.correct) / double(n);
      s.learning_rate = lr;
      s.seconds = elapsed.count();
      s.images_per_second = s.seconds > 0 ? double(n) / s.seconds : 0.0;
      check_progress(s, train, o);
      if (test) {
        const Evaluation ev = self().evaluate_test();
        s.test_accuracy = ev.accuracy;
        s.test_loss = ev.loss;
      }
      history.push_back(s);
      if (o.patience > 0) {
        const double metric = o.monitor == Monitor::test_loss       ? s.test_loss
                              : o.monitor == Monitor::test_accuracy ? -s.test_accuracy
                                                                    : s.loss;  // lower is better
        if (!best || metric < *best - o.min_delta) {
          best = metric;
          since_best = 0;
          if (o.restore_best) best_params = self().parameters(), best_state = self().layer_state();
        } else if (++since_best >= o.patience) {
          stop_ = true;
        }
      }
      if (o.on_epoch) o.on_epoch(s);
    }
    if (stop_ && o.patience > 0 && o.restore_best && !best_params.empty()) {
      self().set_parameters(best_params);
      self().set_layer_state(best_state);
    }
    return history;
  }

 protected:
  // Everything a checkpoint restores besides the backend's buffers.
  void set_progress(int epoch, std::int64_t step) {
    epoch_ = epoch;
    step_ = step;
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }

  // A non-finite loss, or a classifier stuck at chance for a whole epoch after the first, ends the
  // run: what comes next would be wasted (or silently garbage).
  void check_progress(const EpochStats& s, const Dataset& train, const TrainOptions& o) const {
    if (!std::isfinite(s.loss))
      throw numeric_error("ctnn: training diverged in epoch " + std::to_string(s.epoch) + ": the mean loss is " +
                          std::to_string(s.loss) + " (learning rate " + std::to_string(s.learning_rate) +
                          "); lower the learning rate or add a warm-up");
    const bool classifies = o.stop_when_stuck && !train.labels.empty() && outputs >= 3;
    if (classifies && s.epoch >= 2 && s.train_accuracy * outputs < 1.5)
      throw numeric_error("ctnn: training is stuck at chance in epoch " + std::to_string(s.epoch) +
                          ": training accuracy " + std::to_string(100 * s.train_accuracy) + "% with " +
                          std::to_string(outputs) + " classes (mean loss " + std::to_string(s.loss) +
                          "); lower the learning rate or add a warm-up");
  }

  int epoch_ = 0;
  std::int64_t step_ = 0;
  float mean_ = TrainOptions{}.mean, std_ = TrainOptions{}.std;
  bool stop_ = false;
};

}  // namespace detail
}  // namespace ctnn
