// The loss types (train/softmax_cross_entropy.hpp, train/mse.hpp): values against formulas written
// out here in double (torch.nn.CrossEntropyLoss with label smoothing and with probability targets,
// torch.nn.MSELoss), gradients against central differences of those independent formulas, the
// fused softmax outputs, accuracy with ties, the compile-time fit with networks, and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "ctnn/core/random.hpp"
#include "ctnn/ctnn.hpp"
#include "ctnn/train/mse.hpp"
#include "ctnn/train/softmax_cross_entropy.hpp"

using namespace ctnn;
using Catch::Contains;

namespace {

using Classifier = Network<Seq<Dense<8>, ReLU, Dense<5>, Softmax>, Input<6>>;
using Regressor = Network<Seq<Dense<8>, Tanh, Dense<3>>, Input<6>>;
static_assert(SoftmaxCrossEntropy::fits<Classifier>() && SoftmaxCrossEntropy::grad_layer<Classifier> == 2);
static_assert(Mse::fits<Classifier>() && Mse::grad_layer<Classifier> == 3);
static_assert(Mse::fits<Regressor>() && Mse::grad_layer<Regressor> == 2);

std::vector<float> random_floats(std::size_t count, std::uint64_t seed, double lo, double hi) {
  Random rng(seed);
  std::vector<float> v(count);
  for (auto& x : v) x = float(rng.uniform(lo, hi));
  return v;
}

// torch.nn.CrossEntropyLoss(label_smoothing=eps), mean over the batch, from its documentation:
// loss_n = −Σ_i q_i·log softmax(z_n)_i with q = (1 − eps)·target + eps/K, written as directly as it reads.
double cross_entropy_ref(const std::vector<double>& z, const std::int32_t* labels, const float* targets, int batch,
                         int K, double eps) {
  double total = 0;
  for (int n = 0; n < batch; ++n) {
    double norm = 0;
    for (int i = 0; i < K; ++i) norm += std::exp(z[std::size_t(n) * K + i]);
    for (int i = 0; i < K; ++i) {
      const double target = labels ? (labels[n] == i ? 1.0 : 0.0) : double(targets[std::size_t(n) * K + i]);
      const double q = (1 - eps) * target + eps / K;
      total -= q * std::log(std::exp(z[std::size_t(n) * K + i]) / norm);
    }
  }
  return total / batch;
}

// torch.nn.MSELoss(): mean over every element of (z − t)², t one-hot or given.
double mse_ref(const std::vector<double>& z, const std::int32_t* labels, const float* targets, int batch, int K) {
  double total = 0;
  for (int n = 0; n < batch; ++n)
    for (int i = 0; i < K; ++i) {
      const double t = labels ? (labels[n] == i ? 1.0 : 0.0) : double(targets[std::size_t(n) * K + i]);
      total += (z[std::size_t(n) * K + i] - t) * (z[std::size_t(n) * K + i] - t);
    }
  return total / (double(batch) * K);
}

// Runs Loss::host on z and checks the batch-mean loss against ref and the gradient against central
// differences of ref (in double, step 1e-5).
template <class Loss>
void check_against(const typename Loss::Options& o, const std::vector<float>& z, const std::int32_t* labels,
                   const float* targets, int batch, int K,
                   const std::function<double(const std::vector<double>&)>& ref) {
  const std::size_t size = std::size_t(batch) * K;
  std::vector<float> grad(size, -777.f), loss(std::size_t(batch), -777.f);
  std::vector<std::int32_t> correct(std::size_t(batch), -7);
  Loss::host(o, z.data(), labels, targets, batch, K, grad.data(), loss.data(), correct.data(), nullptr);
  std::vector<double> zd(z.begin(), z.end());
  double mean = 0;
  for (float l : loss) mean += l;
  mean /= batch;
  CHECK(mean == Approx(ref(zd)).epsilon(1e-6));
  const double h = 1e-5;
  for (std::size_t j = 0; j < size; ++j) {
    std::vector<double> up = zd, down = zd;
    up[j] += h, down[j] -= h;
    INFO("gradient element " << j);
    CHECK(double(grad[j]) == Approx((ref(up) - ref(down)) / (2 * h)).epsilon(1e-5).margin(1e-8));
  }
  for (int n = 0; n < batch; ++n) CHECK((correct[std::size_t(n)] == 0 || correct[std::size_t(n)] == 1));
}

}  // namespace

TEST_CASE("SoftmaxCrossEntropy: known values, fused gradient, probabilities, accuracy", "[loss]") {
  // Sample 0: z = (0, 0), label 0. Sample 1: z = (ln 3, 0), label 1 (softmax (3/4, 1/4)).
  const std::vector<float> z{0.f, 0.f, float(std::log(3.0)), 0.f};
  const std::vector<std::int32_t> labels{0, 1};
  std::vector<float> grad(4, -777.f), loss(2, -777.f), probs(4, -777.f);
  std::vector<std::int32_t> correct(2, -7);
  SoftmaxCrossEntropy::host({}, z.data(), labels.data(), nullptr, 2, 2, grad.data(), loss.data(), correct.data(),
                            probs.data());
  CHECK(loss[0] == Approx(std::log(2.0)));
  CHECK(loss[1] == Approx(std::log(4.0)));
  CHECK(correct == std::vector<std::int32_t>{1, 0});  // a tie goes to the lowest index: 0, right
  CHECK(probs[2] == Approx(0.75));
  CHECK(probs[3] == Approx(0.25));
  CHECK(grad[0] == Approx((0.5 - 1) / 2));
  CHECK(grad[1] == Approx(0.5 / 2));
  CHECK(grad[2] == Approx(0.75 / 2));
  CHECK(grad[3] == Approx((0.25 - 1) / 2));
}

TEST_CASE("SoftmaxCrossEntropy against torch's formula and finite differences, with label smoothing",
          "[loss]") {
  const int batch = 5, K = 7;
  const std::vector<float> z = random_floats(batch * K, 3, -4, 4);
  std::vector<std::int32_t> labels(batch);
  Random rng(4);
  for (auto& y : labels) y = std::int32_t(rng.below(K));
  for (float eps : {0.f, 0.1f, 0.5f, 1.f}) {
    INFO("label smoothing " << eps);
    check_against<SoftmaxCrossEntropy>({eps}, z, labels.data(), nullptr, batch, K, [&](const std::vector<double>& zd) {
      return cross_entropy_ref(zd, labels.data(), nullptr, batch, K, eps);
    });
  }
}

TEST_CASE("SoftmaxCrossEntropy with probability targets, as torch accepts them", "[loss]") {
  const int batch = 4, K = 6;
  const std::vector<float> z = random_floats(batch * K, 5, -3, 3);
  std::vector<float> t = random_floats(batch * K, 6, 0, 1);
  for (int n = 0; n < batch; ++n) {  // rows summing to 1 ...
    double s = 0;
    for (int i = 0; i < K; ++i) s += t[std::size_t(n) * K + i];
    for (int i = 0; i < K; ++i) t[std::size_t(n) * K + i] = float(t[std::size_t(n) * K + i] / s);
  }
  t[K] *= 1.5f;  // ... but one: the gradient p·Σq − q holds for any target weights
  for (float eps : {0.f, 0.2f}) {
    INFO("label smoothing " << eps);
    check_against<SoftmaxCrossEntropy>({eps}, z, nullptr, t.data(), batch, K, [&](const std::vector<double>& zd) {
      return cross_entropy_ref(zd, nullptr, t.data(), batch, K, eps);
    });
  }
  std::vector<float> loss(batch);
  std::vector<std::int32_t> correct(batch, -7);
  SoftmaxCrossEntropy::host({}, z.data(), nullptr, t.data(), batch, K, nullptr, loss.data(), correct.data(), nullptr);
  CHECK(correct == std::vector<std::int32_t>(batch, 0));  // no labels: nothing is counted right
}

TEST_CASE("SoftmaxCrossEntropy label smoothing equals torch's (1 − ε)·nll + ε·mean(−log p)", "[loss]") {
  const std::vector<float> z{2.f, -1.f, 0.5f};
  const std::int32_t label = 2;
  float loss = 0;
  std::int32_t correct = -1;
  SoftmaxCrossEntropy::host({0.3f}, z.data(), &label, nullptr, 1, 3, nullptr, &loss, &correct, nullptr);
  const double lse = std::log(std::exp(2.0) + std::exp(-1.0) + std::exp(0.5));
  const double nll = lse - 0.5, smooth = ((lse - 2.0) + (lse + 1.0) + (lse - 0.5)) / 3;
  CHECK(loss == Approx((1 - double(0.3f)) * nll + double(0.3f) * smooth));
  CHECK(correct == 0);
}

TEST_CASE("Mse against torch.nn.MSELoss and finite differences: one-hot labels and float targets", "[loss]") {
  const int batch = 3, K = 5;
  const std::vector<float> z = random_floats(batch * K, 7, -2, 2);
  const std::vector<std::int32_t> labels{4, 0, 2};
  const std::vector<float> t = random_floats(batch * K, 8, -1, 1);
  check_against<Mse>({}, z, labels.data(), nullptr, batch, K,
                     [&](const std::vector<double>& zd) { return mse_ref(zd, labels.data(), nullptr, batch, K); });
  check_against<Mse>({}, z, nullptr, t.data(), batch, K,
                     [&](const std::vector<double>& zd) { return mse_ref(zd, nullptr, t.data(), batch, K); });
  // Known values: z = (1, 0), label 1: ((1 − 0)² + (0 − 1)²)/2 = 1; gradient 2·(z − t)/(1·2) = (1, −1).
  const std::vector<float> z1{1.f, 0.f};
  const std::int32_t y = 1;
  std::vector<float> grad(2), loss(1);
  std::int32_t correct = -1;
  Mse::host({}, z1.data(), &y, nullptr, 1, 2, grad.data(), loss.data(), &correct, nullptr);
  CHECK(loss[0] == 1.f);
  CHECK(grad == std::vector<float>{1.f, -1.f});
  CHECK(correct == 0);
}

TEST_CASE("Loss errors: bad labels, missing targets, bad options", "[loss][errors]") {
  const std::vector<float> z(6, 0.5f);
  std::vector<float> loss(2);
  std::vector<std::int32_t> correct(2);
  const std::vector<std::int32_t> bad{1, 3};
  CHECK_THROWS_WITH(SoftmaxCrossEntropy::host({}, z.data(), bad.data(), nullptr, 2, 3, nullptr, loss.data(),
                                              correct.data(), nullptr),
                    Contains("ctnn: SoftmaxCrossEntropy: label 3 of sample 1 is outside 0..2"));
  CHECK_THROWS_WITH(Mse::host({}, z.data(), bad.data(), nullptr, 2, 3, nullptr, loss.data(), correct.data(), nullptr),
                    Contains("ctnn: Mse: label 3 of sample 1 is outside 0..2"));
  CHECK_THROWS_WITH(Mse::host({}, z.data(), nullptr, nullptr, 2, 3, nullptr, loss.data(), correct.data(), nullptr),
                    Contains("ctnn: Mse: needs class labels or float targets"));
  CHECK_THROWS_WITH(SoftmaxCrossEntropy::host({}, z.data(), bad.data(), nullptr, 0, 3, nullptr, loss.data(),
                                              correct.data(), nullptr),
                    Contains("needs batch >= 1"));
  CHECK_THROWS_WITH(SoftmaxCrossEntropy::validate({1.5f}), Contains("ctnn: SoftmaxCrossEntropy label smoothing"));
  CHECK_THROWS_WITH(SoftmaxCrossEntropy::validate({NAN}), Contains("label smoothing must be in [0, 1]"));
}
