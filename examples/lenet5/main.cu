// lenet5: LeNet-5 on MNIST with ctnn's CUDA backend.
//
//   lenet5 train [--data DIR] [--epochs N] [--batch B] [--lr X] [--schedule cosine|constant]
//                [--weight-decay L] [--seed S] [--out FILE]
//   lenet5 eval --model FILE [--data DIR]
//   lenet5 predict --model FILE [--show] IMAGE...
//
// train prints the compile-time model card and the device, trains with SGD + momentum, reports each
// epoch, and saves the parameters as safetensors (atomically). eval reports a saved model's test
// accuracy. predict reads photos or scans of handwritten digits (PNG, JPEG, BMP, PGM), prepares them
// as MNIST's digits were made (see ctnn/io/image.hpp) and prints each one's digit and probabilities.
// The files load in PyTorch and back: see pytorch_interop.py next to this file.
// Exit status: 0 success, 1 error (message on stderr), 2 no CUDA device; CLI11's own codes for bad
// command lines.
#include <CLI/CLI.hpp>
#include <cuda_runtime.h>
#include <unistd.h>  // isatty

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

// This translation unit compiles stb_image's implementation (see ctnn/io/image.hpp).
#define CTNN_STB_IMPLEMENTATION
#include "ctnn/io/image.hpp"

#include "ctnn/core/cuda_check.hpp"
#include "ctnn/ctnn.hpp"
#include "ctnn/io/idx.hpp"
#include "ctnn/io/safetensors.hpp"
#include "ctnn/network/model_card.hpp"
#include "ctnn/train/cuda_trainer.hpp"

namespace {

using Net = ctnn::models::LeNet5;
static_assert(Net::param_count == 61'706);

constexpr int max_batch = 1024;  // compiled into the trainer: its device buffers are sized for it
using Trainer = ctnn::Trainer<Net, ctnn::cuda, max_batch>;

// Defaults of `lenet5 train`.
constexpr const char* default_data = ".data/mnist";
constexpr int default_epochs = 15;
constexpr int default_batch = 64;
constexpr float default_lr = 0.05f;
constexpr const char* default_schedule = "cosine";
constexpr float default_weight_decay = 1e-3f;
constexpr std::uint64_t default_seed = 1;
constexpr const char* default_out = "lenet5.safetensors";

constexpr int exit_error = 1, exit_no_device = 2;

constexpr int classes = 10;
constexpr std::size_t pixels = ctnn::io::digit_side * ctnn::io::digit_side;
static_assert(Net::output_shape::size == classes && Net::input_shape::size == pixels);

// Thrown when there is no usable CUDA device; main turns it into exit status 2.
struct no_device : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The device the trainer will use (the current one), or no_device.
std::string device_description() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) throw no_device(cudaGetErrorString(status));
  if (count == 0) throw no_device("the CUDA runtime reports 0 devices");
  int device = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess)
    throw no_device("cannot query device properties");
  char buf[96];
  std::snprintf(buf, sizeof buf, " (device %d of %d, sm_%d%d, %.1f GiB)", device, count, p.major, p.minor,
                double(p.totalGlobalMem) / double(1u << 30));
  return p.name + std::string(buf);
}

ctnn::Dataset load_split(const std::string& dir, const char* split) {
  try {
    return ctnn::io::load_mnist(dir, split);
  } catch (const ctnn::io_error& e) {
    throw ctnn::io_error(std::string(e.what()) + "\n(MNIST is expected in --data " + dir +
                         "; scripts/fetch_mnist.sh " + dir + " downloads and verifies it)");
  }
}

// A one-line progress bar on stderr, only when stderr is a terminal.
class Progress {
 public:
  Progress() : enabled_(::isatty(STDERR_FILENO) == 1) {}
  void update(int epoch, int epochs, std::size_t done, std::size_t total) {
    if (!enabled_ || total == 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;  // keep the terminal calm
    last_ = now;
    constexpr int width = 30;
    const int filled = int(double(done) / double(total) * width);
    std::fprintf(stderr, "\r  epoch %d/%d [%s%s] %3d%% %zu/%zu", epoch, epochs,
                 std::string(std::size_t(filled), '#').c_str(),
                 std::string(std::size_t(width - filled), '.').c_str(),
                 int(100.0 * double(done) / double(total)), done, total);
    std::fflush(stderr);
  }
  void clear() {
    if (enabled_) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point last_{};
};

struct TrainArgs {
  std::string data = default_data, out = default_out;
  int epochs = default_epochs, batch = default_batch;
  float lr = default_lr;
  std::string schedule = default_schedule;
  float weight_decay = default_weight_decay;
  std::uint64_t seed = default_seed;
};

// The device memory the CUDA backend takes: one allocation, sized at compile time for max_batch.
void print_cuda_arena(std::ostream& out) {
  using Arena = Trainer::network_type;
  using ctnn::detail::bytes_text;
  out << "CUDA arena (one cudaMalloc, batches up to " << max_batch << ")\n"
      << "  parameters and gradients        " << bytes_text(2 * Arena::param_floats * sizeof(float)) << '\n'
      << "  activations and their gradients " << bytes_text(2 * Arena::activation_floats * sizeof(float)) << '\n'
      << "  kernel workspace                " << bytes_text(Arena::workspace_floats * sizeof(float)) << '\n'
      << "  cuBLAS workspace                " << bytes_text(Arena::cublas_workspace_bytes) << '\n'
      << "  total                           " << bytes_text(Arena::arena_bytes) << '\n'
      << "trainer (one cudaMalloc): optimizer state and the step's buffers " << bytes_text(Trainer::trainer_bytes)
      << "\n\n";
}

int train(const TrainArgs& a) {
  const std::string device = device_description();
  ctnn::print_model_card<Net>(std::cout, std::size_t(a.batch));
  print_cuda_arena(std::cout);
  std::cout << "device: " << device << "\n";
  const ctnn::Dataset train_set = load_split(a.data, "train");
  const ctnn::Dataset test_set = load_split(a.data, "t10k");
  std::cout << "training on " << train_set.count << " images, testing on " << test_set.count << "; "
            << a.epochs << (a.epochs == 1 ? " epoch" : " epochs") << ", batch " << a.batch
            << ", learning rate " << a.lr << " (" << a.schedule << "), momentum 0.9, weight decay "
            << a.weight_decay << ", seed " << a.seed << "\n"
            << std::flush;

  Trainer trainer(a.seed);
  ctnn::TrainOptions opt;
  opt.epochs = a.epochs;
  opt.batch = a.batch;
  opt.learning_rate = a.lr;
  opt.schedule = a.schedule == "cosine" ? ctnn::LrSchedule::cosine : ctnn::LrSchedule::constant;
  trainer.optimizer.weight_decay = a.weight_decay;  // Sgd, momentum 0.9 (its default)
  opt.seed = a.seed;
  Progress progress;
  int epoch = 1;
  const auto start = std::chrono::steady_clock::now();
  opt.on_batch = [&](std::size_t done, std::size_t total) { progress.update(epoch, a.epochs, done, total); };
  opt.on_epoch = [&](const ctnn::EpochStats& s) {
    progress.clear();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf(
        "epoch %3d/%d  loss %.4f  train %6.2f%%  test %6.2f%%  %9.0f images/s  %6.2f s  elapsed %7.1f s\n",
        s.epoch, a.epochs, s.loss, 100 * s.train_accuracy, 100 * s.test_accuracy, s.images_per_second,
        s.seconds, elapsed);
    std::fflush(stdout);
    epoch = s.epoch + 1;
  };
  trainer.fit(train_set, opt, &test_set);

  trainer.save_weights(a.out);
  std::cout << "saved " << Net::param_count << " parameters and the normalisation to " << a.out << "\n";
  return 0;
}

int eval(const std::string& model, const std::string& data) {
  const std::string device = device_description();
  Trainer trainer;
  trainer.load_weights(model);  // before the data: fail fast
  const ctnn::Dataset test_set = load_split(data, "t10k");
  std::cout << "device: " << device << "\n";
  const auto start = std::chrono::steady_clock::now();
  const ctnn::Evaluation e = trainer.evaluate(test_set);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: test accuracy %.2f%% (%zu images), loss %.4f, %.3f s (%.0f images/s)\n", model.c_str(),
              100 * e.accuracy, e.count, e.loss, seconds, double(e.count) / seconds);
  return 0;
}

// The digit as a terminal picture: ' ' . : o # by brightness.
void show_digit(const ctnn::io::Digit& d) {
  for (int y = 0; y < ctnn::io::digit_side; ++y) {
    std::string row = "    ";
    for (int x = 0; x < ctnn::io::digit_side; ++x)
      row += " .:o#"[d[std::size_t(y * ctnn::io::digit_side + x)] * 5 / 256];
    std::puts(row.c_str());
  }
}

int predict(const std::string& model, const std::vector<std::string>& images, bool show) {
  const std::string device = device_description();
  Trainer trainer;
  trainer.load_weights(model);
  // Read every image first; one that cannot be read is reported and skipped.
  std::vector<std::string> names;
  std::vector<ctnn::io::Digit> digits;
  std::vector<std::uint8_t> input;  // raw pixels: the trainer normalises them as the model was trained
  int failures = 0;
  for (const auto& path : images) {
    try {
      const ctnn::io::Digit d = ctnn::io::load_digit(path);
      input.insert(input.end(), d.begin(), d.end());
      names.push_back(path);
      digits.push_back(d);
    } catch (const ctnn::io_error& e) {
      std::cerr << "lenet5: " << e.what() << "\n";
      ++failures;
    }
  }
  if (!names.empty()) {
    for (std::size_t first = 0; first < names.size(); first += max_batch) {
      const int count = int(std::min<std::size_t>(max_batch, names.size() - first));
      const std::vector<float> p = trainer.predict(input.data() + first * pixels, count);
      for (int i = 0; i < count; ++i) {
        const float* q = p.data() + std::size_t(i) * classes;
        int best = 0;
        for (int c = 1; c < classes; ++c)
          if (q[c] > q[best]) best = c;
        std::printf("%s: %d  probabilities", names[first + std::size_t(i)].c_str(), best);
        for (int c = 0; c < classes; ++c) std::printf(" %d:%.4f", c, double(q[c]));
        std::printf("\n");
        if (show) show_digit(digits[first + std::size_t(i)]);
      }
    }
  }
  if (failures)
    std::cerr << "lenet5: " << failures << " of " << images.size() << " images could not be read\n";
  return failures ? exit_error : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"LeNet-5 on MNIST with ctnn's CUDA backend: train, evaluate, predict"};
  app.require_subcommand(1);

  TrainArgs t;
  CLI::App* train_cmd = app.add_subcommand("train", "train on MNIST and save the model as safetensors");
  train_cmd->add_option("--data", t.data, "directory with the MNIST IDX files (raw or .gz)")
      ->capture_default_str();
  train_cmd->add_option("--epochs", t.epochs, "epochs")->capture_default_str()->check(CLI::Range(1, 100000));
  train_cmd->add_option("--batch", t.batch, "batch size, 1 to " + std::to_string(max_batch))
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            int b = 0;
            if (!CLI::detail::lexical_cast(s, b) || b < 1 || b > max_batch)
              return "the batch size must be between 1 and " + std::to_string(max_batch) +
                     " (the maximum this program was compiled for), got " + s;
            return {};
          },
          "1.." + std::to_string(max_batch), "batch range"));
  train_cmd->add_option("--lr", t.lr, "learning rate (SGD, momentum 0.9)")
      ->capture_default_str()
      ->check(CLI::Range(1e-6f, 10.0f));
  train_cmd->add_option("--schedule", t.schedule, "learning-rate schedule over the epochs")
      ->capture_default_str()
      ->check(CLI::IsMember({"cosine", "constant"}));
  train_cmd->add_option("--weight-decay", t.weight_decay, "L2 weight decay added to the gradient")
      ->capture_default_str()
      ->check(CLI::Range(0.0f, 1.0f));
  train_cmd->add_option("--seed", t.seed, "seed of the initial weights and of the shuffling")
      ->capture_default_str();
  train_cmd->add_option("--out", t.out, "where to save the trained model (safetensors)")
      ->capture_default_str();

  std::string model, data = default_data;
  CLI::App* eval_cmd = app.add_subcommand("eval", "report a saved model's accuracy on the MNIST test set");
  eval_cmd->add_option("--model", model, "model file (safetensors, from lenet5 train)")->required();
  eval_cmd->add_option("--data", data, "directory with the MNIST IDX files (raw or .gz)")
      ->capture_default_str();

  std::vector<std::string> images;
  bool show = false;
  CLI::App* predict_cmd = app.add_subcommand("predict", "classify images of handwritten digits");
  predict_cmd->add_option("--model", model, "model file (safetensors, from lenet5 train)")->required();
  predict_cmd->add_flag("--show", show, "also print each digit as the network sees it (28x28)");
  predict_cmd->add_option("images", images, "PNG, JPEG, BMP or PGM images, one digit each")->required();

  CLI11_PARSE(app, argc, argv);

  try {
    if (*train_cmd) return train(t);
    if (*eval_cmd) return eval(model, data);
    return predict(model, images, show);
  } catch (const no_device& e) {
    std::cerr << "lenet5: no CUDA device found: " << e.what()
              << "\n(the host backend needs none: build/examples/host_mnist/host_mnist trains on the CPU)\n";
    return exit_no_device;
  } catch (const ctnn::io_error& e) {
    std::cerr << "lenet5: " << e.what() << "\n";
  } catch (const ctnn::cuda_error& e) {
    std::cerr << "lenet5: CUDA error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "lenet5: error: " << e.what() << "\n";
  }
  return exit_error;
}
