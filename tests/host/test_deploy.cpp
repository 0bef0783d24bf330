// Deploy<Net> and fold_batchnorm: the deployed type (BatchNorm folded into the Conv or Dense before
// it, Dropout removed, inside Residual blocks too), and its evaluation-mode predictions against Net's
// after training has moved the running statistics away from 0 and 1.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "ctnn/network/host_network.hpp"

using namespace ctnn;

namespace {
using In = Input<1, 10, 10>;
using Net = Network<Seq<Conv<6, 3>, BatchNorm, ReLU, Dropout<0.2f>,
                        Residual<Seq<Conv<6, 3, Pad<1>>, BatchNorm, LeakyReLU<>, Dropout<0.3f>, Conv<6, 3, Pad<1>>>>,
                        BatchNorm, GlobalAvgPool, Dense<12>, BatchNorm, Tanh, Dropout<>, Dense<3>, Softmax>,
                    In>;
using Expected = Network<Seq<Conv<6, 3>, ReLU, Residual<Seq<Conv<6, 3, Pad<1>>, LeakyReLU<>, Conv<6, 3, Pad<1>>>>,
                             BatchNorm, GlobalAvgPool, Dense<12>, Tanh, Dense<3>, Softmax>,
                         In>;
static_assert(std::is_same_v<Deploy<Net>, Expected>);
static_assert(Deploy<Net>::param_count == Net::param_count - 2 * 6 - 2 * 6 - 2 * 12);  // the folded BNs' weight, bias
static_assert(std::is_same_v<Deploy<Network<Seq<Dense<4>>, Input<3>>>, Network<Seq<Dense<4>>, Input<3>>>);
}  // namespace

TEST_CASE("Deploy: folded BatchNorm and removed Dropout predict as the network in evaluation", "[deploy][batchnorm]") {
  // Train the network in training mode for a few steps (the running statistics move), with a learning
  // rate that moves the BatchNorm weights away from 1.
  constexpr int batch = 16;
  HostNetwork<Net, float> net(batch, 3);
  Random rng(4);
  std::vector<float> x(batch * 100), grad(batch * 3);
  for (int step = 0; step < 20; ++step) {
    for (float& v : x) v = float(rng.uniform(-1, 3));  // mean 1: far from the initial running mean 0
    const float* p = net.forward(x.data(), batch, Mode::train, StepRandom{1, std::uint64_t(step)});
    for (int i = 0; i < batch * 3; ++i) grad[std::size_t(i)] = p[i] - (i % 3 == 0 ? 1.f : 0.f);
    net.backward(grad.data(), batch, Net::layer_count - 2);
    for (std::size_t k = 0; k < net.params().size(); ++k) net.params()[k] -= 0.05f * net.grads()[k];
  }
  REQUIRE(std::fabs(net.state()[0]) > 0.05f);  // running_mean of the first BatchNorm moved

  const DeployedParameters d = fold_batchnorm<Net>(net.params(), net.state());
  HostNetwork<Deploy<Net>, float> deployed(batch, 1);
  deployed.params() = d.params;
  deployed.state() = d.state;

  double worst = 0;
  int same_class = 0;
  for (int round = 0; round < 8; ++round) {
    for (float& v : x) v = float(rng.uniform(-1, 3));
    const float* a = net.forward(x.data(), batch, Mode::eval);
    const std::vector<float> pa(a, a + batch * 3);
    const float* b = deployed.forward(x.data(), batch, Mode::eval);
    for (int n = 0; n < batch; ++n) {
      for (int c = 0; c < 3; ++c)
        worst = std::max(worst, std::fabs(double(pa[std::size_t(n * 3 + c)]) - double(b[n * 3 + c])));
      same_class += std::max_element(pa.begin() + n * 3, pa.begin() + n * 3 + 3) - (pa.begin() + n * 3) ==
                    std::max_element(b + n * 3, b + n * 3 + 3) - (b + n * 3);
    }
  }
  INFO("largest probability difference " << worst);
  CHECK(worst < 2e-6);  // float rounding of the folded weights and of the skipped normalisation
  CHECK(same_class == 8 * batch);

  // A wrong-size input is refused with the sizes.
  CHECK_THROWS_WITH(fold_batchnorm<Net>(std::vector<float>(3), net.state()), Catch::Contains("ctnn: fold_batchnorm got 3"));
}

TEST_CASE("Deploy: the fold formula on one Dense + BatchNorm, by hand", "[deploy][batchnorm]") {
  using N = Network<Seq<Dense<2>, BatchNorm>, Input<2>>;
  static_assert(std::is_same_v<Deploy<N>, Network<Seq<Dense<2>>, Input<2>>>);
  using P = BufferPlan<N>;
  std::vector<float> p(P::param_floats), s(P::state_floats);
  const float W[4] = {1, 2, 3, 4}, b[2] = {0.5f, -1}, g[2] = {2, 0.5f}, beta[2] = {0.25f, 1}, mean[2] = {1, -2},
              var[2] = {4, 0.25f};
  std::copy(W, W + 4, p.begin() + P::weight_offset[0]);
  std::copy(b, b + 2, p.begin() + P::bias_offset[0]);
  std::copy(g, g + 2, p.begin() + P::weight_offset[1]);
  std::copy(beta, beta + 2, p.begin() + P::bias_offset[1]);
  std::copy(mean, mean + 2, s.begin());
  std::copy(var, var + 2, s.begin() + 2);
  const DeployedParameters d = fold_batchnorm<N>(p, s);
  const double s0 = 2 / std::sqrt(4 + 1e-5), s1 = 0.5 / std::sqrt(0.25 + 1e-5);
  CHECK(d.params[0] == float(1 * s0));
  CHECK(d.params[3] == float(4 * s1));
  CHECK(d.params[BufferPlan<Deploy<N>>::bias_offset[0]] == float((0.5 - 1) * s0 + 0.25));
  CHECK(d.params[BufferPlan<Deploy<N>>::bias_offset[0] + 1] == float((-1 + 2) * s1 + 1));
}
