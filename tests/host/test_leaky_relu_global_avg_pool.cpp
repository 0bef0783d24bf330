// LeakyReLU<Slope> and GlobalAvgPool: hand-computed values, finite differences, labels, model-card rows.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "ctnn/ctnn.hpp"
#include "gradcheck.hpp"

using namespace ctnn;

TEST_CASE("LeakyReLU: values, slope at and below zero, gradient", "[layers][leaky_relu]") {
  using B = LeakyReLU<0.25f>::bind<Shape<5>>;
  const std::vector<float> x{-2.f, -0.5f, 0.f, 0.5f, 3.f};
  std::vector<float> y(5), dx(5);
  B::forward<float>(nullptr, nullptr, x.data(), y.data(), 1);
  CHECK(y == std::vector<float>{-0.5f, -0.125f, 0.f, 0.5f, 3.f});
  const std::vector<float> dy{1.f, 2.f, 4.f, 8.f, 16.f};
  B::backward<float>(nullptr, x.data(), y.data(), dy.data(), dx.data(), nullptr, nullptr, 1);
  CHECK(dx == std::vector<float>{0.25f, 0.5f, 1.f, 8.f, 16.f});  // at 0: the slope, as PyTorch
  CHECK(LeakyReLU<>::slope == 0.01f);
  CHECK(LeakyReLU<>::label() == "LeakyReLU 0.01");
  CHECK(LeakyReLU<0.2f>::label() == "LeakyReLU 0.2");

  const auto report = ctnn::testing::gradcheck_layer<LeakyReLU<0.2f>::bind<Shape<3, 4, 5>>>(3);
  INFO(report.str());
  CHECK(report.max_error() < 1e-6);
}

TEST_CASE("GlobalAvgPool: channel means, spread gradient", "[layers][global_avg_pool]") {
  using B = GlobalAvgPool::bind<Shape<2, 2, 3>>;
  static_assert(std::is_same_v<B::output_shape, Shape<2>>);
  const std::vector<double> x{1, 2, 3, 4, 5, 6, -1, -1, -1, -1, -1, 5};  // sample 0: channels 0, 1
  std::vector<double> y(2), dx(12);
  B::forward<double>(nullptr, nullptr, x.data(), y.data(), 1);
  CHECK(y == std::vector<double>{3.5, 0});
  const std::vector<double> dy{6, -12};
  B::backward<double>(nullptr, x.data(), y.data(), dy.data(), dx.data(), nullptr, nullptr, 1);
  CHECK(dx == std::vector<double>{1, 1, 1, 1, 1, 1, -2, -2, -2, -2, -2, -2});

  const auto report = ctnn::testing::gradcheck_layer<GlobalAvgPool::bind<Shape<3, 5, 4>>>(3);
  INFO(report.str());
  CHECK(report.max_error() < 1e-6);
}

TEST_CASE("LeakyReLU and GlobalAvgPool in a network: shapes, model card, whole-network gradient",
          "[layers][model_card]") {
  using Net = Network<Seq<Conv<4, 3>, LeakyReLU<>, GlobalAvgPool, Dense<3>, Softmax>, Input<1, 6, 6>>;
  static_assert(std::is_same_v<Net::shape_at<2>, Shape<4>>);
  static_assert(Net::param_count == 4 * 9 + 4 + 4 * 3 + 3);
  std::ostringstream card;
  print_model_card<Net>(card, 8);
  INFO(card.str());
  CHECK(card.str().find("  1  LeakyReLU 0.01  4x4x4") != std::string::npos);
  CHECK(card.str().find("  2  GlobalAvgPool   4") != std::string::npos);
  const auto report = ctnn::testing::gradcheck_network<Net>(3);
  INFO(report.str());
  CHECK(report.max_error() < 1e-6);
}
