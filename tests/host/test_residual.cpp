// Residual<Seq<...>>: output = input + f(input); parameters, state and saved buffers of the block's
// layers inside the outer plan; weight names layers.<i>.<j>.weight; the model card's nested rows;
// nested blocks; finite differences in training mode (with BatchNorm and a fixed Dropout mask
// inside); the inner layers' random streams on the host equal the device's derivation.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/network/host_network.hpp"
#include "gradcheck.hpp"
#include "stripes.hpp"
#include "temp_dir.hpp"

using namespace ctnn;

namespace {
using Block = Residual<Seq<Conv<3, 3, Pad<1>>, BatchNorm, ReLU, Conv<3, 3, Pad<1>>>>;
using Net = Network<Seq<Conv<3, 3>, Block, Dropout<0.25f>, GlobalAvgPool, Dense<20>,
                        Residual<Seq<Dense<20>, Tanh, Residual<Seq<Dense<20>, BatchNorm>>>>, Dense<4>, Softmax>,
                    Input<2, 7, 6>>;
static_assert(std::is_same_v<Net::shape_at<1>, Shape<3, 5, 4>>);
static_assert(std::is_same_v<Net::shape_at<5>, Shape<20>>);
using BlockB = Net::bound_at<1>;
static_assert(BlockB::param_count == (81 + 3) + 6 + (81 + 3));
}  // namespace

TEST_CASE("Residual: y = x + f(x), counts, names, model card", "[layers][residual]") {
  // Counts: the conv's 2·3·9 + 3, the block's 84 + 6 + 84, ..., without the inner alignment padding.
  static_assert(Net::param_count == (54 + 3) + 174 + 80 + (420 + 420 + 40) + 84);
  using Small = Network<Seq<Residual<Seq<Dense<3>>>>, Input<3>>;
  HostNetwork<Small, double> net(2, 1);
  // Dense weight 3x3, bias: set by hand.
  double* w = net.weight(0);  // the block's inner parameter array: inner layer 0's weight, then its bias
  const std::vector<double> W{1, 2, 0, 0, 1, 0, -1, 0, 1}, b{0.5, 0, -0.5};
  std::copy(W.begin(), W.end(), w);
  std::copy(b.begin(), b.end(), w + BufferPlan<Network<Seq<Dense<3>>, Input<3>>>::bias_offset[0]);
  const std::vector<double> x{1, 2, 3, -1, 0, 1};
  const double* y = net.forward(x.data(), 2);
  CHECK(std::vector<double>(y, y + 6) == std::vector<double>{1 + 5.5, 2 + 2, 3 + 1.5, -1 - 0.5, 0 + 0, 1 + 1.5});

  std::ostringstream card;
  print_model_card<Net>(card, 4);
  INFO(card.str());
  CHECK(card.str().find("      1  Residual[Conv 3@3x3 pad 1 -> BatchNorm -> ReLU -> Conv 3@3x3 pad 1]") !=
        std::string::npos);
  CHECK(card.str().find("  1.1    BatchNorm") != std::string::npos);
  CHECK(card.str().find("  5.2.1      BatchNorm") != std::string::npos);

  ctnn_test::TempDir dir;
  Trainer<Net, host, 8> trainer(3);
  trainer.save_weights(dir.file("r.safetensors"));
  const io::SafetensorsFile file(dir.file("r.safetensors"));
  CHECK(file.floats("layers.1.0.weight", {3, 3, 3, 3}).size() == 81);
  CHECK(file.floats("layers.1.3.bias", {3}).size() == 3);
  CHECK(file.floats("layers.1.1.running_var", {3}) == std::vector<float>{1, 1, 1});
  CHECK(file.int64s("layers.1.1.num_batches_tracked", {}) == std::vector<std::int64_t>{0});
  CHECK(file.floats("layers.5.2.0.weight", {20, 20}).size() == 400);
  CHECK(file.floats("layers.5.2.1.running_mean", {20}).size() == 20);
  Trainer<Net, host, 8> loaded(9);
  loaded.load_weights(dir.file("r.safetensors"));
  CHECK(loaded.parameters() == trainer.parameters());
  CHECK(loaded.layer_state() == trainer.layer_state());
}

TEST_CASE("Residual: the inner layers' random streams (host) are the device's derivation", "[layers][residual][random]") {
  for (std::uint64_t j : {0, 1, 5})
    CHECK(detail::residual_host_key(counter_key(3, 44, 2), j) ==
          step_key(detail::residual_device_key(layer_key(3, 2), j), 44));
  // A Dropout inside a block draws the mask of stream residual_host_key(counter_key(seed, step, i), j).
  using D = Network<Seq<Dense<32>, Residual<Seq<Tanh, Dropout<0.5f>>>>, Input<4>>;
  HostNetwork<D, float> net(2, 1);
  std::vector<float> x(8, 0.5f);
  const float* y = net.forward(x.data(), 2, Mode::train, StepRandom{5, 6});
  const float* a = net.activation(1, 2);
  const std::uint64_t key = detail::residual_host_key(counter_key(5, 6, 1), 1);
  bool match = true;
  for (std::size_t i = 0; i < 64; ++i)
    match = match && y[i] == a[i] + std::tanh(a[i]) * (counter_uniform(key, i) < 0.5f ? 0.f : 2.f);
  CHECK(match);
}

TEST_CASE("Residual: gradient check in training mode, nested blocks, BatchNorm and Dropout inside",
          "[layers][residual][gradcheck]") {
  HostNetwork<Net, double> net(3, 4);
  Random rng(8);
  std::vector<double> x(3 * 84), r(12);
  for (double& v : x) v = rng.uniform(-1, 1);
  for (double& v : r) v = rng.uniform(-1, 1);
  const StepRandom step{2, 9};
  net.forward(x.data(), 3, Mode::train, step);
  net.backward(r.data(), 3);
  const std::vector<double> grads = net.grads();
  auto loss = [&] {
    const double* y = net.forward(x.data(), 3, Mode::train, step);
    double s = 0;
    for (std::size_t i = 0; i < 12; ++i) s += r[i] * y[i];
    return s;
  };
  const auto report = ctnn::testing::finite_difference_check(loss, ctnn::testing::parameter_tensors(net, grads));
  INFO(report.str());
  CHECK(report.max_error() < 1e-6);

  // A block between dense layers: the gradient reaching the first layer crosses the skip path too.
  using Between = Network<Seq<Dense<6>, Residual<Seq<Dense<6>, Tanh, Dense<6>>>, Dense<3>>, Input<6>>;
  const auto whole = ctnn::testing::gradcheck_network<Between>(2);
  INFO(whole.str());
  CHECK(whole.max_error() < 1e-6);
}

TEST_CASE("Residual: trains on the host", "[layers][residual][training]") {
  using R = Network<Seq<Dense<8>, Residual<Seq<Dense<8>, BatchNorm, LeakyReLU<>>>, Dropout<0.1f>, Dense<2>, Softmax>,
                    Input<1, 2, 2>>;
  const Dataset data = ctnn::test::stripes(64, 4);
  TrainOptions o;
  o.epochs = 4;
  o.batch = 8;
  o.learning_rate = 0.1f;
  Trainer<R, host, 8> trainer(2);
  const auto h = trainer.fit(data, o);
  CHECK(h.back().loss < h.front().loss);
  CHECK(trainer.evaluate(data).accuracy > 0.9);
}

TEST_CASE("Residual, BatchNorm, Dropout: a resumed run is bitwise the straight run", "[layers][residual][checkpoint]") {
  using R = Network<Seq<Dense<8>, BatchNorm, Residual<Seq<Dense<8>, BatchNorm, LeakyReLU<>, Dropout<0.3f>>>, Dropout<0.2f>,
                        Dense<2>, Softmax>,
                    Input<1, 2, 2>>;
  ctnn_test::TempDir dir;
  const Dataset data = ctnn::test::stripes(40, 6);
  TrainOptions o;
  o.batch = 8;
  o.learning_rate = 0.1f;
  o.epochs = 4;
  Trainer<R, host, 8> straight(5);
  straight.fit(data, o);
  o.epochs = 2;
  Trainer<R, host, 8> first(5);
  first.fit(data, o);
  first.save_checkpoint(dir.file("half.ckpt"));
  Trainer<R, host, 8> resumed;
  resumed.load_checkpoint(dir.file("half.ckpt"));
  o.epochs = 4;
  resumed.fit(data, o);
  CHECK(resumed.parameters() == straight.parameters());
  CHECK(resumed.layer_state() == straight.layer_state());
  CHECK(resumed.layer_state()[16] == 20.0f);  // the first BatchNorm's num_batches_tracked: 4 epochs of 5
}
