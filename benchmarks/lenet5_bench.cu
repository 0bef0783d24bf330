// LeNet-5 on MNIST through ctnn's CUDA backend: training time per epoch, test accuracy, inference
// throughput and batch-1 latency. Prints a table and one machine line per measurement,
//   RESULT framework=ctnn mode=<eager|graph> batch=<B> metric=<m> value=<v>
// with the metric names of benchmarks/pytorch_lenet5.py (compare the two with compare.py), plus
//   DEVICE name="<cudaDeviceProp::name>"
//
// What is measured (see also the NOTE lines the program prints):
//   epoch_s      Trainer<Net, cuda, 1024>::fit, one call per batch size on a fresh trainer: 1 warm-up
//                epoch, then --epochs timed epochs; each epoch timed with the host's steady clock
//                between consecutive on_epoch callbacks (the trainer has synchronised with the device
//                by then: the epoch's loss and accuracy are in the stats); the median is reported.
//   test_acc     Trainer::evaluate on the 10k test images after the timed epochs, in percent.
//   step_kernels, step_copies  kernel and memcpy nodes of the trainer's captured training step.
//   infer_img_s  the 10k test images, normalised once and resident on the device, through the last
//                trained network (that of the last --batches entry), by the fused plan
//                (CudaNetwork::forward_fused): in chunks of 1024 through the
//                trainer's CudaNetwork<Net, 1024>, and in one chunk of 10,000 through a
//                CudaNetwork<Net, 10000> holding the same parameters. Per chunk a device-to-device copy
//                into the network's input slot and a forward pass (Softmax included). eager: launched by
//                the host each pass; graph: the whole pass captured once as a CUDA graph and replayed.
//                CUDA events around a pass; median of --infer-runs passes after 3 warm-up passes. Each
//                path first classifies the test set once and must agree with Trainer::evaluate.
//   latency_us   batch 1, median of --latency-iters after 50 warm-up: host clock from issue to the
//                stream's synchronisation, covering a device-to-device copy of one resident image into
//                the input slot and the forward (eager: launched; graph: one captured forward replayed).
//   eval_img_s   (ctnn only) Trainer::evaluate over the 10k test images from host memory (whatever it
//                includes: normalisation, upload, forward, loss), median of --infer-runs.
//   predict_us   (ctnn only) Trainer::predict of one normalised image from host memory (whatever it
//                includes: for LeNet-5 a copy into mapped pinned memory, the network kernel (after the
//                first call, a replayed graph of it) reading it and writing the 10 probabilities there,
//                the stream's synchronisation, a copy out);
//                median as latency_us.
//   latency_in_place_us  (ctnn only) eager, batch 1: host clock from issue to the stream's
//                synchronisation of CudaNetwork::forward_network_kernel(1, x, output()) with x the
//                resident test image where it lies: the forward with no copy; median as latency_us.
//   resident_us  (ctnn only) ResidentPredictor::predict of one normalised image from host memory: the
//                network kernel kept resident (network/resident_predictor.hpp) reads it from a mailbox of
//                mapped pinned memory and writes the probabilities back there; no launch, no stream
//                synchronisation; host clock around the call, median of --latency-iters after 50 warm-up.
//                First checked bit for bit against Trainer::predict on 16 test images.
//   latency_floor_us  (ctnn only) latency_us's graph with the copy of the image alone, no forward.
//   path_network_kernel_us, path_groups_us  (ctnn only) latency_us at batches 1, 2, 4, ..., 1024 for
//                each of the two paths forward_fused chooses between (CudaNetwork::forward_network_kernel,
//                forward_groups), each captured as a graph: the copy of `batch` resident images + forward.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include <ctnn/ctnn.hpp>
#include <ctnn/io/idx.hpp>
#include <ctnn/train/cuda_trainer.hpp>
#include <ctnn/core/normalize.hpp>

namespace {

using Net = ctnn::models::LeNet5;
static_assert(Net::param_count == 61'706, "LeNet-5 as in DESIGN.md has 61,706 parameters");

constexpr int max_batch = 1024;
using Trainer = ctnn::Trainer<Net, ctnn::cuda, max_batch>;
constexpr std::size_t image_floats = Net::input_shape::size;
constexpr int classes = int(Net::output_shape::size);
constexpr int latency_warmup = 50;
constexpr int infer_warmup = 3;
constexpr int whole_test_set = 10'000;  // MNIST's test images: inference in one batch

using Clock = std::chrono::steady_clock;

struct Options {
  std::string data = ".data/mnist";
  std::vector<int> batches{64, 256, 1024};
  int epochs = 5;
  float lr = 0.01f, momentum = 0.9f;
  std::uint64_t seed = 0;
  int infer_runs = 20;
  int latency_iters = 1000;
  std::size_t limit = 0;  // training images per epoch, 0: all
  bool quick = false;
  bool serial_weight_gradients = false;  // CudaNetwork::set_concurrent_weight_gradients(false)
};

// The command line, through CLI11: --help lists every option; a bad value exits with status 2.
Options parse_options(int argc, char** argv) {
  Options o;
  CLI::App app{"lenet5_bench: LeNet-5 training and inference timings with ctnn's CUDA backend"};
  auto finite = CLI::Validator(
      [](std::string& s) -> std::string {
        float v = 0;
        if (!CLI::detail::lexical_cast(s, v) || !std::isfinite(v) || v < 0 || v > 10)
          return "expected a finite number from 0 to 10, got " + s.substr(0, 24);
        return {};
      },
      "0..10", "finite");
  app.add_option("--data", o.data, "MNIST IDX files, raw or .gz")->capture_default_str();
  app.add_option("--batches", o.batches, "training batch sizes, each 1..1024, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, max_batch))
      ->capture_default_str();
  auto* epochs = app.add_option("--epochs", o.epochs, "timed epochs after 1 warm-up epoch")
                     ->check(CLI::Range(1, 1000))
                     ->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate (as pytorch_lenet5.py)")->check(finite)->capture_default_str();
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(finite)->capture_default_str();
  app.add_option("--seed", o.seed, "initialisation and shuffling seed")->capture_default_str();
  auto* runs = app.add_option("--infer-runs", o.infer_runs, "timed inference passes over the test set")
                   ->check(CLI::Range(1, 100000))
                   ->capture_default_str();
  auto* iters = app.add_option("--latency-iters", o.latency_iters, "timed batch-1 forwards")
                    ->check(CLI::Range(1, 10000000))
                    ->capture_default_str();
  auto* limit = app.add_option("--limit", o.limit, "train on the first N images only (0: all 60,000)")
                    ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 31))
                    ->capture_default_str();
  app.add_flag("--serial-weight-gradients", o.serial_weight_gradients,
               "train with the weight gradients on the network's stream after the data gradients, not on a "
               "second stream beside them (for comparison)");
  app.add_flag("--quick", o.quick, "smoke test: --epochs 1 --limit 2048 --infer-runs 3 --latency-iters 100");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    std::exit(e.get_exit_code() == 0 ? 0 : 2);
  }
  if (o.quick) {  // explicit values win over --quick's
    if (epochs->count() == 0) o.epochs = 1;
    if (limit->count() == 0) o.limit = 2048;
    if (runs->count() == 0) o.infer_runs = 3;
    if (iters->count() == 0) o.latency_iters = 100;
  }
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) throw std::logic_error("median of no samples");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Owning wrappers for the few CUDA objects the benchmark makes itself.
struct DeviceFloats {
  float* ptr = nullptr;
  explicit DeviceFloats(std::size_t n) { CTNN_CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(float))); }
  ~DeviceFloats() { cudaFree(ptr); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
};
struct Event {
  cudaEvent_t e = nullptr;
  Event() { CTNN_CUDA_CHECK(cudaEventCreate(&e)); }
  ~Event() { cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};
struct Graph {
  cudaGraphExec_t exec = nullptr;
  Graph() = default;
  // Captures whatever `enqueue` puts on `stream` into an executable graph.
  template <class F>
  Graph(cudaStream_t stream, F&& enqueue) {
    cudaGraph_t graph = nullptr;
    CTNN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaStreamEndCapture(stream, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    CTNN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CTNN_CUDA_CHECK(status);
  }
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(cudaStream_t stream) const { CTNN_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }
};

// Milliseconds between two events recorded around enqueue() on stream.
template <class F>
double event_seconds(cudaStream_t stream, const Event& start, const Event& stop, F&& enqueue) {
  CTNN_CUDA_CHECK(cudaEventRecord(start.e, stream));
  enqueue();
  CTNN_CUDA_CHECK(cudaEventRecord(stop.e, stream));
  CTNN_CUDA_CHECK(cudaEventSynchronize(stop.e));
  float ms = 0;
  CTNN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, stop.e));
  return double(ms) / 1e3;
}

void report(const std::string& mode, int batch, const char* metric, double value, int decimals) {
  std::printf("RESULT framework=ctnn mode=%s batch=%d metric=%s value=%.*f\n", mode.c_str(), batch, metric, decimals,
              value);
  std::fflush(stdout);
}

struct TrainRun {
  int batch = 0;
  double epoch_s = 0, trainer_epoch_s = 0, test_acc = 0, final_loss = 0;
  ctnn::CudaGraph::NodeCounts step{};  // nodes of the captured training step
};

// Trains a fresh trainer; leaves it in `trainer`.
TrainRun train(const Options& o, int batch, const ctnn::Dataset& train_set, const ctnn::Dataset& test_set,
               std::unique_ptr<Trainer>& trainer) {
  trainer = std::make_unique<Trainer>(o.seed);
  trainer->network().set_concurrent_weight_gradients(!o.serial_weight_gradients);
  ctnn::TrainOptions t;
  t.epochs = 1 + o.epochs;  // the first is the warm-up
  t.batch = batch;
  t.learning_rate = o.lr;
  trainer->optimizer.momentum = o.momentum;
  t.seed = o.seed;
  // A cut-down run (--limit) may take a few steps an epoch, too few to leave chance at batch 1,024
  // (--quick: 2); only a full run's epochs say that training is stuck.
  t.stop_when_stuck = o.limit == 0;
  std::vector<double> wall, own;
  double loss = 0;
  Clock::time_point last = Clock::now();
  t.on_epoch = [&](const ctnn::EpochStats& s) {
    const double elapsed = seconds_since(last);
    if (s.epoch > 1) {
      wall.push_back(elapsed);
      own.push_back(s.seconds);
    }
    loss = s.loss;
    std::fprintf(stderr, "  batch %d epoch %d%s: %.4f s (trainer: %.4f s), loss %.4f, train acc %.2f%%\n", batch,
                 s.epoch, s.epoch == 1 ? " (warm-up)" : "", elapsed, s.seconds, s.loss, 100 * s.train_accuracy);
    last = Clock::now();
  };
  trainer->fit(train_set, t);
  TrainRun r;
  r.batch = batch;
  r.epoch_s = median(wall);
  r.trainer_epoch_s = median(own);
  r.final_loss = loss;
  r.step = trainer->step_graph_nodes();
  r.test_acc = 100 * trainer->evaluate(test_set).accuracy;
  // A fingerprint of the trained parameters' bits: two builds that train alike print the same one.
  std::uint64_t fnv = 0xcbf29ce484222325ull;
  for (const float v : trainer->parameters()) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 0; i < 4; ++i) fnv = (fnv ^ ((bits >> (8 * i)) & 0xffu)) * 0x100000001b3ull;
  }
  std::printf("CHECK batch %d: FNV-1a of the parameters after training %016llx\n", batch, (unsigned long long)fnv);
  return r;
}

struct Throughput {
  double eager_img_s = 0, graph_img_s = 0;
};

// Images per second of forward passes over the device-resident, normalised test set `x` (n images)
// through `net` in chunks of Network::max_batch: eager launches, then one captured graph per pass.
// First checks that this path classifies as many images right as evaluate() did (`evaluated`).
template <class Network>
Throughput measure_inference(Network& net, const float* x, const ctnn::Dataset& test, double evaluated,
                             int runs) {
  constexpr int chunk = Network::max_batch;
  const int n = int(test.count);
  const cudaStream_t stream = net.stream();
  auto enqueue_chunk = [&](int at) {
    const int b = std::min(chunk, n - at);
    CTNN_CUDA_CHECK(cudaMemcpyAsync(net.input(), x + std::size_t(at) * image_floats,
                                    std::size_t(b) * image_floats * sizeof(float), cudaMemcpyDeviceToDevice,
                                    stream));
    net.forward_fused(b);
    return b;
  };
  auto enqueue_pass = [&] {
    for (int at = 0; at < n; at += chunk) enqueue_chunk(at);
  };

  std::size_t correct = 0;
  for (int at = 0; at < n; at += chunk) {
    const int b = enqueue_chunk(at);
    const std::vector<float> p = net.download_activation(Net::layer_count, b);
    for (int i = 0; i < b; ++i) {
      const float* row = p.data() + std::size_t(i) * classes;
      correct += std::size_t(std::max_element(row, row + classes) - row == test.labels[std::size_t(at + i)]);
    }
  }
  // evaluate() takes its argmax from the cross-entropy kernel, this from the probabilities: rounding
  // may break a near-tie differently, so a couple of images may differ, not more.
  if (std::abs(double(correct) - evaluated) > 3)
    throw std::runtime_error("forward passes of " + std::to_string(chunk) + " classify " + std::to_string(correct) +
                             " test images right but evaluate() " + std::to_string(evaluated) +
                             ": the inference benchmark would not measure what evaluate() computes");
  std::printf("CHECK forward in chunks of %d on device-resident data: %zu of %d right, evaluate(): %.0f\n", chunk,
              correct, n, evaluated);

  Throughput r;
  const Event start, stop;
  std::vector<double> t;
  for (int i = 0; i < infer_warmup; ++i) enqueue_pass();
  for (int i = 0; i < runs; ++i) t.push_back(event_seconds(stream, start, stop, enqueue_pass));
  r.eager_img_s = n / median(t);
  report("eager", chunk, "infer_img_s", r.eager_img_s, 1);

  const Graph pass(stream, enqueue_pass);
  t.clear();
  for (int i = 0; i < infer_warmup; ++i) pass.launch(stream);
  for (int i = 0; i < runs; ++i) t.push_back(event_seconds(stream, start, stop, [&] { pass.launch(stream); }));
  r.graph_img_s = n / median(t);
  report("graph", chunk, "infer_img_s", r.graph_img_s, 1);
  return r;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse_options(argc, argv);

  int device = 0, devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "lenet5_bench: error: no usable CUDA device (%s)\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    return 1;
  }
  CTNN_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CTNN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int runtime = 0, driver = 0;
  CTNN_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CTNN_CUDA_CHECK(cudaDriverGetVersion(&driver));
  std::printf("DEVICE name=\"%s\"\n", prop.name);
  std::printf("CTNN version=%d.%d.%d cuda_runtime=%d driver=%d sm=%d.%d\n", ctnn::version_major,
              ctnn::version_minor, ctnn::version_patch, runtime, driver, prop.major, prop.minor);
  std::printf("CONFIG trainer=Trainer<LeNet5,cuda,%d> dtype=fp32 lr=%g momentum=%g seed=%llu epochs=%d"
              " infer_runs=%d latency_iters=%d\n",
              max_batch, double(o.lr), double(o.momentum), (unsigned long long)o.seed, o.epochs, o.infer_runs,
              o.latency_iters);

  ctnn::Dataset train_set = ctnn::io::load_mnist(o.data, "train");
  const ctnn::Dataset test_set = ctnn::io::load_mnist(o.data, "t10k");
  if (o.limit && o.limit < train_set.count) {
    train_set.count = o.limit;
    train_set.pixels.resize(o.limit * image_floats);
    train_set.labels.resize(o.limit);
  }
  std::printf("DATA train=%zu test=%zu epochs=%d (+1 warm-up)\n", train_set.count, test_set.count, o.epochs);
  std::fflush(stdout);

  // Trainer<Net, cuda, ·>::fit launches captured CUDA graphs of its steps: 8 steps a graph below batch
  // 256, else one (train/cuda_trainer.hpp).
  const std::string train_mode = "graph";

  // ---- training ----
  std::vector<TrainRun> runs;
  std::unique_ptr<Trainer> trainer;
  for (int batch : o.batches) {
    runs.push_back(train(o, batch, train_set, test_set, trainer));
    report(train_mode, batch, "epoch_s", runs.back().epoch_s, 6);
    report(train_mode, batch, "test_acc", runs.back().test_acc, 2);
    report(train_mode, batch, "step_kernels", double(runs.back().step.kernels), 0);
    report(train_mode, batch, "step_copies", double(runs.back().step.copies), 0);
  }

  // ---- inference, through the last trained network ----
  auto& net = trainer->network();
  const cudaStream_t stream = net.stream();
  const int n_test = int(test_set.count);
  std::vector<float> test_x(test_set.count * image_floats);
  const ctnn::TrainOptions defaults;
  ctnn::normalize_pixels(test_set.pixels.data(), test_x.size(), defaults.mean, defaults.std, test_x.data());
  const DeviceFloats test_dev(test_x.size());
  CTNN_CUDA_CHECK(cudaMemcpy(test_dev.ptr, test_x.data(), test_x.size() * sizeof(float), cudaMemcpyHostToDevice));
  const double evaluated = trainer->evaluate(test_set).accuracy * n_test;

  const Throughput chunked = measure_inference(net, test_dev.ptr, test_set, evaluated, o.infer_runs);

  std::vector<double> t;
  for (int i = 0; i < infer_warmup; ++i) trainer->evaluate(test_set);
  for (int i = 0; i < o.infer_runs; ++i) {
    const auto t0 = Clock::now();
    trainer->evaluate(test_set);
    t.push_back(seconds_since(t0));
  }
  const double eval_img_s = n_test / median(t);
  report("eager", max_batch, "eval_img_s", eval_img_s, 1);

  // ---- batch-1 latency ----
  auto copy_image = [&](int i) {
    CTNN_CUDA_CHECK(cudaMemcpyAsync(net.input(), test_dev.ptr + std::size_t(i % n_test) * image_floats,
                                    image_floats * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  };
  // Median host time of run_one(i) after the warm-up; with `synchronise`, each call ends with the
  // stream's synchronisation (inside the time) and starts from an idle stream.
  auto latency = [&](auto&& run_one, bool synchronise = true) {
    std::vector<double> us;
    for (int i = 0; i < latency_warmup + o.latency_iters; ++i) {
      if (synchronise) CTNN_CUDA_CHECK(cudaStreamSynchronize(stream));
      const auto t0 = Clock::now();
      run_one(i);
      if (synchronise) CTNN_CUDA_CHECK(cudaStreamSynchronize(stream));
      if (i >= latency_warmup) us.push_back(seconds_since(t0) * 1e6);
    }
    return median(us);
  };
  const double eager_us = latency([&](int i) {
    copy_image(i);
    net.forward_fused(1);
  });
  report("eager", 1, "latency_us", eager_us, 3);
  double graph_us = 0;
  {
    const Graph one(stream, [&] { net.forward_fused(1); });
    graph_us = latency([&](int i) {
      copy_image(i);
      one.launch(stream);
    });
    report("graph", 1, "latency_us", graph_us, 3);
  }
  // The floor under those: the same copy of one image, captured alone (graph launch, the copy, the
  // stream's synchronisation, the host clock).
  double floor_us = 0;
  {
    const Graph copy_only(stream, [&] { copy_image(0); });
    floor_us = latency([&](int) { copy_only.launch(stream); });
    report("graph", 1, "latency_floor_us", floor_us, 3);
  }
  const double predict_us = latency([&](int i) {
    trainer->predict(test_x.data() + std::size_t(i % n_test) * image_floats, 1);
  });
  report("eager", 1, "predict_us", predict_us, 3);
  double in_place_us = 0;
  if constexpr (Trainer::network_type::has_network_kernel) {
    in_place_us = latency([&](int i) {
      net.forward_network_kernel(1, test_dev.ptr + std::size_t(i % n_test) * image_floats, net.output());
    });
    report("eager", 1, "latency_in_place_us", in_place_us, 3);
  }
  double resident_us = 0;
  if constexpr (Trainer::network_type::has_network_kernel) {
    // (in a scope of its own: nothing may wait for the whole device while it runs)
    ctnn::ResidentPredictor resident(net);
    std::vector<float> probs(ctnn::ResidentPredictor<Trainer::network_type>::outputs);
    for (int i = 0; i < 16; ++i) {  // the same bits as Trainer::predict
      const float* image = test_x.data() + std::size_t(i) * image_floats;
      resident.predict(image, 1, probs.data());
      const std::vector<float> want = trainer->predict(image, 1);
      if (std::memcmp(probs.data(), want.data(), want.size() * sizeof(float)) != 0)
        throw std::runtime_error("ResidentPredictor disagrees with Trainer::predict on test image " + std::to_string(i));
    }
    resident_us = latency(
        [&](int i) { resident.predict(test_x.data() + std::size_t(i % n_test) * image_floats, 1, probs.data()); },
        false);  // (nothing runs on the stream: the answer is in host memory when predict returns)
    report("eager", 1, "resident_us", resident_us, 3);
  }

  // ---- the two inference paths by batch (what forward_fused chooses between) ----
  struct PathRow {
    int batch;
    double kernel_us, groups_us;
  };
  std::vector<PathRow> paths;
  for (int b = 1; b <= max_batch; b *= 2) {
    auto copy_batch = [&](int i) {
      CTNN_CUDA_CHECK(cudaMemcpyAsync(net.input(), test_dev.ptr + std::size_t(i * b % (n_test - b)) * image_floats,
                                      std::size_t(b) * image_floats * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    };
    const Graph groups(stream, [&] { net.forward_groups(b); });
    const double groups_us = latency([&](int i) {
      copy_batch(i);
      groups.launch(stream);
    });
    double kernel_us = 0;
    if constexpr (Trainer::network_type::has_network_kernel) {
      const Graph kernel(stream, [&] { net.forward_network_kernel(b); });
      kernel_us = latency([&](int i) {
        copy_batch(i);
        kernel.launch(stream);
      });
    }
    report("graph", b, "path_network_kernel_us", kernel_us, 3);
    report("graph", b, "path_groups_us", groups_us, 3);
    paths.push_back({b, kernel_us, groups_us});
  }

  // ---- inference, the whole test set as one batch (as pytorch_lenet5.py's default) ----
  Throughput whole;
  if (n_test <= whole_test_set) {
    auto big = std::make_unique<ctnn::CudaNetwork<Net, whole_test_set>>(o.seed);
    big->set_parameters(trainer->parameters());
    whole = measure_inference(*big, test_dev.ptr, test_set, evaluated, o.infer_runs);
  }

  std::printf("NOTE ctnn epoch_s: host steady clock between consecutive on_epoch callbacks of one fit() "
              "(1 warm-up epoch + %d timed); the trainer has synchronised by then\n", o.epochs);
  std::printf("NOTE ctnn infer_img_s: test set resident and normalised on the device; per chunk (batch) a "
              "device-to-device copy into the network's input slot + forward (Softmax included); CUDA events\n");
  std::printf("NOTE ctnn latency_us: host clock, device-to-device copy of one resident image into the input "
              "slot + forward + stream synchronise\n");
  std::printf("NOTE ctnn eval_img_s: Trainer::evaluate from host memory (uint8 test set), host clock\n");
  std::printf("NOTE ctnn predict_us: Trainer::predict of one normalised image from host memory (the network "
              "kernel reading it from mapped pinned memory and writing the probabilities there), host clock\n");
  std::printf("NOTE ctnn resident_us: ResidentPredictor::predict of one normalised image from host memory "
              "(the resident network kernel, one multiprocessor held; no launch), host clock\n");
  std::printf("NOTE ctnn latency_in_place_us: host clock, the network kernel's forward of one resident image "
              "where it lies (no copy) + stream synchronise\n");

  // ---- human-readable summary ----
  std::printf("\nLeNet-5 / MNIST, ctnn %d.%d.%d (CUDA backend, training step: %s) on %s\n", ctnn::version_major,
              ctnn::version_minor, ctnn::version_patch, train_mode == "graph" ? "CUDA graph" : "eager launches",
              prop.name);
  std::printf("%-6s %6s %10s %12s %12s %9s %14s\n", "mode", "batch", "epoch_s", "(trainer's)", "train img/s",
              "test_acc%", "step launches");
  for (const TrainRun& r : runs)
    std::printf("%-6s %6d %10.4f %12.4f %12.0f %9.2f %5zu + %zu copies\n", train_mode.c_str(), r.batch, r.epoch_s,
                r.trainer_epoch_s, double(train_set.count) / r.epoch_s, r.test_acc, r.step.kernels, r.step.copies);
  std::printf("%-22s %6s %12s\n", "inference", "batch", "img/s");
  std::printf("%-22s %6d %12.0f\n", "forward, eager", max_batch, chunked.eager_img_s);
  std::printf("%-22s %6d %12.0f\n", "forward, graph", max_batch, chunked.graph_img_s);
  if (whole.eager_img_s > 0) {
    std::printf("%-22s %6d %12.0f\n", "forward, eager", whole_test_set, whole.eager_img_s);
    std::printf("%-22s %6d %12.0f\n", "forward, graph", whole_test_set, whole.graph_img_s);
  }
  std::printf("%-22s %6d %12.0f\n", "Trainer::evaluate", max_batch, eval_img_s);
  std::printf("%-22s %6s %12s\n", "latency", "batch", "us");
  std::printf("%-22s %6d %12.1f\n", "forward, eager", 1, eager_us);
  std::printf("%-22s %6d %12.1f\n", "forward, graph", 1, graph_us);
  if (in_place_us > 0) std::printf("%-22s %6d %12.1f\n", "in place, eager", 1, in_place_us);
  std::printf("%-22s %6d %12.1f\n", "Trainer::predict", 1, predict_us);
  if (resident_us > 0) std::printf("%-22s %6d %12.1f\n", "ResidentPredictor", 1, resident_us);
  std::printf("%-22s %6d %12.1f\n", "floor: the copy alone", 1, floor_us);
  std::printf("inference paths, graph latency (us), forward_fused's choice marked *: network kernel up to batch %d\n",
              Trainer::network_type::runs_network_kernel(1) ? CTNN_NETWORK_KERNEL_MAX_BATCH : 0);
  std::printf("%6s %14s %14s\n", "batch", "network kernel", "groups");
  for (const PathRow& r : paths) {
    const bool k = Trainer::network_type::runs_network_kernel(r.batch);
    std::printf("%6d %13.1f%s %13.1f%s\n", r.batch, r.kernel_us, k ? "*" : " ", r.groups_us, k ? " " : "*");
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "lenet5_bench: error: %s\n", e.what());
  return 1;
}
