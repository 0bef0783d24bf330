// The shared training loop (train/loop.hpp) and checkpoints (train/checkpoint.hpp) on the host:
// resume to the bit, fit continuing where it stopped, early stopping, divergence checks, weight files
// that carry the normalisation, and checkpoints of another network refused with what differs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/core/dataset.hpp"
#include "ctnn/train/host_trainer.hpp"
#include "stripes.hpp"
#include "temp_dir.hpp"

using namespace ctnn;
using Catch::Contains;
using ctnn::test::stripes;
using ctnn_test::TempDir;

namespace {

using Net = Network<Seq<Conv<3, 2>, ReLU, Dense<4>, Tanh, Dense<2>, Softmax>, Input<1, 2, 2>>;

TrainOptions options(int epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.batch = 6;  // 40 images: six full batches and a tail of 4
  o.learning_rate = 0.05f;
  o.schedule = LrSchedule::cosine;
  return o;
}

// Trains 4 epochs straight; then 2 epochs (stopped from on_epoch), a checkpoint, and a fresh trainer
// that loads it and trains on to 4. Both must end with the same bits.
template <class Opt>
void check_resume(const TempDir& dir) {
  const Dataset data = stripes(40, 3);
  Trainer<Net, host, 8, Opt> straight(5);
  straight.fit(data, options(4));

  Trainer<Net, host, 8, Opt> first(5);
  TrainOptions stop_at_2 = options(4);
  stop_at_2.on_epoch = [&](const EpochStats& s) {
    if (s.epoch == 2) first.stop();
  };
  CHECK(first.fit(data, stop_at_2).size() == 2);
  CHECK(first.epoch() == 2);
  const std::string path = dir.file("run.ckpt");
  first.save_checkpoint(path);

  Trainer<Net, host, 8, Opt> resumed(77);  // other initial weights: the checkpoint replaces them
  resumed.load_checkpoint(path);
  CHECK(resumed.epoch() == 2);
  CHECK(resumed.step() == first.step());
  const auto rest = resumed.fit(data, options(4));
  REQUIRE(rest.size() == 2);
  CHECK(rest[0].epoch == 3);
  CHECK(resumed.parameters() == straight.parameters());
  CHECK(resumed.optimizer_state() == straight.optimizer_state());
  CHECK(resumed.step() == straight.step());
}

}  // namespace

TEST_CASE("Checkpoint: a resumed run repeats the straight one to the bit (Sgd, Adam, AdamW)", "[training][checkpoint]") {
  TempDir dir;
  SECTION("Sgd") { check_resume<Sgd>(dir); }
  SECTION("Adam") { check_resume<Adam>(dir); }
  SECTION("AdamW") { check_resume<AdamW>(dir); }
}

TEST_CASE("fit continues from the epoch reached: fit(1) then fit(2) is fit(2)", "[training][loop]") {
  const Dataset data = stripes(40, 3);
  TrainOptions o = options(2);
  o.schedule = LrSchedule::constant;
  Trainer<Net, host, 8> a(5), b(5);
  a.fit(data, o);
  TrainOptions one = o;
  one.epochs = 1;
  CHECK(b.fit(data, one).size() == 1);
  const auto second = b.fit(data, o);
  REQUIRE(second.size() == 1);
  CHECK(second[0].epoch == 2);
  CHECK(a.parameters() == b.parameters());
  CHECK(b.fit(data, o).empty());  // already at epoch 2
}

TEST_CASE("Checkpoint: another network, optimizer or format is refused with what differs", "[training][checkpoint]") {
  TempDir dir;
  const Dataset data = stripes(12, 3);
  Trainer<Net, host, 8> trainer(5);
  trainer.fit(data, options(1));
  const std::string path = dir.file("run.ckpt");
  trainer.save_checkpoint(path);

  using Wider = Network<Seq<Conv<3, 2>, ReLU, Dense<5>, Tanh, Dense<2>, Softmax>, Input<1, 2, 2>>;
  Trainer<Wider, host, 8> wider;
  CHECK_THROWS_WITH(wider.load_checkpoint(path),
                    Contains("saved for another network") && Contains("layer 2: the file has Dense 4 (4)") &&
                        Contains("this network Dense 5 (5)"));
  Trainer<Net, host, 8, Adam> adam;
  CHECK_THROWS_WITH(adam.load_checkpoint(path), Contains("the checkpoint's optimizer is Sgd, this trainer's Adam"));

  const std::string weights = dir.file("weights.safetensors");
  trainer.save_weights(weights);
  Trainer<Net, host, 8> other;
  CHECK_THROWS_WITH(other.load_checkpoint(weights), Contains("not a ctnn checkpoint"));
}

TEST_CASE("Weight files carry the normalisation and the layer state", "[training][checkpoint]") {
  TempDir dir;
  const Dataset data = stripes(40, 3);
  TrainOptions o = options(2);
  o.mean = 0.25f;
  o.std = 0.5f;
  Trainer<Net, host, 8> trained(5);
  trained.fit(data, o);
  const std::string path = dir.file("model.safetensors");
  trained.save_weights(path);

  Trainer<Net, host, 8> loaded(9);
  loaded.load_weights(path);
  CHECK(loaded.mean() == 0.25f);
  CHECK(loaded.stddev() == 0.5f);
  CHECK(loaded.parameters() == trained.parameters());
  const Evaluation a = trained.evaluate(data), b = loaded.evaluate(data);
  CHECK(a.loss == b.loss);
  CHECK(a.accuracy == b.accuracy);
  // Raw pixels are normalised with the stored values.
  const std::vector<float> p = loaded.predict(data.pixels.data(), 3), q = trained.predict(data.pixels.data(), 3);
  CHECK(p == q);
}

TEST_CASE("Early stopping: patience, and the best epoch's parameters restored", "[training][loop]") {
  const Dataset train = stripes(40, 3), test = stripes(20, 4);
  TrainOptions o = options(30);
  o.schedule = LrSchedule::constant;
  o.patience = 2;
  o.monitor = Monitor::test_loss;
  std::vector<EpochStats> seen;
  o.on_epoch = [&](const EpochStats& s) { seen.push_back(s); };
  Trainer<Net, host, 8> trainer(5);
  const auto history = trainer.fit(train, o, &test);
  REQUIRE(history.size() >= 3);
  // It stopped exactly `patience` epochs after the best test loss, or ran to the end.
  std::size_t best = 0;
  for (std::size_t i = 1; i < history.size(); ++i)
    if (history[i].test_loss < history[best].test_loss) best = i;
  if (history.size() < 30) CHECK(history.size() == best + 1 + 2);
  CHECK(trainer.evaluate(test).loss == Approx(history[best].test_loss).epsilon(1e-12));

  TrainOptions no_test = o;
  CHECK_THROWS_WITH(trainer.fit(train, no_test), Contains("early stopping on a test metric needs a test set"));
}

TEST_CASE("Divergence: a non-finite loss or a classifier stuck at chance stops the run", "[training][loop]") {
  using Three = Network<Seq<Dense<8>, ReLU, Dense<3>, Softmax>, Input<1, 2, 2>>;
  Dataset data = stripes(60, 3);
  for (std::size_t i = 0; i < data.count; ++i) data.labels[i] = std::uint8_t(i % 3);  // unlearnable
  TrainOptions o = options(3);
  o.schedule = LrSchedule::constant;
  o.learning_rate = 1e30f;  // explodes
  Trainer<Three, host, 8> exploding(1);
  CHECK_THROWS_AS(exploding.fit(data, o), numeric_error);

  Trainer<Three, host, 8> exploding2(1);
  CHECK_THROWS_WITH(exploding2.fit(data, o), Contains("diverged") || Contains("stuck at chance"));

  o.learning_rate = 0.f;  // learns nothing: accuracy stays at chance
  Trainer<Three, host, 8> stuck(1);
  CHECK_THROWS_WITH(stuck.fit(data, o), Contains("stuck at chance in epoch 2"));
  o.stop_when_stuck = false;
  Trainer<Three, host, 8> allowed(1);
  CHECK(allowed.fit(data, o).size() == 3);
}

TEST_CASE("Mse: a network without Softmax regresses float targets", "[training][loss]") {
  using Reg = Network<Seq<Dense<8>, Tanh, Dense<2>>, Input<1, 2, 2>>;
  static_assert(std::is_same_v<default_loss_t<Reg>, Mse>);
  Dataset data = stripes(64, 3);
  for (std::size_t i = 0; i < data.count; ++i) {  // targets: the mean of the top row and of the bottom row
    const std::uint8_t* px = data.pixels.data() + 4 * i;
    data.targets.push_back(float(px[0] + px[1]) / 510.f);
    data.targets.push_back(float(px[2] + px[3]) / 510.f);
  }
  TrainOptions o = options(20);
  o.learning_rate = 0.1f;
  Trainer<Reg, host, 8> trainer(2);
  const auto history = trainer.fit(data, o);
  CHECK(history.back().loss < 0.2 * history.front().loss);
}

TEST_CASE("Dataset: subset and a seeded validation split", "[data]") {
  const Dataset d = stripes(10, 3);
  const Dataset s = subset(d, 2, 3);
  REQUIRE(s.count == 3);
  CHECK(std::equal(s.pixels.begin(), s.pixels.end(), d.pixels.begin() + 8));
  CHECK(s.labels[0] == d.labels[2]);
  CHECK_THROWS_WITH(subset(d, 8, 3), Contains("of a data set of 10"));
  const auto [rest, held] = split(d, 4, 7);
  CHECK(rest.count == 6);
  CHECK(held.count == 4);
  CHECK(split(d, 4, 7).second.pixels == held.pixels);  // seeded
  CHECK(split(d, 4, 8).second.pixels != held.pixels);
  std::size_t ones = 0;
  for (auto l : rest.labels) ones += l;
  for (auto l : held.labels) ones += l;
  std::size_t all = 0;
  for (auto l : d.labels) all += l;
  CHECK(ones == all);  // a partition
}

TEST_CASE("Weight files: the earlier format (parameters only) still loads", "[training][checkpoint]") {
  ctnn_test::TempDir dir;
  Trainer<Net, host, 8> trained(5);
  trained.fit(stripes(40, 3), options(1));
  const std::string path = dir.file("old.safetensors");
  io::save_safetensors<Net>(path, trained.parameters());  // no mean/std in its metadata
  Trainer<Net, host, 8> loaded(9);
  loaded.set_normalization(0.2f, 0.4f);
  loaded.load_weights(path);
  CHECK(loaded.parameters() == trained.parameters());
  CHECK(loaded.mean() == 0.2f);  // kept: the file does not say
  CHECK(loaded.stddev() == 0.4f);
}
