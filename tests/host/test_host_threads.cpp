// The host trainer on several threads (set_threads): evaluate and predict give the one-thread bits
// for any thread count; training is deterministic for a given count and learns as one thread does.
// Also the weight file's extra metadata (class names) and weight_file_metadata.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/layers/dropout.hpp"
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
  o.batch = 20;
  o.learning_rate = 0.05f;
  o.schedule = LrSchedule::cosine;
  return o;
}

}  // namespace

TEST_CASE("Trainer<host> threads: evaluate and predict are bit-identical for any thread count", "[threads]") {
  const Dataset data = stripes(203, 7);
  Trainer<Net, host, 32> one(3);
  one.fit(data, options(2));
  const Evaluation e1 = one.evaluate(data);
  const std::vector<float> p1 = one.predict(data.pixels.data(), int(data.count));
  for (int threads : {2, 3, 5}) {
    Trainer<Net, host, 32> many(9);
    many.set_parameters(one.parameters());
    many.set_normalization(one.mean(), one.stddev());
    many.set_threads(threads);
    REQUIRE(many.threads() == threads);
    const Evaluation e = many.evaluate(data);
    CHECK(e.loss == e1.loss);
    CHECK(e.accuracy == e1.accuracy);
    CHECK(many.predict(data.pixels.data(), int(data.count)) == p1);
  }
}

TEST_CASE("Trainer<host> threads: training is deterministic for a thread count and still learns", "[threads]") {
  const Dataset data = stripes(120, 4);
  Trainer<Net, host, 32> a(5), b(5), single(5);
  a.set_threads(3);
  b.set_threads(3);
  const auto ha = a.fit(data, options(6));
  const auto hb = b.fit(data, options(6));
  single.fit(data, options(6));
  CHECK(a.parameters() == b.parameters());
  REQUIRE(ha.size() == 6);
  CHECK(ha.back().loss == hb.back().loss);
  // Only the rounding of the gradient sum differs from one thread.
  double worst = 0;
  for (std::size_t k = 0; k < a.parameters().size(); ++k)
    worst = std::max(worst, double(std::fabs(a.parameters()[k] - single.parameters()[k])));
  CHECK(worst < 1e-3);
  CHECK(a.evaluate(data).accuracy > 0.9);
}

TEST_CASE("Trainer<host> threads: bad counts are refused", "[threads]") {
  Trainer<Net, host, 4> t;
  CHECK_THROWS_WITH(t.set_threads(0), Contains("1..1024"));
  t.set_threads(2);
  t.set_threads(1);
  CHECK(t.threads() == 1);
}

TEST_CASE("save_weights: class names and extra metadata round trip, ctnn's keys stay", "[metadata]") {
  TempDir dir;
  Trainer<Net, host, 4> t(2);
  const std::vector<std::string> names = {"T-shirt/top", "say \"hi\"\\"};
  auto extra = class_names_metadata(names);
  extra["dataset"] = "fashion-mnist";
  extra["network"] = "not this";  // ignored: ctnn writes its own
  t.save_weights(dir.file("w.safetensors"), extra);
  const auto meta = weight_file_metadata(dir.file("w.safetensors"));
  CHECK(class_names_of(meta) == names);
  CHECK(meta.at("dataset") == "fashion-mnist");
  CHECK(meta.at("network") == io::network_description<Net>());
  CHECK(meta.at("format") == "ctnn");
  Trainer<Net, host, 4> u(7);
  u.load_weights(dir.file("w.safetensors"));
  CHECK(u.parameters() == t.parameters());
  CHECK(class_names_of({}).empty());
  CHECK_THROWS_WITH(class_names_of({{"class_names", "[1, 2]"}}), Contains("not a JSON array of strings"));
  CHECK_THROWS_WITH(weight_file_metadata(dir.file("missing.safetensors")), Contains("missing.safetensors"));
}

// A layer that says it draws random numbers per element (as Dropout does).
struct RandomReLU : ReLU {
  static constexpr bool draws_random = true;
};

TEST_CASE("Trainer<host> threads: a network with a random layer trains on one thread (the same bits)", "[threads]") {
  using Drop = Network<Seq<Dense<8>, RandomReLU, Dense<2>, Softmax>, Input<1, 2, 2>>;
  static_assert(!detail::shardable<Drop>());
  static_assert(detail::shardable<Net>());
  const Dataset data = stripes(64, 8);
  Trainer<Drop, host, 32> one(4), many(4);
  many.set_threads(4);
  one.fit(data, options(2));
  many.fit(data, options(2));
  CHECK(one.parameters() == many.parameters());
}

TEST_CASE("Trainer<host> threads: Dropout and Residual blocks shard, a random layer inside a block does not",
          "[threads]") {
  using Drop = Network<Seq<Dense<8>, ReLU, Dropout<0.25f>, Dense<2>, Softmax>, Input<1, 2, 2>>;
  using Block = Network<Seq<Dense<8>, Residual<Seq<Dense<8>, ReLU, Dropout<0.25f>>>, Dense<2>, Softmax>, Input<1, 2, 2>>;
  using RandomBlock = Network<Seq<Dense<8>, Residual<Seq<Dense<8>, RandomReLU>>, Dense<2>, Softmax>, Input<1, 2, 2>>;
  static_assert(detail::shardable<Drop>());
  static_assert(detail::shardable<Block>());
  static_assert(!detail::shardable<RandomBlock>());
  const Dataset data = stripes(64, 8);
  Trainer<Block, host, 32> one(4), many(4), again(4);
  many.set_threads(4);
  again.set_threads(4);
  one.fit(data, options(2));
  many.fit(data, options(2));
  again.fit(data, options(2));
  CHECK(many.parameters() == again.parameters());  // deterministic for a thread count
  // The shards draw the step's own mask: the result differs from one thread's only by the rounding of
  // the shards' gradient sum (a mask drawn per shard from counter 0 would be another network).
  const std::vector<float> a = one.parameters(), b = many.parameters();
  REQUIRE(a.size() == b.size());
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) largest = std::max(largest, double(std::fabs(a[i] - b[i])));
  CHECK(largest < 1e-4);
}
