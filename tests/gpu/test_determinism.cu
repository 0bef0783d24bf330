// Determinism of the CUDA trainer: two trainers with the same seed, trained with the same options on
// the same data for 302 steps (two epochs of 150 full batches and one tail batch of 17, each epoch
// reshuffled on the GPU), end with bitwise-identical parameters and report identical statistics; a
// different initialisation seed or shuffle seed gives different parameters.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/cuda_trainer.hpp>

#include "gpu_test.hpp"

namespace {

using namespace ctnn;

using LeNet5 = models::LeNet5;
using GpuTrainer = Trainer<LeNet5, ctnn::cuda, 64>;

int passed = 0, failed = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  ok ? ++passed : ++failed;
}

// Random images whose label is a function of the pixels (which band of rows is bright), so that
// training has something to learn, except for one label in four, drawn at random, so that the loss
// and the gradients stay well away from zero for all the steps.
Dataset learnable_dataset(std::size_t count, std::uint64_t seed) {
  Random rng(seed);
  Dataset d;
  d.count = count, d.rows = 28, d.cols = 28;
  d.pixels.resize(count * 28 * 28);
  d.labels.resize(count);
  for (std::size_t n = 0; n < count; ++n) {
    const int label = int(rng.below(10));
    for (int y = 0; y < 28; ++y)
      for (int x = 0; x < 28; ++x) {
        const bool band = y / 3 == label;  // rows 3·label .. 3·label + 2 are bright
        d.pixels[(n * 28 + std::size_t(y)) * 28 + std::size_t(x)] =
            std::uint8_t(band ? 160 + rng.below(96) : rng.below(128));
      }
    d.labels[n] = std::uint8_t(rng.below(4) == 0 ? int(rng.below(10)) : label);
  }
  return d;
}

using ctnn_test::same_bits;

void run() {
  constexpr int batch = 48;
  const Dataset data = learnable_dataset(std::size_t(batch) * 150 + 17, 31);
  TrainOptions opt;
  opt.epochs = 2;
  opt.batch = batch;
  opt.learning_rate = 0.01f;
  opt.seed = 9;

  GpuTrainer a(7), b(7);
  const std::vector<float> initial = a.parameters();
  const std::vector<EpochStats> ha = a.fit(data, opt);
  const std::vector<EpochStats> hb = b.fit(data, opt);
  const std::vector<float> pa = a.parameters(), pb = b.parameters();
  check(!same_bits(pa, initial), "training changed the parameters");
  check(same_bits(pa, pb), "same seeds: bitwise-identical parameters after 302 steps");
  bool same_stats = ha.size() == 2 && hb.size() == 2;
  for (std::size_t e = 0; same_stats && e < ha.size(); ++e)
    same_stats = ha[e].loss == hb[e].loss && ha[e].train_accuracy == hb[e].train_accuracy;
  check(same_stats, "same seeds: identical epoch losses and accuracies");
  if (ha.size() == 2) {
    std::printf("epoch losses %.6f, %.6f; train accuracy %.2f%%, %.2f%%\n", ha[0].loss, ha[1].loss,
                100 * ha[0].train_accuracy, 100 * ha[1].train_accuracy);
    check(ha[1].loss < ha[0].loss, "the loss went down from the first epoch to the second");
  }
  {  // Same again after training on: still in lockstep (the graphs of a second fit are new).
    TrainOptions more = opt;
    more.epochs = 3;
    a.fit(data, more);
    b.fit(data, more);
    check(same_bits(a.parameters(), b.parameters()), "same seeds: still identical after a second fit");
  }

  GpuTrainer c(8);
  c.fit(data, opt);
  check(!same_bits(c.parameters(), pa), "another initialisation seed gives other parameters");
  GpuTrainer d(7);
  TrainOptions other = opt;
  other.seed = 10;
  d.fit(data, other);
  check(!same_bits(d.parameters(), pa), "another shuffle seed gives other parameters");
}

}  // namespace

int main() {
  ctnn_test::require_cuda_device();
  try {
    run();
  } catch (const std::exception& e) {
    check(false, std::string("unexpected exception: ") + e.what());
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
