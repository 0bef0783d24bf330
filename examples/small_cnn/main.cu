// small_cnn: a small modern CNN (BatchNorm, a Residual block, LeakyReLU, GlobalAvgPool, Dropout)
// trained on MNIST or Fashion-MNIST on the GPU.
//
//   build/examples/small_cnn/small_cnn [DATA_DIR [OUT_DIR [EPOCHS]]]   (defaults .data/mnist . 3)
//
// Writes to OUT_DIR:
//   small_cnn.safetensors          the model (layers.<i>.weight, layers.4.<j>.weight inside the block,
//                                  BatchNorm's running_mean/running_var/num_batches_tracked)
//   small_cnn_deploy.safetensors   Deploy<Net>: BatchNorm folded into the convolutions, Dropout gone
//   small_cnn_test_probs.bin       the test set's class probabilities (float32, [count][10])
// and prints the accuracy of both forms, the epoch times and how far the folded model's
// probabilities are from the model's. pytorch_compare.py loads small_cnn.safetensors into the same
// architecture in PyTorch and compares its predictions with small_cnn_test_probs.bin;
// reference_forward.py does the same without PyTorch (plain Python, PyTorch's layer definitions).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/io/idx.hpp"

using namespace ctnn;

using SmallCnn = Seq<Conv<16, 3, Pad<1>>, BatchNorm, ReLU,                                   // 0-2    16x28x28
                     Pool<2>,                                                               // 3      16x14x14
                     Residual<Seq<Conv<16, 3, Pad<1>>, BatchNorm, ReLU, Conv<16, 3, Pad<1>>, BatchNorm>>,  // 4
                     ReLU,                                                                  // 5
                     Conv<32, 3, Pad<1>, Stride<2>>, BatchNorm, LeakyReLU<>,                // 6-8    32x7x7
                     GlobalAvgPool,                                                         // 9      32
                     Dropout<0.2f>,                                                         // 10
                     Dense<10>, Softmax>;                                                   // 11-12
using Net = Network<SmallCnn, Input<1, 28, 28>>;
constexpr int max_batch = 256;

int main(int argc, char** argv) try {
  const std::string data = argc > 1 ? argv[1] : ".data/mnist";
  const std::string out = argc > 2 ? argv[2] : ".";
  const int epochs = argc > 3 ? std::stoi(argv[3]) : 3;
  const Dataset train = io::load_mnist(data, "train");
  const Dataset test = io::load_mnist(data, "t10k");
  print_model_card<Net>(std::cout, 128);

  Trainer<Net, ctnn::cuda, max_batch> trainer(/*seed=*/1);
  TrainOptions opt;
  opt.epochs = epochs;
  opt.batch = 128;
  opt.learning_rate = 0.05f;
  opt.schedule = LrSchedule::cosine;
  opt.on_epoch = [](const EpochStats& s) {
    std::printf("epoch %d  loss %.4f  train %.2f%%  test %.2f%%  %.2f s (%.0f images/s)\n", s.epoch, s.loss,
                100 * s.train_accuracy, 100 * s.test_accuracy, s.seconds, s.images_per_second);
    std::fflush(stdout);
  };
  trainer.fit(train, opt, &test);
  const Evaluation e = trainer.evaluate(test);
  trainer.save_weights(out + "/small_cnn.safetensors");
  std::printf("test accuracy %.2f%% (loss %.4f) on %zu images\n", 100 * e.accuracy, e.loss, e.count);

  // The test set's probabilities, for pytorch_compare.py.
  const int count = int(test.count);
  const std::vector<float> probs = trainer.predict(test.pixels.data(), count);
  std::ofstream(out + "/small_cnn_test_probs.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(probs.data()), std::streamsize(probs.size() * sizeof(float)));

  // Inference-only: BatchNorm folded, Dropout removed.
  using Deployed = Deploy<Net>;
  const DeployedParameters d = fold_batchnorm<Net>(trainer.parameters(), trainer.layer_state());
  Trainer<Deployed, ctnn::cuda, max_batch> deployed(1);
  deployed.set_normalization(trainer.mean(), trainer.stddev());
  deployed.set_parameters(d.params);
  deployed.set_layer_state(d.state);
  const Evaluation de = deployed.evaluate(test);
  const std::vector<float> dprobs = deployed.predict(test.pixels.data(), count);
  double worst = 0;
  int agree = 0;
  for (int n = 0; n < count; ++n) {
    const float* a = probs.data() + 10 * n;
    const float* b = dprobs.data() + 10 * n;
    for (int c = 0; c < 10; ++c) worst = std::max(worst, std::fabs(double(a[c]) - double(b[c])));
    agree += std::max_element(a, a + 10) - a == std::max_element(b, b + 10) - b;
  }
  deployed.save_weights(out + "/small_cnn_deploy.safetensors");
  std::printf("deployed (%zu parameters instead of %zu, %zu layers instead of %zu): test accuracy %.2f%%, "
              "same class for %d of %d images, largest probability difference %.3g\n",
              Deployed::param_count, Net::param_count, Deployed::layer_count, Net::layer_count, 100 * de.accuracy,
              agree, count, worst);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "small_cnn: " << e.what() << "\n";
  return 1;
}
