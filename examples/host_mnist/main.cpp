// host_mnist: train LeNet-5 on a subset of MNIST with ctnn's host (CPU) backend.
//
//   scripts/fetch_mnist.sh                 # once: MNIST into .data/mnist
//   build/examples/host_mnist/host_mnist --train 10000 --test 2000 --epochs 3
//
// The same network type trains on the GPU with Trainer<Net, ctnn::cuda, MaxBatch>; the host backend
// is the reference, and slow: expect a few hundred images per second per core.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>

#include "ctnn/ctnn.hpp"
#include "ctnn/io/idx.hpp"
#include "ctnn/network/model_card.hpp"
#include "ctnn/train/host_trainer.hpp"

using Net = ctnn::models::LeNet5;
constexpr int max_batch = 256;

// The first n images of d (all of them when n is larger).
static ctnn::Dataset head(const ctnn::Dataset& d, std::size_t n) { return ctnn::subset(d, 0, std::min(n, d.count)); }

int main(int argc, char** argv) {
  CLI::App app{"Train LeNet-5 on a subset of MNIST with ctnn's host (CPU) backend"};
  std::string data = ".data/mnist";
  std::size_t train_count = 10000, test_count = 2000;
  ctnn::TrainOptions opt;
  opt.epochs = 3;
  opt.batch = 32;
  opt.learning_rate = 0.01f;
  std::uint64_t init_seed = 1;
  app.add_option("--data", data, "directory with the four MNIST IDX files (raw or .gz)")->capture_default_str();
  app.add_option("--train", train_count, "training images to use (the first N)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--test", test_count, "test images to evaluate on (the first N)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--epochs", opt.epochs, "epochs")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_option("--batch", opt.batch, "batch size, 1.." + std::to_string(max_batch))
      ->capture_default_str()->check(CLI::Range(1, max_batch));
  app.add_option("--lr", opt.learning_rate, "learning rate (SGD with momentum 0.9)")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", init_seed, "seed of the initial weights and of the shuffling")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  opt.seed = init_seed;

  ctnn::Dataset train, test;
  try {
    train = head(ctnn::io::load_mnist(data, "train"), train_count);
    test = head(ctnn::io::load_mnist(data, "t10k"), test_count);
  } catch (const std::exception& e) {
    std::cerr << "host_mnist: cannot load MNIST from '" << data << "': " << e.what() << "\n"
              << "Run scripts/fetch_mnist.sh to download it into .data/mnist, or pass --data DIR.\n";
    return 1;
  }

  ctnn::print_model_card<Net>(std::cout, std::size_t(opt.batch));
  std::cout << "training on " << train.count << " images, testing on " << test.count << ", batch "
            << opt.batch << ", learning rate " << opt.learning_rate << ", " << opt.epochs << " epochs\n";

  try {
    ctnn::Trainer<Net, ctnn::host, max_batch> trainer(init_seed);
    opt.on_epoch = [](const ctnn::EpochStats& s) {
      std::printf("epoch %2d  loss %.4f  train %.2f%%  test %.2f%%  %.1f s  (%.0f images/s)\n", s.epoch,
                  s.loss, 100 * s.train_accuracy, 100 * s.test_accuracy, s.seconds, s.images_per_second);
      std::fflush(stdout);
    };
    trainer.fit(train, opt, &test);
    const ctnn::Evaluation e = trainer.evaluate(test);
    std::printf("final test accuracy %.2f%% on %zu images (loss %.4f)\n", 100 * e.accuracy, e.count, e.loss);
  } catch (const std::exception& e) {
    std::cerr << "host_mnist: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
