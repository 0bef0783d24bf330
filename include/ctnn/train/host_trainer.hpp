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
//
// Threads (set_threads(n), default 1; std::thread, one HostNetwork replica per extra thread):
//   evaluate and predict split the images into n contiguous ranges, one per thread; every sample's
//   arithmetic is what one thread does, and the totals are summed in sample order, so the results
//   are bit-identical for every n.
//   A training step splits its batch into n contiguous shards: each thread runs forward and backward
//   on its shard with the step's parameters, the loss and its gradient are computed over the whole
//   batch at once (as with one thread), and the shards' parameter gradients are added in shard order
//   0, 1, ..., n−1 before the optimizer step. Results are deterministic for a given n, and identical
//   to the one-thread trainer's for n = 1; for n > 1 they differ from it by the rounding of that sum.
//   A network with layer state (BatchNorm: batch statistics) or a layer that draws random numbers
//   per element without counting from ForwardArgs::first_sample (a layer declaring `static constexpr
//   bool draws_random = true`; Dropout counts from it, so a shard draws its own part of the step's
//   mask) trains on one thread whatever n is (detail::shardable<Net>()). A Residual block shards when
//   every layer inside it does.
#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../core/normalize.hpp"
#include "../network/host_network.hpp"
#include "../network/residual.hpp"
#include "checkpoint.hpp"
#include "loop.hpp"
#include "trainer.hpp"

namespace ctnn {
namespace detail {

// Whether layer L's forward and backward give the same result on a shard of a step as on the whole step.
template <class L>
struct layer_splits {
  static constexpr bool value = [] {
    if constexpr (requires { L::draws_random; }) return !L::draws_random;
    return true;
  }();
};
template <class... Ls>
struct layer_splits<Residual<Seq<Ls...>>> {
  static constexpr bool value = (layer_splits<Ls>::value && ...);
};

// Whether a training step of Net may be split into shards of its batch with the same result as one
// step up to rounding: no layer state and no layer whose arithmetic depends on a sample's position.
template <class Net>
constexpr bool shardable() {
  if constexpr (BufferPlan<Net>::state_floats != 0) {
    return false;
  } else {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (layer_splits<typename Net::template layer_at<I>>::value && ...);
    }(std::make_index_sequence<Net::layer_count>{});
  }
}

}  // namespace detail

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
  using Loop::predict;  // predict(const std::uint8_t* pixels, int count): raw pixels
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

  // The threads evaluate, predict and fit use (see the top of this file); 1 by default.
  void set_threads(int n) {
    if (n < 1 || n > 1024)
      throw std::invalid_argument("ctnn: set_threads needs 1..1024 threads, got " + std::to_string(n));
    threads_ = n;
    while (int(workers_.size()) > n - 1) workers_.pop_back();
    while (int(workers_.size()) < n - 1) workers_.push_back(std::make_unique<Worker>());
  }
  int threads() const { return threads_; }

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
    const int lanes = std::max(1, std::min(threads_, count / min_chunk));
    parallel(lanes, [&](int lane) {
      HostNetwork<Net, float>& net = lane == 0 ? net_ : workers_[std::size_t(lane - 1)]->net;
      if (lane > 0) net.params() = net_.params(), net.state() = net_.state();
      const int end = int(std::int64_t(count) * (lane + 1) / lanes);
      for (int done = int(std::int64_t(count) * lane / lanes); done < end;) {
        const int batch = std::min(MaxBatch, end - done);
        const float* p = net.forward(normalised_images + std::size_t(done) * input_size, batch);
        std::copy(p, p + std::size_t(batch) * outputs, out.begin() + std::ptrdiff_t(done) * outputs);
        done += batch;
      }
    });
    return out;
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
      if (threads_ > 1 && detail::shardable<Net>() && batch >= 2 * min_shard) {
        sharded_step(batch, StepRandom{o.seed, r.step});
      } else {
        net_.forward(input_.data(), batch, Mode::train, StepRandom{o.seed, r.step});
        run_loss(batch, grad_.data());
        net_.backward(grad_.data(), batch, grad_layer);
      }
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
    if (threads_ > 1 && data.count >= std::size_t(2 * min_chunk)) return evaluate_parallel(data, order);
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

  // evaluate_set over threads: per-sample losses and flags into arrays, summed in sample order.
  Evaluation evaluate_parallel(const Dataset& data, const std::vector<std::uint32_t>& order) {
    const std::size_t n = data.count;
    std::vector<float> loss(n);
    std::vector<std::int32_t> correct(n);
    const int lanes = int(std::min<std::size_t>(std::size_t(threads_), n / std::size_t(min_chunk)));
    parallel(lanes, [&](int lane) {
      Worker* w = lane == 0 ? nullptr : workers_[std::size_t(lane - 1)].get();
      HostNetwork<Net, float>& net = w ? w->net : net_;
      if (w) net.params() = net_.params(), net.state() = net_.state();
      float* input = w ? w->input.data() : input_.data();
      std::int32_t* labels = w ? w->labels.data() : labels_.data();
      float* targets = w ? w->targets.data() : targets_.data();
      const std::size_t end = n * std::size_t(lane + 1) / std::size_t(lanes);
      for (std::size_t done = n * std::size_t(lane) / std::size_t(lanes); done < end;) {
        const int batch = int(std::min<std::size_t>(MaxBatch, end - done));
        const bool has_labels = load_into(data, order.data() + done, batch, input, labels, targets);
        net.forward(input, batch, Mode::eval);
        Loss::host(this->loss, net.activation(grad_layer + 1, batch), has_labels ? labels : nullptr,
                   data.targets.empty() ? nullptr : targets, batch, int(width), nullptr, loss.data() + done,
                   correct.data() + done, nullptr);
        done += std::size_t(batch);
      }
    });
    for (std::size_t i = 0; i < n; ++i) totals_.loss += double(loss[i]);
    for (std::size_t i = 0; i < n; ++i) totals_.correct += correct[i] ? 1 : 0;
    Evaluation e;
    e.count = n;
    e.loss = totals_.loss / double(n);
    e.accuracy = double(totals_.correct) / double(n);
    return e;
  }

  // One training step's forward, loss and backward over shards of the batch (input_, labels_ and
  // targets_ loaded): net_.grads() ends as the sum of the shards' gradients in shard order.
  void sharded_step(int batch, StepRandom random) {
    const int lanes = std::min(threads_, batch / min_shard);
    auto first = [&](int lane) { return int(std::int64_t(batch) * lane / lanes); };
    parallel(lanes, [&](int lane) {
      HostNetwork<Net, float>& net = lane == 0 ? net_ : workers_[std::size_t(lane - 1)]->net;
      if (lane > 0) net.params() = net_.params();
      const int begin = first(lane), size = first(lane + 1) - begin;
      net.forward(input_.data() + std::size_t(begin) * input_size, size, Mode::train,
                  StepRandom{random.seed, random.step, std::uint64_t(begin)});
      const float* z = net.activation(grad_layer + 1, size);
      std::copy(z, z + std::size_t(size) * width, logits_.begin() + std::ptrdiff_t(std::size_t(begin) * width));
    });
    Loss::host(this->loss, logits_.data(), has_labels_ ? labels_.data() : nullptr,
               has_targets_ ? targets_.data() : nullptr, batch, int(width), grad_.data(), sample_loss_.data(),
               sample_correct_.data(), nullptr);
    parallel(lanes, [&](int lane) {
      HostNetwork<Net, float>& net = lane == 0 ? net_ : workers_[std::size_t(lane - 1)]->net;
      const int begin = first(lane), size = first(lane + 1) - begin;
      net.backward(grad_.data() + std::size_t(begin) * width, size, grad_layer);
    });
    std::vector<float>& g = net_.grads();
    for (int lane = 1; lane < lanes; ++lane) {
      const std::vector<float>& h = workers_[std::size_t(lane - 1)]->net.grads();
      for (std::size_t k = 0; k < g.size(); ++k) g[k] += h[k];
    }
  }

  // Runs f(0) .. f(lanes − 1), f(0) on this thread and the others on threads of their own; rethrows
  // the first exception (by lane) after all have finished.
  template <class F>
  static void parallel(int lanes, F&& f) {
    if (lanes <= 1) return f(0);
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(lanes));
    std::vector<std::thread> pool;
    pool.reserve(std::size_t(lanes - 1));
    for (int lane = 1; lane < lanes; ++lane)
      pool.emplace_back([&, lane] {
        try {
          f(lane);
        } catch (...) {
          errors[std::size_t(lane)] = std::current_exception();
        }
      });
    try {
      f(0);
    } catch (...) {
      errors[0] = std::current_exception();
    }
    for (std::thread& t : pool) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
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
    has_labels_ = load_into(d, indices, batch, input_.data(), labels_.data(), targets_.data());
    has_targets_ = !d.targets.empty();
  }
  // Normalised images, labels and targets of samples `indices` into the buffers; whether d has labels.
  bool load_into(const Dataset& d, const std::uint32_t* indices, int batch, float* input, std::int32_t* labels,
                 float* targets) const {
    const bool has_labels = !d.labels.empty(), has_targets = !d.targets.empty();
    for (int n = 0; n < batch; ++n) {
      const std::size_t id = indices[n];
      normalize_pixels(d.pixels.data() + id * input_size, input_size, this->mean(), this->stddev(),
                       input + std::size_t(n) * input_size);
      if (has_labels) labels[n] = d.labels[id];
      if (has_targets)
        std::copy(d.targets.begin() + std::ptrdiff_t(id * width), d.targets.begin() + std::ptrdiff_t((id + 1) * width),
                  targets + std::size_t(n) * width);
    }
    return has_labels;
  }

  // An extra thread's network and batch buffers.
  struct Worker {
    HostNetwork<Net, float> net{MaxBatch};
    std::vector<float> input = std::vector<float>(std::size_t(MaxBatch) * input_size);
    std::vector<std::int32_t> labels = std::vector<std::int32_t>(std::size_t(MaxBatch));
    std::vector<float> targets = std::vector<float>(std::size_t(MaxBatch) * width);
  };
  // Work smaller than this per thread is not split further (thread start-up would dominate).
  static constexpr int min_chunk = 16, min_shard = 4;

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
  int threads_ = 1;
  std::vector<std::unique_ptr<Worker>> workers_;               // threads_ − 1
  std::vector<float> logits_ = std::vector<float>(std::size_t(MaxBatch) * width);  // sharded steps
};

}  // namespace ctnn
