#pragma once
// Trainer<Net, cuda, MaxBatch, Optimizer, Loss>: the training API of train/trainer.hpp on the GPU,
// over a CudaNetwork<Net, MaxBatch>, driven by the shared loop (train/loop.hpp): the same shuffle,
// normalisation, loss and optimizer arithmetic as the host trainer.
//
//   ctnn::Trainer<Net, ctnn::cuda, 1024> trainer(seed);   // throws ctnn::cuda_error without a GPU
//   auto history = trainer.fit(train_set, options, &test_set);
//
// fit uploads the data sets once (DeviceDataset: uint8 pixels and labels, plus per-sample buffers),
// then per epoch uploads the epoch's order and per-step records (step number, optimizer record), sets
// the step cursor k (device memory) to 0 and, for each batch, the last partial one included, launches
// a captured CUDA graph running
//     gather + normalise the images order[k·batch, ...) and their labels (and targets); copy
//     record k → the current record (kernels/data.cuh, StepCursor)
//     the network's fused loss pass (network/fusion.hpp): forward (training mode) to the loss's layer,
//     loss and gradient, backward; for LeNet-5 seven kernels: the two conv groups' forwards, the
//     dense chain (forward, loss, backward to its input), the chain's weight gradients, conv2's
//     weight and input gradients, conv1's weight gradients
//     (the loss writes each sample's loss and correct flag into the epoch arrays at k·batch)
//     → fused optimizer update reading the current record; it also advances the cursor to k + 1
//   and at the end one device-to-host copy of the per-sample arrays, summed on the host in order.
//
// The step is captured once per fit for the full batch size and once for the tail size (the last step
// of an epoch, so its k·batch is right too). Everything in it has fixed addresses: the cursor makes
// each replay take its own slice, so the host launches the same graph with no update and the graph
// holds kernels only (the version before re-pointed four memcpy nodes before each launch).
//
// The trainer owns one device allocation of its own (the optimizer's state and the step's labels,
// targets, losses, indices and record); the network's arena holds only the network. predict adds,
// on first use, pinned host memory mapped into the device: the network kernel's inputs and outputs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/cuda_check.hpp"
#include "../core/cuda_graph.hpp"
#include "../kernels/data.cuh"
#include "../kernels/loss.cuh"
#include "../kernels/optimizer.cuh"
#include "../network/cuda_network.hpp"
#include "checkpoint.hpp"
#include "device_dataset.hpp"
#include "loop.hpp"
#include "trainer.hpp"

namespace ctnn {

template <class Net, int MaxBatch, class Opt, class Loss>
  requires is_network_v<Net>
class Trainer<Net, cuda, MaxBatch, Opt, Loss>
    : public detail::TrainingLoop<Trainer<Net, cuda, MaxBatch, Opt, Loss>, Net, MaxBatch, detail::optimizer_or_sgd<Opt>, Loss>,
      public detail::Checkpointing<Trainer<Net, cuda, MaxBatch, Opt, Loss>, Net, detail::optimizer_or_sgd<Opt>, Loss> {
  // trainer_rules reports a broken rule itself; "|| true" keeps this line from adding a second error.
  static_assert(detail::trainer_rules<Net, MaxBatch, Opt, Loss>() || true);
  using O = detail::optimizer_or_sgd<Opt>;  // Sgd stands in after a misuse, so that one message is all
  using Loop = detail::TrainingLoop<Trainer, Net, MaxBatch, O, Loss>;
  friend Loop;
  friend detail::Checkpointing<Trainer, Net, O, Loss>;
  using plan = BufferPlan<Net>;

 public:
  using network_type = CudaNetwork<Net, MaxBatch>;
  using Loop::grad_layer;
  using Loop::predict;  // predict(const std::uint8_t* pixels, int count): raw pixels
  using Loop::input_size;
  using Loop::outputs;
  using typename Loop::Record;
  static constexpr int width = int(plan::act_size[grad_layer + 1]);  // the loss's input per sample
  static constexpr bool loss_writes_probs = grad_layer + 1 < Net::layer_count;  // a fused final Softmax

  // The trainer's own device memory (byte offsets, 256-byte aligned).
  static constexpr std::size_t opt_state_floats = O::state_slots * plan::param_floats;
  static constexpr std::size_t opt_state_at = 0;
  static constexpr std::size_t labels_at = opt_state_at + detail::align_bytes(opt_state_floats * sizeof(float));
  static constexpr std::size_t targets_at = labels_at + detail::align_bytes(MaxBatch * sizeof(std::int32_t));
  static constexpr std::size_t cursor_at = targets_at + detail::align_bytes(std::size_t(MaxBatch) * width * sizeof(float));
  static constexpr std::size_t record_at = cursor_at + detail::align_bytes(sizeof(std::uint32_t));
  static constexpr std::size_t trainer_bytes = record_at + detail::align_bytes(sizeof(Record));

  // Parameters from init_parameters<Net>(seed), as the host trainer. Throws ctnn::cuda_error
  // ("ctnn: no CUDA device ...") when no GPU can be used.
  explicit Trainer(std::uint64_t seed = 1) : net_(seed) {
    CTNN_CUDA_CHECK(cudaMalloc(&mem_, trainer_bytes));
    try {
      CTNN_CUDA_CHECK(cudaMemsetAsync(mem_, 0, trainer_bytes, net_.stream()));
      net_.synchronize();
    } catch (...) {
      cudaFree(mem_);
      throw;
    }
  }
  ~Trainer() {
    net_.synchronize();
    cudaFree(mem_);
  }
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Mean loss and accuracy over a data set, in evaluation mode, normalised with mean() and stddev().
  // Uploads the data set for the call.
  Evaluation evaluate(const Dataset& data) {
    DeviceDataset device(data, SampleSpec::of<Net>(), "evaluation set", net_.stream());
    return evaluate_on(device);
  }

  // The network's outputs (probabilities after a Softmax), count × outputs, in evaluation mode, for
  // `count` already normalised images (input_shape each, batch-major), in chunks of MaxBatch. A chunk
  // the network kernel runs goes through mapped pinned memory (predict_mapped), the others through
  // the network's input and output slots.
  std::vector<float> predict(const float* normalised_images, int count) {
    if (count < 0) throw std::invalid_argument("ctnn: predict needs count >= 0, got " + std::to_string(count));
    if (count > 0 && !normalised_images) throw std::invalid_argument("ctnn: predict got a null image pointer");
    std::vector<float> out(std::size_t(count) * outputs);
    for (int done = 0, batch = 0; done < count; done += batch) {
      batch = std::min(MaxBatch, count - done);
      const float* images = normalised_images + std::size_t(done) * input_size;
      float* probs = out.data() + std::size_t(done) * outputs;
      if constexpr (network_type::has_network_kernel)
        if (network_type::runs_network_kernel(batch)) {
          predict_mapped(images, batch, probs);
          continue;
        }
      net_.upload_input(images, batch);
      net_.forward_fused(batch);
      const std::vector<float> p = net_.download_activation(Net::layer_count, batch);
      std::copy(p.begin(), p.end(), probs);
    }
    return out;
  }

  // Parameters in BufferPlan layout: BufferPlan<Net>::param_floats floats. Copied from the GPU.
  std::vector<float> parameters() const { return net_.parameters(); }
  // Replaces the parameters (same layout and size). The optimizer state is kept (load_checkpoint
  // restores it; reset_optimizer() clears it).
  void set_parameters(const std::vector<float>& params) { net_.set_parameters(params); }
  std::vector<float> layer_state() const { return net_.state_values(); }
  void set_layer_state(const std::vector<float>& s) { net_.set_state(s); }
  std::vector<float> optimizer_state() const {
    std::vector<float> h(opt_state_floats);
    CTNN_CUDA_CHECK(cudaMemcpyAsync(h.data(), opt_state(), h.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                    net_.stream()));
    net_.synchronize();
    return h;
  }
  void set_optimizer_state(const std::vector<float>& s) {
    detail::check_size("set_optimizer_state", s.size(), opt_state_floats, "state_slots x param_floats");
    CTNN_CUDA_CHECK(cudaMemcpyAsync(opt_state(), s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice,
                                    net_.stream()));
    net_.synchronize();
  }
  void reset_optimizer() {
    CTNN_CUDA_CHECK(cudaMemsetAsync(opt_state(), 0, opt_state_floats * sizeof(float), net_.stream()));
    net_.synchronize();
  }

  network_type& network() { return net_; }
  // FP32 (the default) or TF32 tensor-core matrix products for the fits, evaluations and predictions
  // that follow.
  void set_math(Math math) { net_.set_math(math); }
  // The nodes of the last captured training step (full batch, else the tail): its kernel launches and
  // copies.
  CudaGraph::NodeCounts step_graph_nodes() const { return step_nodes_; }
  // Full training steps per graph launch in the fits that follow: 0 (the default) for the measured
  // rule (steps_per_graph at every batch), or that many. The same steps run
  // in the same order either way, so the results are the same bits.
  void set_steps_per_launch(int steps) {
    if (steps < 0) throw std::invalid_argument("ctnn: set_steps_per_launch got " + std::to_string(steps) + " steps");
    steps_per_launch_ = steps;
  }

 private:
  template <class T>
  T* at(std::size_t offset) const { return reinterpret_cast<T*>(mem_ + offset); }
  float* opt_state() const { return at<float>(opt_state_at); }
  std::int32_t* labels() { return at<std::int32_t>(labels_at); }
  float* targets() { return at<float>(targets_at); }
  std::uint32_t* cursor() { return at<std::uint32_t>(cursor_at); }  // the step of the epoch
  Record* record() { return at<Record>(record_at); }

  // The loop's backend hooks (train/loop.hpp).
  void prepare(const Dataset& train, const Dataset* test, const TrainOptions& o) {
    const SampleSpec spec = SampleSpec::of<Net>();
    const std::size_t n = train.count;
    const std::size_t steps = (n + std::size_t(o.batch) - 1) / std::size_t(o.batch);
    data_ = std::make_unique<DeviceDataset>(train, spec, "training set", net_.stream(), steps * sizeof(Record));
    if (test) test_ = std::make_unique<DeviceDataset>(*test, spec, "test set", net_.stream());
    net_.set_random(&record()->step, o.seed);
    batch_ = o.batch;
    const int tail = int(n % std::size_t(batch_));
    if (tail > 0) capture_step(tail_step_, tail);
    if (n >= std::size_t(batch_)) capture_step(full_step_, batch_);
    several_ = steps_per_launch_ > 0 ? steps_per_launch_ : steps_per_graph;
    if (several_ > 1 && n >= std::size_t(batch_) * std::size_t(several_))
      full_steps_.capture(net_.stream(), [&] {
        for (int k = 0; k < several_; ++k) enqueue_step(batch_, true);
      });
  }
  void end_fit() {
    net_.synchronize();  // no queued step outlives its graph or data set
    full_step_.reset();
    full_steps_.reset();
    tail_step_.reset();
    data_.reset();
    test_.reset();
  }

  void start_epoch(const std::vector<std::uint32_t>& order, const std::vector<Record>& steps, const TrainOptions& o) {
    data_->upload_order(order);
    CTNN_CUDA_CHECK(cudaMemcpyAsync(data_->extra(), steps.data(), steps.size() * sizeof(Record),
                                    cudaMemcpyHostToDevice, net_.stream()));
    CTNN_CUDA_CHECK(cudaMemsetAsync(cursor(), 0, sizeof(std::uint32_t), net_.stream()));
    const std::size_t n = data_->count();
    std::size_t done = 0;
    for (std::size_t k = 0; k < steps.size();) {
      const int batch = int(std::min<std::size_t>(std::size_t(batch_), n - done));
      const bool several = full_steps_ && n - done >= std::size_t(batch_) * std::size_t(several_);
      (several ? full_steps_ : batch == batch_ ? full_step_ : tail_step_).launch(net_.stream());
      for (int j = 0; j < (several ? several_ : 1); ++j, ++k) {
        done += std::size_t(batch);
        if (o.on_batch) o.on_batch(done, n);
      }
    }
  }
  EpochTotals finish_epoch() {
    const DeviceDataset::Totals t = data_->totals();  // waits for the epoch
    return {t.loss, t.correct};
  }
  Evaluation evaluate_test() { return evaluate_on(*test_); }

  // Enqueues the training step k = *cursor() on `batch` samples: those whose indices are
  // order[k·batch_, k·batch_ + batch). Without `update`, the step stops before the optimizer (and
  // leaves the cursor: the warm-up before capture).
  void enqueue_step(int batch, bool update) {
    const cudaStream_t s = net_.stream();
    DeviceDataset& data = *data_;
    const kernels::StepCursor step{cursor(), std::size_t(batch_), data.extra(), reinterpret_cast<std::byte*>(record()),
                                   int(sizeof(Record))};
    // The pass gathers the step's samples (in its first kernel where it can: CudaNetwork::loss_pass_fused).
    const kernels::GatherArgs gather = kernels::gather_args<int(input_size)>(
        data.pixels(), data.labels(), data.count(), data.order(), 0, batch, this->mean(), this->stddev(), net_.input(),
        labels(), data.targets(), data.target_width(), targets(), step);
    kernels::LossRun<Loss> run = loss_run(data.target_width() > 0, data.loss(), data.correct());
    run.first = cursor(), run.first_stride = std::size_t(batch_);
    // Parameters the pass reports done early (a large Dense's, on the second stream) take their
    // optimizer step there, beside the rest of the backward; the others after the pass, the last
    // kernel advancing the cursor. Elementwise: the same bits as one step over all.
    std::vector<std::pair<std::size_t, std::size_t>> early;  // [first, end), in the order reported
    struct Reset {  // the callback refers to `early`: never left set past this pass
      network_type& net;
      ~Reset() { net.on_parameters_done(nullptr); }
    } reset{net_};
    if (update)
      net_.on_parameters_done([&](std::size_t first, std::size_t count, cudaStream_t side) {
        kernels::optimizer_step_range<O>(side, net_.params(), net_.grads(), opt_state(), plan::param_floats, first,
                                         count, record()->hyper);
        early.emplace_back(first, first + count);
      });
    net_.loss_pass_fused(batch, Mode::train, run, true, &gather);
    if (!update || plan::param_floats == 0) return;
    std::sort(early.begin(), early.end());
    std::size_t at = 0;
    for (std::size_t k = 0; k + 1 < early.size(); ++k) {  // the gaps before each early range but the last
      if (early[k].first > at)
        kernels::optimizer_step_range<O>(s, net_.params(), net_.grads(), opt_state(), plan::param_floats, at,
                                         early[k].first - at, record()->hyper);
      at = early[k].second;
    }
    // The rest in one launch, the last early range its hole.
    const auto [hole, hole_end] = early.empty() ? std::pair<std::size_t, std::size_t>(at, at) : early.back();
    kernels::optimizer_step_range<O>(s, net_.params(), net_.grads(), opt_state(), plan::param_floats, at,
                                     plan::param_floats - at, record()->hyper, cursor(), hole, hole_end - hole);
  }

  // The step's labels (and targets), and where the loss of each sample goes.
  kernels::LossRun<Loss> loss_run(bool with_targets, float* loss, std::int32_t* correct_flags) {
    return {this->loss, labels(), with_targets ? targets() : nullptr, loss, correct_flags};
  }

  void capture_step(CudaGraph& step, int batch) {
    // Warm-up outside the capture: every kernel and cuBLAS call of the step runs once eagerly (so any
    // lazy initialisation happens here, and a bad launch fails with a plain error), without the
    // optimizer, so the parameters are untouched and the cursor stays at 0; the layer state a training
    // forward updates is put back. It writes only scratch: activations, gradients, the step's buffers,
    // the first step's per-sample losses.
    const std::vector<float> state = net_.state_values();
    CTNN_CUDA_CHECK(cudaMemsetAsync(cursor(), 0, sizeof(std::uint32_t), net_.stream()));
    enqueue_step(batch, false);
    net_.synchronize();
    net_.set_state(state);
    step.capture(net_.stream(), [&] { enqueue_step(batch, true); });
    step_nodes_ = step.node_counts();
  }

  // The largest chunk the network kernel runs, and the staging for it: its inputs, then its outputs.
  static constexpr int mapped_batch = [] {
    if constexpr (network_type::has_network_kernel) return std::min(MaxBatch, network_type::network_kernel::max_batch);
    else return 0;
  }();
  static constexpr std::size_t staging_floats = std::size_t(mapped_batch) * (input_size + std::size_t(outputs));
  struct FreeHost {
    void operator()(float* p) const { cudaFreeHost(p); }
  };

  // One chunk through the network kernel, which reads the images from pinned host memory mapped into
  // the device and writes the outputs back there: no copies on the stream, and no pageable memory
  // for the driver to stage (batch-1 latency, issue 9). The staging is allocated on first use. A
  // single image, from the second on, replays a captured launch (the staging never moves): a graph's
  // launch reaches the GPU sooner than the kernel's own.
  void predict_mapped(const float* images, int batch, float* probs) {
    constexpr std::size_t outputs_at = std::size_t(mapped_batch) * input_size;
    if (!staging_device_) {
      float* p = nullptr;
      CTNN_CUDA_CHECK(cudaHostAlloc(&p, staging_floats * sizeof(float), cudaHostAllocMapped));
      staging_.reset(p);
      CTNN_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&staging_device_), p, 0));
    }
    std::memcpy(staging_.get(), images, std::size_t(batch) * input_size * sizeof(float));
    if (batch == 1 && one_image_) {
      one_image_.launch(net_.stream());
    } else {
      net_.forward_network_kernel(batch, staging_device_, staging_device_ + outputs_at);
      if (batch == 1)  // (after a launch: the kernel's attributes are set outside the capture)
        one_image_.capture(net_.stream(), [&] { net_.forward_network_kernel(1, staging_device_, staging_device_ + outputs_at); });
    }
    net_.synchronize();
    std::memcpy(probs, staging_.get() + outputs_at, std::size_t(batch) * std::size_t(outputs) * sizeof(float));
  }

  Evaluation evaluate_on(DeviceDataset& data) {
    const cudaStream_t s = net_.stream();
    const std::size_t n = data.count();
    for (std::size_t done = 0; done < n;) {
      const int batch = int(std::min<std::size_t>(MaxBatch, n - done));
      kernels::gather_normalize<int(input_size)>(s, data.pixels(), data.labels(), n, nullptr, done, batch,
                                                 this->mean(), this->stddev(), net_.input(), labels(),
                                                 data.targets(), data.target_width(), targets());
      net_.loss_pass_fused(batch, Mode::eval, loss_run(data.target_width() > 0, data.loss() + done, data.correct() + done),
                           false);
      done += std::size_t(batch);
    }
    const DeviceDataset::Totals totals = data.totals();
    Evaluation e;
    e.count = n;
    e.loss = totals.loss / double(n);
    e.accuracy = double(totals.correct) / double(n);
    return e;
  }

  network_type net_;
  std::byte* mem_ = nullptr;
  std::unique_ptr<float, FreeHost> staging_;  // predict_mapped's, on the host
  float* staging_device_ = nullptr;           // the same memory, as the device addresses it
  std::unique_ptr<DeviceDataset> data_, test_;
  // Full steps go steps_per_graph to a graph launch. Between two graph launches the GPU idles about
  // 1.5 µs; inside a graph the next step's first kernel is a dependent launch of the optimizer's (H100,
  // CUPTI timeline of LeNet-5's step, 2026-11-27). LeNet-5 epochs with 8 steps a launch: 6.7% shorter
  // at batch 32, 2.9% at 64; at 256 and 512 first 1.5-2% longer (the chain's weight gradient then ran
  // beside conv2's data gradient and took 2.4 times as long), so until the pooled weight gradients and
  // the backward data by columns (thirteenth stop) only below batch 256; with them 3.5% shorter at 256,
  // 2% at 1,024 (docs/fusion.md). The graph of one full step takes the epoch's last few.
#ifdef CTNN_STEPS_PER_GRAPH  // (for measuring)
  static constexpr int steps_per_graph = CTNN_STEPS_PER_GRAPH;
#else
  static constexpr int steps_per_graph = 8;
#endif
  int steps_per_launch_ = 0;  // set_steps_per_launch
  int several_ = 1;           // full steps in full_steps_ (this fit)
  CudaGraph full_step_, full_steps_, tail_step_;
  CudaGraph one_image_;  // predict_mapped's forward of one image
  CudaGraph::NodeCounts step_nodes_{};
  int batch_ = 0;
};

}  // namespace ctnn
