// Dropout<P>: the mask is counter_uniform(counter_key(seed, step, layer), i) < P (checked against that
// formula directly), kept elements scaled by 1/(1 − P), the identity in evaluation, the same mask for
// the same (seed, step, layer) and another for another step; gradient check with a fixed mask.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/network/host_network.hpp"
#include "gradcheck.hpp"
#include "layer_check.hpp"
#include "stripes.hpp"

using namespace ctnn;

TEST_CASE("Dropout: the mask is the counter-based formula, kept values scaled, eval is the identity",
          "[layers][dropout]") {
  using Net = Network<Seq<Dense<64>, Dropout<0.3f>>, Input<5>>;
  HostNetwork<Net, float> net(16, 3);
  Random rng(4);
  std::vector<float> x(16 * 5);
  for (float& v : x) v = float(rng.uniform(-1, 1));
  const float* y_eval = net.forward(x.data(), 16, Mode::eval);
  const std::vector<float> a(net.activation(1, 16), net.activation(1, 16) + 16 * 64);
  CHECK(std::vector<float>(y_eval, y_eval + 16 * 64) == a);  // identity

  const float* y = net.forward(x.data(), 16, Mode::train, StepRandom{9, 5});
  const std::uint64_t key = counter_key(9, 5, 1);  // layer 1
  const float scale = 1.f / (1.f - 0.3f);
  std::size_t dropped = 0;
  bool all_match = true;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const bool drop = counter_uniform(key, i) < 0.3f;
    dropped += drop;
    all_match = all_match && y[i] == (drop ? 0.f : a[i] * scale);
  }
  CHECK(all_match);
  const double rate = double(dropped) / double(a.size());
  CHECK(rate > 0.25);  // 1024 draws: 0.3 ± 0.014 (1 σ)
  CHECK(rate < 0.35);

  const std::vector<float> first(y, y + a.size());
  const float* again = net.forward(x.data(), 16, Mode::train, StepRandom{9, 5});
  CHECK(std::vector<float>(again, again + a.size()) == first);  // deterministic
  const float* other = net.forward(x.data(), 16, Mode::train, StepRandom{9, 6});
  CHECK(std::vector<float>(other, other + a.size()) != first);  // another step, another mask
  CHECK(Dropout<>::label() == "Dropout 0.5");
  CHECK(Dropout<0.25f>::label() == "Dropout 0.25");
}

TEST_CASE("Dropout: a step split into shards draws the mask of the whole step (first_sample)", "[layers][dropout]") {
  using Net = Network<Seq<Dense<16>, Dropout<0.5f>>, Input<3>>;
  HostNetwork<Net, float> whole(12, 3), shard(12, 3);
  Random rng(8);
  std::vector<float> x(12 * 3);
  for (float& v : x) v = float(rng.uniform(-1, 1));
  const float* y = whole.forward(x.data(), 12, Mode::train, StepRandom{2, 7});
  const std::vector<float> expect(y, y + 12 * 16);
  std::vector<float> got;
  for (int first : {0, 5}) {  // samples 0-4, then 5-11
    const int count = first == 0 ? 5 : 7;
    const float* part = shard.forward(x.data() + first * 3, count, Mode::train, StepRandom{2, 7, std::uint64_t(first)});
    got.insert(got.end(), part, part + count * 16);
  }
  CHECK(got == expect);
  // Without first_sample the second shard would repeat the first shard's mask instead.
  const float* restart = shard.forward(x.data() + 5 * 3, 7, Mode::train, StepRandom{2, 7});
  CHECK(std::vector<float>(restart, restart + 7 * 16) != std::vector<float>(expect.begin() + 5 * 16, expect.end()));
}

TEST_CASE("Dropout: gradient check in training mode (fixed mask) and through a network", "[layers][dropout][gradcheck]") {
  const auto layer = ctnn::testing::gradcheck_full_layer<Dropout<0.4f>::bind<Shape<3, 4, 5>>>(3, Mode::train, 11);
  INFO(layer.str());
  CHECK(layer.max_error() < 1e-6);

  using Net = Network<Seq<Dense<12>, Tanh, Dropout<0.5f>, Dense<3>>, Input<4>>;
  HostNetwork<Net, double> net(5, 2);
  Random rng(3);
  std::vector<double> x(20), r(15);
  for (double& v : x) v = rng.uniform(-1, 1);
  for (double& v : r) v = rng.uniform(-1, 1);
  const StepRandom step{4, 17};
  net.forward(x.data(), 5, Mode::train, step);
  net.backward(r.data(), 5);
  const std::vector<double> grads = net.grads();
  auto loss = [&] {
    const double* y = net.forward(x.data(), 5, Mode::train, step);
    double s = 0;
    for (std::size_t i = 0; i < 15; ++i) s += r[i] * y[i];
    return s;
  };
  const auto report = ctnn::testing::finite_difference_check(loss, ctnn::testing::parameter_tensors(net, grads));
  INFO(report.str());
  CHECK(report.max_error() < 1e-6);
}

TEST_CASE("Dropout: training is deterministic and still learns", "[layers][dropout][training]") {
  using Net = Network<Seq<Dense<16>, ReLU, Dropout<0.2f>, Dense<2>, Softmax>, Input<1, 2, 2>>;
  const Dataset data = ctnn::test::stripes(64, 5);
  TrainOptions o;
  o.epochs = 4;
  o.batch = 8;
  o.learning_rate = 0.1f;
  Trainer<Net, host, 8> a(3), b(3);
  const auto ha = a.fit(data, o);
  b.fit(data, o);
  CHECK(a.parameters() == b.parameters());
  CHECK(ha.back().loss < ha.front().loss);
  CHECK(a.evaluate(data).accuracy > 0.9);
}
