// The host training side: epoch order and Trainer<Net, host, ...> (learning, validation of its
// inputs, partial batches, determinism, prediction). Checkpoints and the loop's other features are in
// test_training_loop.cpp; optimizers and losses in test_optimizers.cpp and test_losses.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/train/host_trainer.hpp"
#include "ctnn/train/loop.hpp"
#include "stripes.hpp"

using namespace ctnn;
using ctnn::test::stripes;
using Approx = Catch::Detail::Approx;
using Catch::Contains;

TEST_CASE("normalize_pixel: (x/255 - mean)/std", "[training]") {
  CHECK(normalize_pixel(0, 0.5f, 0.25f) == Approx(-2.0));
  CHECK(normalize_pixel(255, 0.5f, 0.25f) == Approx(2.0));
  static_assert(normalize_pixel(255, 0.0f, 1.0f) == 1.0f);
}

TEST_CASE("epoch_order: a seeded permutation, different per epoch", "[training]") {
  const auto a = epoch_order(100, 7, 1), b = epoch_order(100, 7, 2), again = epoch_order(100, 7, 1);
  CHECK(std::set<std::uint32_t>(a.begin(), a.end()).size() == 100);
  CHECK(*std::max_element(a.begin(), a.end()) == 99u);
  CHECK(a == again);
  CHECK(a != b);
  CHECK(epoch_order(100, 8, 1) != a);
  CHECK(epoch_order(1, 7, 1) == std::vector<std::uint32_t>{0});
}

namespace {

using Tiny = Network<Seq<Dense<8>, Tanh, Dense<2>, Softmax>, Input<1, 2, 2>>;

}  // namespace

TEST_CASE("Trainer<host>: a tiny net learns a separable problem", "[training][trainer]") {
  const Dataset train = stripes(256, 1), test = stripes(100, 2);
  Trainer<Tiny, host, 16> trainer(3);
  const double before = trainer.evaluate(test).loss;
  TrainOptions opt;
  opt.epochs = 4;
  opt.batch = 16;
  opt.learning_rate = 0.05f;
  std::vector<EpochStats> seen;
  opt.on_epoch = [&](const EpochStats& s) { seen.push_back(s); };
  const std::vector<EpochStats> history = trainer.fit(train, opt, &test);

  REQUIRE(history.size() == 4);
  REQUIRE(seen.size() == 4);
  for (int e = 0; e < 4; ++e) {
    CHECK(history[std::size_t(e)].epoch == e + 1);
    CHECK(seen[std::size_t(e)].loss == history[std::size_t(e)].loss);
    CHECK(history[std::size_t(e)].seconds >= 0);
    CHECK(std::isfinite(history[std::size_t(e)].test_accuracy));
  }
  CHECK(history.back().loss < history.front().loss);
  CHECK(history.back().train_accuracy >= history.front().train_accuracy);
  CHECK(history.back().train_accuracy > 0.95);
  CHECK(history.back().test_accuracy > 0.95);
  const Evaluation after = trainer.evaluate(test);
  CHECK(after.count == 100);
  CHECK(after.loss < before);
  CHECK(after.accuracy == history.back().test_accuracy);
}

TEST_CASE("Trainer<host>: invalid inputs throw with clear messages", "[training][trainer]") {
  Trainer<Tiny, host, 16> trainer;
  const Dataset good = stripes(10, 1);
  TrainOptions opt;

  opt.batch = 0;
  CHECK_THROWS_WITH(trainer.fit(good, opt), Contains("batch size 0 is outside 1..16"));
  opt.batch = 17;
  CHECK_THROWS_WITH(trainer.fit(good, opt), Contains("batch size 17 is outside 1..16"));
  opt.batch = 4;

  Dataset wrong_size;
  wrong_size.count = 1, wrong_size.rows = 3, wrong_size.cols = 3;
  wrong_size.pixels.assign(9, 0);
  wrong_size.labels = {0};
  CHECK_THROWS_WITH(trainer.fit(wrong_size, opt),
                    Contains("training set has images of 3x3 pixels, but the network expects 1x2x2 = 4 values per image"));
  CHECK_THROWS_WITH(trainer.fit(good, opt, &wrong_size), Contains("test set has images of 3x3"));
  CHECK_THROWS_WITH(trainer.evaluate(wrong_size), Contains("images of 3x3"));

  CHECK_THROWS_WITH(trainer.fit(Dataset{}, opt), Contains("training set is empty"));

  Dataset bad_label = good;
  bad_label.labels[7] = 2;
  CHECK_THROWS_WITH(trainer.fit(bad_label, opt),
                    Contains("label 2 of image 7 in the training set is outside 0..1 (the network has 2 outputs)"));

  Dataset short_pixels = good;
  short_pixels.pixels.pop_back();
  CHECK_THROWS_WITH(trainer.fit(short_pixels, opt), Contains("holds 39 pixel values, expected 10 images x 4 = 40"));

  TrainOptions bad_std = opt;
  bad_std.std = 0;
  CHECK_THROWS_WITH(trainer.fit(good, bad_std), Contains("std > 0"));

  CHECK_THROWS_WITH(trainer.set_parameters(std::vector<float>(3)),
                    Contains("set_parameters got 3 floats, expected " + std::to_string(BufferPlan<Tiny>::param_floats)));
  CHECK_THROWS_AS(trainer.predict(static_cast<const float*>(nullptr), -1), std::invalid_argument);
}

TEST_CASE("Trainer<host>: the last partial batch is trained on", "[training][trainer]") {
  Trainer<Tiny, host, 8> trainer;
  const Dataset data = stripes(10, 5);
  TrainOptions opt;
  opt.epochs = 2;
  opt.batch = 4;
  std::vector<std::pair<std::size_t, std::size_t>> calls;
  opt.on_batch = [&](std::size_t done, std::size_t total) { calls.emplace_back(done, total); };
  const std::vector<float> before = trainer.parameters();
  const auto history = trainer.fit(data, opt);
  const std::vector<std::pair<std::size_t, std::size_t>> want{{4, 10}, {8, 10}, {10, 10},
                                                              {4, 10}, {8, 10}, {10, 10}};
  CHECK(calls == want);
  CHECK(trainer.parameters() != before);
  CHECK(std::isnan(history[0].test_accuracy));  // no test set
  // Accuracy and loss are over all 10 images: the accuracy is a multiple of 1/10.
  const double tenths = history[0].train_accuracy * 10;
  CHECK(tenths == Approx(std::round(tenths)));
}

TEST_CASE("Trainer<host>: MaxBatch 1 trains one image per step", "[training][trainer]") {
  Trainer<Tiny, host, 1> trainer;
  TrainOptions opt;
  opt.batch = 1;
  const auto history = trainer.fit(stripes(5, 9), opt);
  REQUIRE(history.size() == 1);
  CHECK(std::isfinite(history[0].loss));
}

TEST_CASE("Trainer<host>: deterministic for a seed, and padding stays zero", "[training][trainer]") {
  using Net = Network<Seq<Conv<2, 2>, ReLU, Dense<2>, Softmax>, Input<1, 2, 2>>;
  const Dataset data = stripes(40, 3);
  TrainOptions opt;
  opt.epochs = 2;
  opt.batch = 6;
  Trainer<Net, host, 8> a(5), b(5), c(5);
  a.fit(data, opt);
  b.fit(data, opt);
  CHECK(a.parameters() == b.parameters());
  opt.seed = 2;  // another shuffle
  c.fit(data, opt);
  CHECK(a.parameters() != c.parameters());

  using plan = BufferPlan<Net>;
  std::vector<bool> used(plan::param_floats, false);
  for (std::size_t i = 0; i < Net::layer_count; ++i) {
    for (std::size_t k = 0; k < plan::weight_count[i]; ++k) used[plan::weight_offset[i] + k] = true;
    for (std::size_t k = 0; k < plan::bias_count[i]; ++k) used[plan::bias_offset[i] + k] = true;
  }
  for (std::size_t k = 0; k < plan::param_floats; ++k)
    if (!used[k]) CHECK(a.parameters()[k] == 0.0f);

  // set_parameters copies another trainer's state exactly.
  Trainer<Net, host, 8> d(99);
  d.set_parameters(a.parameters());
  CHECK(d.parameters() == a.parameters());
  CHECK(d.evaluate(data).accuracy == a.evaluate(data).accuracy);
}

TEST_CASE("Trainer<host>: predict returns probabilities, in chunks of MaxBatch", "[training][trainer]") {
  Trainer<Tiny, host, 4> trainer(11);
  constexpr int count = 11;  // three chunks: 4, 4, 3
  std::vector<float> images(count * 4);
  Random rng(4);
  for (float& x : images) x = float(rng.uniform(-1, 1));
  const std::vector<float> p = trainer.predict(images.data(), count);
  REQUIRE(p.size() == count * 2);
  for (int n = 0; n < count; ++n) {
    CHECK(p[2 * n] + p[2 * n + 1] == Approx(1.0f));
    const std::vector<float> one = trainer.predict(images.data() + 4 * n, 1);
    CHECK(one[0] == p[2 * n]);
    CHECK(one[1] == p[2 * n + 1]);
  }
  CHECK(trainer.predict(images.data(), 0).empty());
}
