// The CUDA trainer against the host trainer, and learning on MNIST:
//   1. training steps (GPU gather + normalise, forward, fused softmax cross-entropy, backward, fused
//      SGD with momentum, all in the captured step graph) change the parameters as the host trainer's
//      steps do on the same batch: a full batch (37 = the batch size), then a tail batch (20 < 64,
//      momentum carried over); epoch loss and accuracy agree; evaluate and predict agree;
//   2. bad input (batch out of range, images of the wrong shape, labels out of range) is refused
//      with a clear std::invalid_argument;
//   3. LeNet-5, one epoch on the 60,000 MNIST training images, reaches >= 97% test accuracy.
// The network of part 1 is smooth (Tanh, Sigmoid, average pooling): with ReLU or max pooling, a
// value that float rounding puts on the other side of a kink would make host and GPU gradients
// differ by a whole term; whole-network gradients through ReLU and max pooling are compared
// exactly in test_network.cu.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/io/idx.hpp>
#include <ctnn/train/cuda_trainer.hpp>
#include <ctnn/train/host_trainer.hpp>

#include "gpu_test.hpp"

#ifndef CTNN_MNIST_DIR
#error "CTNN_MNIST_DIR must name the MNIST directory (set by tests/gpu/CMakeLists.txt)"
#endif

namespace {

using namespace ctnn;

// 3x16x16 -> 6x8x8 (stride 2, pad 1) -> avg 6x4x4 -> 32 -> 10.
using Smooth = Network<Seq<Conv<6, 3, Stride<2>, Pad<1>>, Tanh, AvgPool<2>,
                           Dense<32>, Sigmoid,
                           Dense<10>, Softmax>,
                       Input<3, 16, 16>>;
using LeNet5 = Network<Seq<Conv<6, 5, Pad<2>>, ReLU, Pool<2>,
                           Conv<16, 5>, ReLU, Pool<2>,
                           Dense<120>, ReLU,
                           Dense<84>, ReLU,
                           Dense<10>, Softmax>,
                       Input<1, 28, 28>>;

int passed = 0, failed = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  ok ? ++passed : ++failed;
}

io::Dataset random_dataset(std::size_t count, std::size_t channels, std::size_t rows, std::size_t cols,
                           std::uint64_t seed) {
  Random rng(seed);
  io::Dataset d;
  d.count = count, d.rows = rows, d.cols = cols;
  d.pixels.resize(count * channels * rows * cols);
  for (auto& p : d.pixels) p = std::uint8_t(rng.below(256));
  d.labels.resize(count);
  for (auto& l : d.labels) l = std::uint8_t(rng.below(10));
  return d;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, double(std::fabs(x)));
  return m;
}

// The parameter change of each tensor on the GPU against the host's: within 1e-3 of the host's
// largest change in that tensor.
template <class Net>
void compare_updates(const std::vector<float>& before, const std::vector<float>& gpu_after,
                     const std::vector<float>& host_after, const std::string& what) {
  using plan = BufferPlan<Net>;
  for (std::size_t i = 0; i < Net::layer_count; ++i)
    for (int bias = 0; bias < 2; ++bias) {
      const std::size_t at = bias ? plan::bias_offset[i] : plan::weight_offset[i];
      const std::size_t n = bias ? plan::bias_count[i] : plan::weight_count[i];
      if (n == 0) continue;
      std::vector<float> got(n), want(n);
      for (std::size_t k = 0; k < n; ++k) {
        got[k] = gpu_after[at + k] - before[at + k];
        want[k] = host_after[at + k] - before[at + k];
      }
      const std::string name = what + ": change of layer " + std::to_string(i) + (bias ? " bias" : " weight");
      const bool moved = max_abs(want) > 0;
      const bool ok = ctnn_test::close(got, want, name.c_str(), 1e-3, 1e-3 * max_abs(want) + 1e-9);
      check(ok && moved, name + (moved ? "" : " (the host's step did not move it)"));
    }
}

void compare_stats(const EpochStats& gpu, const EpochStats& host, std::size_t count, const std::string& what) {
  const double dl = std::fabs(gpu.loss - host.loss);
  check(dl <= 1e-5 * std::fabs(host.loss) + 1e-6,
        what + ": epoch loss " + std::to_string(gpu.loss) + " vs host " + std::to_string(host.loss));
  // An argmax may tie differently within rounding; allow one sample.
  const double da = std::fabs(gpu.train_accuracy - host.train_accuracy) * double(count);
  check(da <= 1.0 + 1e-9, what + ": epoch accuracy " + std::to_string(gpu.train_accuracy) + " vs host " +
                              std::to_string(host.train_accuracy));
}

void test_steps_match_host() {
  constexpr int max_batch = 64;
  Trainer<Smooth, ctnn::host, max_batch> host_trainer(21);
  Trainer<Smooth, ctnn::cuda, max_batch> gpu_trainer(21);
  {
    const std::vector<float>& h = host_trainer.parameters();
    const std::vector<float> g = gpu_trainer.parameters();
    check(g.size() == h.size() && std::memcmp(g.data(), h.data(), g.size() * sizeof(float)) == 0,
          "smooth net: GPU and host trainers start from the same parameters");
  }

  TrainOptions opt;
  opt.epochs = 1;
  opt.learning_rate = 0.1f;
  opt.momentum = 0.9f;
  opt.mean = 0.45f, opt.std = 0.25f;
  opt.seed = 5;

  // A data set of exactly one full batch: the shuffle only permutes the samples inside the batch, and
  // the batch gradient does not depend on their order.
  const io::Dataset first = random_dataset(37, 3, 16, 16, 101);
  opt.batch = 37;
  std::vector<float> before = host_trainer.parameters();
  const std::vector<EpochStats> hs1 = host_trainer.fit(first, opt);
  const std::vector<EpochStats> gs1 = gpu_trainer.fit(first, opt);
  compare_updates<Smooth>(before, gpu_trainer.parameters(), host_trainer.parameters(), "full batch of 37");
  if (hs1.size() == 1 && gs1.size() == 1) compare_stats(gs1[0], hs1[0], first.count, "full batch of 37");
  else check(false, "fit returned one EpochStats per epoch");

  // Then one partial batch (20 samples, batch size 64: only the tail graph runs), from the parameters
  // and momentum the first step left.
  const io::Dataset second = random_dataset(20, 3, 16, 16, 102);
  opt.batch = 64;
  before = host_trainer.parameters();
  const std::vector<EpochStats> hs2 = host_trainer.fit(second, opt);
  const std::vector<EpochStats> gs2 = gpu_trainer.fit(second, opt);
  compare_updates<Smooth>(before, gpu_trainer.parameters(), host_trainer.parameters(),
                          "tail batch of 20 with momentum");
  if (hs2.size() == 1 && gs2.size() == 1) compare_stats(gs2[0], hs2[0], second.count, "tail batch of 20");

  // Evaluation and prediction from the trained parameters. Make both sides use the GPU's
  // parameters exactly, so only the evaluation itself is compared.
  host_trainer.set_parameters(gpu_trainer.parameters());
  const io::Dataset eval = random_dataset(150, 3, 16, 16, 103);  // 64 + 64 + 22
  const Evaluation he = host_trainer.evaluate(eval), ge = gpu_trainer.evaluate(eval);
  check(ge.count == he.count && std::fabs(ge.loss - he.loss) <= 1e-5 * std::fabs(he.loss) + 1e-6,
        "evaluate: loss " + std::to_string(ge.loss) + " vs host " + std::to_string(he.loss));
  check(std::fabs(ge.accuracy - he.accuracy) * double(eval.count) <= 1.0 + 1e-9,
        "evaluate: accuracy " + std::to_string(ge.accuracy) + " vs host " + std::to_string(he.accuracy));

  const int count = 70;  // 64 + 6
  const std::vector<float> images = ctnn_test::random_vector(std::size_t(count) * Smooth::input_shape::size, 104);
  const std::vector<float> hp = host_trainer.predict(images.data(), count);
  const std::vector<float> gp = gpu_trainer.predict(images.data(), count);
  check(ctnn_test::close(gp, hp, "predict: probabilities", 1e-4, 1e-6), "predict matches the host");
}

template <class F>
void expect_invalid(const std::string& what, const std::string& needle, F&& f) {
  std::string message = "(no exception)";
  bool ok = false;
  try {
    f();
  } catch (const std::invalid_argument& e) {
    message = e.what();
    ok = message.find(needle) != std::string::npos;
  } catch (const std::exception& e) {
    message = std::string("wrong exception type: ") + e.what();
  }
  check(ok, what + ": " + message);
}

void test_bad_input() {
  Trainer<LeNet5, ctnn::cuda, 64> trainer(1);
  const io::Dataset good = random_dataset(10, 1, 28, 28, 201);
  TrainOptions opt;
  opt.batch = 65;
  expect_invalid("batch above MaxBatch", "outside 1..64", [&] { trainer.fit(good, opt); });
  opt.batch = 0;
  expect_invalid("batch 0", "outside 1..64", [&] { trainer.fit(good, opt); });
  opt.batch = 8;
  expect_invalid("32x32 images for a 1x28x28 network", "expects 1x28x28",
                 [&] { trainer.fit(random_dataset(10, 1, 32, 32, 202), opt); });
  io::Dataset bad_label = good;
  bad_label.labels[3] = 10;
  expect_invalid("label 10 for 10 classes", "label 10 of image 3", [&] { trainer.evaluate(bad_label); });
  io::Dataset short_pixels = good;
  short_pixels.pixels.resize(short_pixels.pixels.size() - 1);
  expect_invalid("too few pixels", "pixel values, expected", [&] { trainer.fit(short_pixels, opt); });
}

void test_mnist() {
  io::Dataset train, test;
  try {
    train = io::load_mnist(CTNN_MNIST_DIR, "train");
    test = io::load_mnist(CTNN_MNIST_DIR, "t10k");
  } catch (const std::exception& e) {
    check(false, std::string("cannot load MNIST from " CTNN_MNIST_DIR ": ") + e.what() +
                     "\n     run scripts/fetch_mnist.sh (it puts MNIST into .data/mnist) and rerun");
    return;
  }
  // Under compute-sanitizer (CTNN_QUICK set) a full epoch takes too long: train on a slice instead,
  // which still runs every kernel and both step graphs (the slice leaves a partial last batch).
  const bool quick = std::getenv("CTNN_QUICK") != nullptr;
  if (quick) {
    train.count = 3000 + 37;
    train.pixels.resize(train.count * train.rows * train.cols);
    train.labels.resize(train.count);
    test.count = 1000;
    test.pixels.resize(test.count * test.rows * test.cols);
    test.labels.resize(test.count);
  }
  Trainer<LeNet5, ctnn::cuda, 256> trainer(1);
  TrainOptions opt;
  opt.epochs = 1;
  opt.batch = 64;
  opt.learning_rate = 0.01f;
  opt.momentum = 0.9f;
  const std::vector<EpochStats> history = trainer.fit(train, opt, &test);
  if (history.size() != 1) {
    check(false, "MNIST: fit returned one EpochStats");
    return;
  }
  const EpochStats& s = history[0];
  std::printf("MNIST epoch: loss %.4f, train accuracy %.2f%%, test accuracy %.2f%%, %.3f s (%.0f images/s)\n",
              s.loss, 100 * s.train_accuracy, 100 * s.test_accuracy, s.seconds, s.images_per_second);
  if (quick)
    check(s.test_accuracy >= 0.80, "MNIST (quick slice): LeNet-5 after one epoch on 3,037 images classifies >= 80%");
  else
    check(s.test_accuracy >= 0.97, "MNIST: LeNet-5 after one epoch classifies >= 97% of the test set");
  const Evaluation e = trainer.evaluate(test);
  check(e.count == test.count && e.accuracy == s.test_accuracy,
        "MNIST: evaluate after fit gives the accuracy fit reported (" + std::to_string(e.accuracy) + ")");
}

}  // namespace

int main() {
  ctnn_test::require_cuda_device();
  for (auto [name, test] : {std::pair{"steps match the host", &test_steps_match_host},
                            std::pair{"bad input", &test_bad_input}, std::pair{"MNIST", &test_mnist}}) {
    try {
      test();
    } catch (const std::exception& e) {
      check(false, std::string(name) + ": unexpected exception: " + e.what());
    }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
