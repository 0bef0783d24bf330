#pragma once
// Trainer<Net, host, MaxBatch, Optimizer, Loss>: the training API of train/trainer.hpp on the CPU,
// over a HostNetwork<Net, float>, driven by the shared loop (train/loop.hpp). It is the reference the
// CUDA trainer is compared with: the same shuffle, normalisation, loss and optimizer arithmetic.
//
//   ctnn::Trainer<Net, ctnn::host, 64> trainer(seed);
//   auto history = trainer.fit(train_set, options, &test_set);  // one EpochStats per epoch
//
// Each step: normalise a batch of images, forward in training mode, the loss on grad_layer's output
// (for softmax cross-entropy the logits: the fused gradient ŷ − y), backward from there, one
// optimizer step.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/normalize.hpp"
#include "../network/host_network.hpp"
#include "checkpoint.hpp"
#include "loop.hpp"
#include "trainer.hpp"

namespace ctnn {

template <class Net, int MaxBatch, class Opt, class Loss>
  requires is_network_v<Net>
class Trainer<Net, host, MaxBatch, Opt, Loss>
    : public detail::TrainingLoop<Trainer<Net, host, MaxBatch, Opt, Loss>, Net, MaxBatch, detail::optimizer_or_sgd<Opt>, Loss>,
      public detail::Checkpointing<Trainer<Net, host, MaxBatch, Opt, Loss>, Net, detail::optimizer_or_sgd<Opt>, Loss> {
  // trainer_rules reports a broken rule itself; "|| true" keeps this line from adding a second error.
  static_assert(detail::trainer_rules<Net, MaxBatch, Opt, Loss>() || true);
  using O = detail::optimizer_or_sgd<Opt>;  // Sgd stands in after a misuse, so that one message is all
  using Loop = detail::TrainingLoop<Trainer, Net, MaxBatch, O, Loss>;
  friend Loop;
  friend detail::Checkpointing<Trainer, Net, O, Loss>;
  using plan = BufferPlan<Net>;

 public:
  using Loop::grad_layer;
  using Loop::input_size;
  using Loop::outputs;
  using typename Loop::Record;
  static constexpr std::size_t width = plan::act_size[grad_layer + 1];  // the loss's input per sample

  // Parameters and state from init_parameters<Net>(seed).
  explicit Trainer(std::uint64_t seed = 1)
      : net_(MaxBatch, seed),
        opt_state_(O::state_slots * plan::param_floats, 0.f),
        input_(std::size_t(MaxBatch) * input_size),
        labels_(std::size_t(MaxBatch)),
        targets_(std::size_t(MaxBatch) * width),
        grad_(std::size_t(MaxBatch) * width),
        sample_loss_(std::size_t(MaxBatch)),
        sample_correct_(std::size_t(MaxBatch)) {}

  // Mean loss and accuracy over a data set, in evaluation mode, normalised with mean() and stddev().
  Evaluation evaluate(const Dataset& data) {
    check_dataset(data, SampleSpec::of<Net>(), "evaluation set");
    return evaluate_set(data);
  }

  // The network's outputs (probabilities after a Softmax), count × outputs, in evaluation mode, for
  // `count` already normalised images (input_shape each, batch-major).
  std::vector<float> predict(const float* normalised_images, int count) {
    if (count < 0) throw std::invalid_argument("ctnn: predict needs count >= 0, got " + std::to_string(count));
    if (count > 0 && !normalised_images) throw std::invalid_argument("ctnn: predict got a null image pointer");
    std::vector<float> out(std::size_t(count) * outputs);
    for (int done = 0; done < count;) {
      const int batch = std::min(MaxBatch, count - done);
      const float* p = net_.forward(normalised_images + std::size_t(done) * input_size, batch);
      std::copy(p, p + std::size_t(batch) * outputs, out.begin() + std::ptrdiff_t(done) * outputs);
      done += batch;
    }
    return out;
  }
  // The same for raw uint8 pixels, normalised here with mean() and stddev().
  std::vector<float> predict(const std::uint8_t* pixels, int count) {
    if (count < 0) throw std::invalid_argument("ctnn: predict needs count >= 0, got " + std::to_string(count));
    std::vector<float> x(std::size_t(count) * input_size);
    if (count > 0) normalize_pixels(pixels, x.size(), this->mean(), this->stddev(), x.data());
    return predict(x.data(), count);
  }

  // Parameters in BufferPlan layout: BufferPlan<Net>::param_floats floats, each tensor at its offset.
  const std::vector<float>& parameters() const { return net_.params(); }
  // Replaces the parameters (same layout and size). The optimizer state is kept (load_checkpoint
  // restores it; reset_optimizer() clears it).
  void set_parameters(const std::vector<float>& params) {
    detail::check_size("set_parameters", params.size(), plan::param_floats, "BufferPlan::param_floats");
    net_.params() = params;
  }
  // The layers' non-trainable state (BufferPlan::state_floats floats).
  const std::vector<float>& layer_state() const { return net_.state(); }
  void set_layer_state(const std::vector<float>& state) {
    detail::check_size("set_layer_state", state.size(), plan::state_floats, "BufferPlan::state_floats");
    net_.state() = state;
  }
  // The optimizer's state: O::state_slots arrays of param_floats floats.
  const std::vector<float>& optimizer_state() const { return opt_state_; }
  void set_optimizer_state(const std::vector<float>& s) {
    detail::check_size("set_optimizer_state", s.size(), opt_state_.size(), "state_slots x param_floats");
    opt_state_ = s;
  }
  void reset_optimizer() { std::fill(opt_state_.begin(), opt_state_.end(), 0.f); }

  HostNetwork<Net, float>& network() { return net_; }

 private:
  // The loop's backend hooks (train/loop.hpp).
  void prepare(const Dataset& train, const Dataset* test, const TrainOptions&) {
    train_ = &train;
    test_ = test;
  }
  void end_fit() { train_ = test_ = nullptr; }

  void start_epoch(const std::vector<std::uint32_t>& order, const std::vector<Record>& steps, const TrainOptions& o) {
    totals_ = {};
    const std::size_t n = train_->count;
    std::size_t done = 0;
    for (const Record& r : steps) {
      const int batch = int(std::min<std::size_t>(std::size_t(o.batch), n - done));
      load_batch(*train_, order.data() + done, batch);
      net_.forward(input_.data(), batch, Mode::train, StepRandom{o.seed, r.step});
      run_loss(batch, grad_.data());
      net_.backward(grad_.data(), batch, grad_layer);
      optimizer_step<O>(net_.params().data(), net_.grads().data(), opt_state_.data(), plan::param_floats, r.hyper);
      add_totals(batch);
      done += std::size_t(batch);
      if (o.on_batch) o.on_batch(done, n);
    }
  }
  EpochTotals finish_epoch() { return totals_; }
  Evaluation evaluate_test() { return evaluate_set(*test_); }

  Evaluation evaluate_set(const Dataset& data) {
    std::vector<std::uint32_t> order(data.count);
    for (std::size_t i = 0; i < data.count; ++i) order[i] = std::uint32_t(i);
    totals_ = {};
    for (std::size_t done = 0; done < data.count;) {
      const int batch = int(std::min<std::size_t>(MaxBatch, data.count - done));
      load_batch(data, order.data() + done, batch);
      net_.forward(input_.data(), batch, Mode::eval);
      run_loss(batch, nullptr);
      add_totals(batch);
      done += std::size_t(batch);
    }
    Evaluation e;
    e.count = data.count;
    e.loss = totals_.loss / double(data.count);
    e.accuracy = double(totals_.correct) / double(data.count);
    return e;
  }

  void run_loss(int batch, float* grad) {
    Loss::host(this->loss, net_.activation(grad_layer + 1, batch), has_labels_ ? labels_.data() : nullptr,
               has_targets_ ? targets_.data() : nullptr, batch, int(width), grad, sample_loss_.data(),
               sample_correct_.data(), nullptr);
  }
  // Per-sample sums in sample order, in double, as the CUDA trainer does.
  void add_totals(int batch) {
    for (int i = 0; i < batch; ++i) totals_.loss += double(sample_loss_[std::size_t(i)]);
    for (int i = 0; i < batch; ++i) totals_.correct += sample_correct_[std::size_t(i)] ? 1 : 0;
  }

  void load_batch(const Dataset& d, const std::uint32_t* indices, int batch) {
    has_labels_ = !d.labels.empty();
    has_targets_ = !d.targets.empty();
    for (int n = 0; n < batch; ++n) {
      const std::size_t id = indices[n];
      normalize_pixels(d.pixels.data() + id * input_size, input_size, this->mean(), this->stddev(),
                       input_.data() + std::size_t(n) * input_size);
      if (has_labels_) labels_[std::size_t(n)] = d.labels[id];
      if (has_targets_)
        std::copy(d.targets.begin() + std::ptrdiff_t(id * width), d.targets.begin() + std::ptrdiff_t((id + 1) * width),
                  targets_.begin() + std::ptrdiff_t(std::size_t(n) * width));
    }
  }

  HostNetwork<Net, float> net_;
  std::vector<float> opt_state_;
  std::vector<float> input_;
  std::vector<std::int32_t> labels_;
  std::vector<float> targets_, grad_, sample_loss_;
  std::vector<std::int32_t> sample_correct_;
  bool has_labels_ = true, has_targets_ = false;
  const Dataset* train_ = nullptr;
  const Dataset* test_ = nullptr;
  EpochTotals totals_;
};

}  // namespace ctnn
