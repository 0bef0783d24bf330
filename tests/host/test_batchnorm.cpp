// BatchNorm: batch statistics and PyTorch's running-statistics update computed by hand, running
// statistics in evaluation, finite differences in training mode (BatchNorm1d and 2d, and through a
// network), parameters and state in the count, the plan and weight files (PyTorch's names).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/network/host_network.hpp"
#include "gradcheck.hpp"
#include "layer_check.hpp"
#include "stripes.hpp"
#include "temp_dir.hpp"

using namespace ctnn;

TEST_CASE("BatchNorm1d: batch statistics, running statistics (unbiased variance), evaluation", "[layers][batchnorm]") {
  using Net = Network<Seq<BatchNorm>, Input<2>>;
  static_assert(Net::param_count == 4);
  static_assert(BufferPlan<Net>::state_count[0] == 5);
  HostNetwork<Net, double> net(4, 1);
  CHECK(net.weight(0)[0] == 1.0);  // init: weight 1, bias 0, running_var 1
  CHECK(net.bias(0)[1] == 0.0);
  CHECK(net.state()[2] == 1.0);
  net.weight(0)[1] = 2, net.bias(0)[1] = 0.5;
  const std::vector<double> x{1, 0, 2, 0, 3, 2, 4, 2};  // [n][feature]: feature 0 = 1..4, feature 1 = 0,0,2,2
  const double* y = net.forward(x.data(), 4, Mode::train);
  const double s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(1.0 + 1e-5);
  for (int n = 0; n < 4; ++n) {
    CHECK(y[2 * n] == Approx((x[2 * n] - 2.5) / s0).epsilon(1e-14));
    CHECK(y[2 * n + 1] == Approx((x[2 * n + 1] - 1.0) / s1 * 2 + 0.5).epsilon(1e-14));
  }
  const std::vector<double>& st = net.state();
  CHECK(st[0] == Approx(0.25));                    // 0.9·0 + 0.1·2.5
  CHECK(st[1] == Approx(0.1));
  CHECK(st[2] == Approx(0.9 + 0.1 * 5.0 / 3.0));   // unbiased: 5/3, not 1.25
  CHECK(st[3] == Approx(0.9 + 0.1 * 4.0 / 3.0));
  CHECK(st[4] == 1.0);                              // num_batches_tracked
  net.forward(x.data(), 4, Mode::train);
  CHECK(net.state()[4] == 2.0);
  CHECK(net.state()[0] == Approx(0.9 * 0.25 + 0.25));

  const double* e = net.forward(x.data(), 4, Mode::eval);  // running statistics; state unchanged
  CHECK(e[0] == Approx((1 - net.state()[0]) / std::sqrt(net.state()[2] + 1e-5)).epsilon(1e-14));
  CHECK(net.state()[4] == 2.0);

  // Training on one value per channel is refused, as PyTorch refuses it.
  CHECK_THROWS_WITH(net.forward(x.data(), 1, Mode::train),
                    Catch::Contains("ctnn: BatchNorm in training needs more than one value per channel"));
  CHECK_NOTHROW(net.forward(x.data(), 1, Mode::eval));
}

TEST_CASE("BatchNorm2d: per-channel statistics over batch and plane", "[layers][batchnorm]") {
  using B = BatchNorm::bind<Shape<2, 1, 3>>;
  static_assert(B::C == 2 && B::S == 3);
  const std::vector<double> x{0, 1, 2, 10, 10, 10, 3, 4, 5, 20, 20, 20};  // 2 samples
  std::vector<double> y(12), state{0, 0, 1, 1, 0}, saved(2 * B::saved_size);
  const std::vector<double> w{1, 1}, b{0, 0};
  ForwardArgs<double> a;
  a.w = w.data(), a.b = b.data(), a.state = state.data(), a.x = x.data(), a.y = y.data(), a.saved = saved.data();
  a.batch = 2, a.mode = Mode::train;
  B::forward(a);
  CHECK(saved[0] == Approx(2.5));  // channel 0: 0..5
  CHECK(saved[1] == Approx(15));   // channel 1: 10 ×3, 20 ×3
  CHECK(saved[3] == Approx(1 / std::sqrt(25.0 + 1e-5)));
  CHECK(y[3] == Approx(-5 / std::sqrt(25.0 + 1e-5)));
  CHECK(state[3] == Approx(0.9 + 0.1 * 25.0 * 6 / 5));
}

TEST_CASE("BatchNorm: gradient check in training mode", "[layers][batchnorm][gradcheck]") {
  for (const int batch : {1, 3}) {
    const auto r2 = ctnn::testing::gradcheck_full_layer<BatchNorm::bind<Shape<3, 2, 3>>>(batch, Mode::train);
    INFO("2d batch " << batch << "\n" << r2.str());
    CHECK(r2.max_error() < 1e-6);
  }
  const auto r1 = ctnn::testing::gradcheck_full_layer<BatchNorm::bind<Shape<5>>>(4, Mode::train);
  INFO("1d\n" << r1.str());
  CHECK(r1.max_error() < 1e-6);

  using Net = Network<Seq<Conv<3, 2>, BatchNorm, Tanh, Dense<6>, BatchNorm, Sigmoid, Dense<2>>, Input<2, 4, 4>>;
  HostNetwork<Net, double> net(4, 2);
  Random rng(5);
  std::vector<double> x(4 * 32), r(8);
  for (double& v : x) v = rng.uniform(-1, 1);
  for (double& v : r) v = rng.uniform(-1, 1);
  for (int i : {1, 4})
    for (int c = 0; c < (i == 1 ? 3 : 6); ++c) net.weight(std::size_t(i))[c] = rng.uniform(0.5, 1.5),
                                                net.bias(std::size_t(i))[c] = rng.uniform(-0.5, 0.5);
  net.forward(x.data(), 4, Mode::train);
  net.backward(r.data(), 4);
  const std::vector<double> grads = net.grads();
  auto loss = [&] {
    const double* y = net.forward(x.data(), 4, Mode::train);
    double s = 0;
    for (std::size_t i = 0; i < 8; ++i) s += r[i] * y[i];
    return s;
  };
  const auto report = ctnn::testing::finite_difference_check(loss, ctnn::testing::parameter_tensors(net, grads));
  INFO(report.str());
  CHECK(report.max_error() < 1e-6);
}

TEST_CASE("BatchNorm: trains, and its state is in weight files under PyTorch's names", "[layers][batchnorm][checkpoint]") {
  using Net = Network<Seq<Dense<8>, BatchNorm, ReLU, Dense<2>, Softmax>, Input<1, 2, 2>>;
  static_assert(Net::param_count == 4 * 8 + 8 + 8 + 8 + 8 * 2 + 2);
  ctnn_test::TempDir dir;
  const Dataset data = ctnn::test::stripes(64, 3);
  TrainOptions o;
  o.epochs = 3;
  o.batch = 8;
  o.learning_rate = 0.1f;
  Trainer<Net, host, 8> trainer(2);
  const auto history = trainer.fit(data, o);
  CHECK(history.back().loss < history.front().loss);
  CHECK(trainer.evaluate(data).accuracy > 0.9);
  CHECK(trainer.layer_state()[16] == 24.0f);  // num_batches_tracked: 3 epochs of 8 batches

  trainer.save_weights(dir.file("bn.safetensors"));
  const io::SafetensorsFile file(dir.file("bn.safetensors"));
  CHECK(file.int64s("layers.1.num_batches_tracked", {}) == std::vector<std::int64_t>{24});
  CHECK(file.floats("layers.1.running_mean", {8}).size() == 8);
  CHECK(file.floats("layers.1.running_var", {8}).size() == 8);
  CHECK(file.floats("layers.1.weight", {8}).size() == 8);
  Trainer<Net, host, 8> loaded;
  loaded.load_weights(dir.file("bn.safetensors"));
  CHECK(loaded.layer_state() == trainer.layer_state());
  CHECK(loaded.evaluate(data).loss == trainer.evaluate(data).loss);
}
