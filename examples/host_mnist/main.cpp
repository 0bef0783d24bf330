// host_mnist: the training API on the CPU in a page, no GPU and no CUDA compiler needed.
//
//   scripts/fetch_mnist.sh                         # once: MNIST into .data/mnist
//   build/examples/host_mnist/host_mnist [DATA_DIR [MODEL_OUT]]
//
// Trains LeNet-5 on the first 10,000 MNIST training images for 3 epochs on every core, saves the
// model (safetensors, with the normalisation and class names) and evaluates it on the test set.
// The lenet5 example is the full command-line program (GPU or CPU, eval, predict, reports).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include "ctnn/ctnn.hpp"
#include "ctnn/io/idx.hpp"
#include "ctnn/train/host_trainer.hpp"

using Net = ctnn::models::LeNet5;

int main(int argc, char** argv) try {
  if (argc > 3 || (argc > 1 && std::string(argv[1]).rfind("-", 0) == 0)) {
    std::cerr << "usage: host_mnist [DATA_DIR [MODEL_OUT]]   (defaults: .data/mnist host_mnist.safetensors)\n";
    return 2;
  }
  const std::string data = argc > 1 ? argv[1] : ".data/mnist";
  const std::string out = argc > 2 ? argv[2] : "host_mnist.safetensors";

  const ctnn::Dataset all = ctnn::io::load_mnist(data, "train");
  const ctnn::Dataset train = ctnn::subset(all, 0, std::min<std::size_t>(10000, all.count));
  const ctnn::Dataset test = ctnn::io::load_mnist(data, "t10k");

  ctnn::Trainer<Net, ctnn::host, 64> trainer(/*seed=*/1);
  trainer.set_threads(int(std::max(1u, std::thread::hardware_concurrency())));
  ctnn::TrainOptions opt;
  opt.epochs = 3;
  opt.batch = 32;
  opt.learning_rate = 0.05f;
  opt.schedule = ctnn::LrSchedule::cosine;
  opt.on_epoch = [](const ctnn::EpochStats& s) {
    std::printf("epoch %d  loss %.4f  train %.2f%%  test %.2f%%  %.1f s (%.0f images/s)\n", s.epoch, s.loss,
                100 * s.train_accuracy, 100 * s.test_accuracy, s.seconds, s.images_per_second);
    std::fflush(stdout);
  };
  std::cout << "training on " << train.count << " images with " << trainer.threads() << " threads\n";
  trainer.fit(train, opt, &test);

  trainer.save_weights(out, ctnn::class_names_metadata({"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
  const ctnn::Evaluation e = trainer.evaluate(test);
  std::printf("saved %s; test accuracy %.2f%% on %zu images (loss %.4f)\n", out.c_str(), 100 * e.accuracy, e.count,
              e.loss);
  return 0;
} catch (const ctnn::io_error& e) {
  std::cerr << "host_mnist: " << e.what() << "\n";
  return 3;
} catch (const std::exception& e) {
  std::cerr << "host_mnist: " << e.what() << "\n";
  return 1;
}
