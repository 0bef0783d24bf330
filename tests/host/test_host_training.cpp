// The host training side: cross-entropy, SGD with momentum, epoch order, and Trainer<Net, host, ...>
// (learning, validation of its inputs, partial batches, determinism, prediction).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/train/host_trainer.hpp"

using namespace ctnn;
using Approx = Catch::Detail::Approx;
using Catch::Contains;

TEST_CASE("softmax_cross_entropy: loss, fused gradient, accuracy", "[training][loss]") {
  // Sample 0: z = (0, 0), label 0. Sample 1: z = (ln 3, 0), label 1 (softmax (3/4, 1/4)).
  const std::vector<double> z{0, 0, std::log(3.0), 0};
  const std::vector<int> labels{0, 1};
  std::vector<double> d(4, -777);
  const CrossEntropy ce = softmax_cross_entropy<2>(z.data(), labels.data(), 2, d.data());
  CHECK(ce.loss == Approx((std::log(2.0) + std::log(4.0)) / 2));
  CHECK(ce.correct == 1);  // sample 0 is a tie, which goes to the lowest index: 0, right
  CHECK(d[0] == Approx((0.5 - 1) / 2));
  CHECK(d[1] == Approx(0.5 / 2));
  CHECK(d[2] == Approx(0.75 / 2));
  CHECK(d[3] == Approx((0.25 - 1) / 2));
}

TEST_CASE("softmax_cross_entropy: large logits stay finite, argmax ties go low", "[training][loss]") {
  const std::vector<float> z{1000.f, 0.f, -1000.f, 1000.f, 1000.f, 1000.f};
  const std::vector<std::uint8_t> labels{1, 2};
  std::vector<float> d(6);
  const CrossEntropy ce = softmax_cross_entropy(z.data(), labels.data(), 2, 3, d.data());
  CHECK(ce.loss == Approx((1000.0 + std::log(3.0)) / 2));
  CHECK(ce.correct == 0);  // sample 1 is a three-way tie: argmax 0, label 2
  for (float v : d) CHECK(std::isfinite(v));
  CHECK(argmax(z.data() + 3, 3) == 0);
  const std::vector<int> v{1, 3, 3, 2};
  CHECK(argmax(v.data(), 4) == 1);
}

TEST_CASE("softmax_cross_entropy: rejects bad labels and batches", "[training][loss]") {
  const std::vector<double> z{1, 2, 3};
  const std::vector<int> bad{3};
  CHECK_THROWS_WITH(softmax_cross_entropy<3>(z.data(), bad.data(), 1), Contains("label 3 of sample 0 is outside 0..2"));
  CHECK_THROWS_AS(softmax_cross_entropy<3>(z.data(), bad.data(), 0), std::invalid_argument);
}

TEST_CASE("SGD with momentum: v = mu v + g, p -= lr v", "[training][sgd]") {
  std::vector<double> p{1, -2, 0.5}, v(3, 0);
  const std::vector<double> g1{0.1, 0.2, -0.3}, g2{1, 0, -1};
  sgd_momentum_step(p.data(), g1.data(), v.data(), 3, 0.1, 0.9);
  CHECK(v[0] == Approx(0.1));
  CHECK(p[0] == Approx(0.99));
  CHECK(p[1] == Approx(-2.02));
  CHECK(p[2] == Approx(0.53));
  sgd_momentum_step(p.data(), g2.data(), v.data(), 3, 0.1, 0.9);
  CHECK(v[0] == Approx(1.09));
  CHECK(v[1] == Approx(0.18));
  CHECK(v[2] == Approx(-1.27));
  CHECK(p[0] == Approx(0.881));
  CHECK(p[1] == Approx(-2.038));
  CHECK(p[2] == Approx(0.657));

  SgdMomentum<float> sgd(2);
  std::vector<float> pf{1, 1}, gf{1, -1};
  sgd.step(pf, gf, 0.5f, 0.5f);
  sgd.step(pf, gf, 0.5f, 0.5f);  // v = 1.5, -1.5
  CHECK(pf[0] == 1 - 0.5f - 0.75f);
  CHECK(pf[1] == 1 + 0.5f + 0.75f);
  std::vector<float> wrong(3);
  CHECK_THROWS_WITH(sgd.step(wrong, gf, 0.5f, 0.5f), Contains("expected 2"));
}

TEST_CASE("SGD weight decay adds lambda p to the gradient", "[training][sgd]") {
  std::vector<double> p{2, -4}, v(2, 0);
  const std::vector<double> g{0.5, 0.5};
  sgd_momentum_step(p.data(), g.data(), v.data(), 2, 0.1, 0.9, 0.25);  // g' = 1, -0.5
  CHECK(v[0] == Approx(1.0));
  CHECK(v[1] == Approx(-0.5));
  CHECK(p[0] == Approx(1.9));
  CHECK(p[1] == Approx(-3.95));
}

TEST_CASE("normalize_pixel: (x/255 - mean)/std", "[training]") {
  CHECK(normalize_pixel(0, 0.5f, 0.25f) == Approx(-2.0));
  CHECK(normalize_pixel(255, 0.5f, 0.25f) == Approx(2.0));
  static_assert(normalize_pixel(255, 0.0f, 1.0f) == 1.0f);
}

TEST_CASE("epoch_order: a seeded permutation, different per epoch", "[training]") {
  const auto a = epoch_order(100, 7, 1), b = epoch_order(100, 7, 2), again = epoch_order(100, 7, 1);
  CHECK(std::set<std::size_t>(a.begin(), a.end()).size() == 100);
  CHECK(*std::max_element(a.begin(), a.end()) == 99);
  CHECK(a == again);
  CHECK(a != b);
  CHECK(epoch_order(100, 8, 1) != a);
  CHECK(epoch_order(1, 7, 1) == std::vector<std::size_t>{0});
}

namespace {

// 2x2 images: class 0 has a bright top row and a dark bottom row, class 1 the reverse; noisy.
io::Dataset stripes(std::size_t count, std::uint64_t seed) {
  io::Dataset d;
  d.count = count, d.rows = 2, d.cols = 2;
  Random rng(seed);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint8_t label = std::uint8_t(rng.below(2));
    auto bright = [&] { return std::uint8_t(180 + rng.below(76)); };
    auto dark = [&] { return std::uint8_t(rng.below(76)); };
    for (int row = 0; row < 2; ++row)
      for (int col = 0; col < 2; ++col) d.pixels.push_back((row == 0) == (label == 0) ? bright() : dark());
    d.labels.push_back(label);
  }
  return d;
}

using Tiny = Network<Seq<Dense<8>, Tanh, Dense<2>, Softmax>, Input<1, 2, 2>>;

}  // namespace

TEST_CASE("Trainer<host>: a tiny net learns a separable problem", "[training][trainer]") {
  const io::Dataset train = stripes(256, 1), test = stripes(100, 2);
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
  const io::Dataset good = stripes(10, 1);
  TrainOptions opt;

  opt.batch = 0;
  CHECK_THROWS_WITH(trainer.fit(good, opt), Contains("batch size 0 is outside 1..16"));
  opt.batch = 17;
  CHECK_THROWS_WITH(trainer.fit(good, opt), Contains("batch size 17 is outside 1..16"));
  opt.batch = 4;

  io::Dataset wrong_size;
  wrong_size.count = 1, wrong_size.rows = 3, wrong_size.cols = 3;
  wrong_size.pixels.assign(9, 0);
  wrong_size.labels = {0};
  CHECK_THROWS_WITH(trainer.fit(wrong_size, opt),
                    Contains("training set has images of 3x3 pixels, but the network expects (1x2x2) = 4 values per image"));
  CHECK_THROWS_WITH(trainer.fit(good, opt, &wrong_size), Contains("test set has images of 3x3"));
  CHECK_THROWS_WITH(trainer.evaluate(wrong_size), Contains("images of 3x3"));

  CHECK_THROWS_WITH(trainer.fit(io::Dataset{}, opt), Contains("training set is empty"));

  io::Dataset bad_label = good;
  bad_label.labels[7] = 2;
  CHECK_THROWS_WITH(trainer.fit(bad_label, opt),
                    Contains("label 2 of image 7 in the training set is outside 0..1 (the network has 2 outputs)"));

  io::Dataset short_pixels = good;
  short_pixels.pixels.pop_back();
  CHECK_THROWS_WITH(trainer.fit(short_pixels, opt), Contains("holds 39 pixel values, expected 10 images x 4 = 40"));

  TrainOptions bad_std = opt;
  bad_std.std = 0;
  CHECK_THROWS_WITH(trainer.fit(good, bad_std), Contains("std > 0"));

  CHECK_THROWS_WITH(trainer.set_parameters(std::vector<float>(3)),
                    Contains("set_parameters expected " + std::to_string(BufferPlan<Tiny>::param_floats) +
                             " floats (the BufferPlan layout of this network), got 3"));
  CHECK_THROWS_AS(trainer.predict(nullptr, -1), std::invalid_argument);
}

TEST_CASE("Trainer<host>: the last partial batch is trained on", "[training][trainer]") {
  Trainer<Tiny, host, 8> trainer;
  const io::Dataset data = stripes(10, 5);
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
  const io::Dataset data = stripes(40, 3);
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
