// Finite-difference gradient checks (double precision) of every layer's host backward, of whole
// networks, and of the fused softmax-cross-entropy training gradient. See gradcheck.hpp.
#include <catch2/catch.hpp>

#include <string>

#include "ctnn/ctnn.hpp"
#include "ctnn/network/host_network.hpp"
#include "gradcheck.hpp"

using namespace ctnn;
using ctnn::testing::GradcheckOptions;
using ctnn::testing::GradcheckReport;

namespace {

// Central differences with h = 1e-6 in double leave ~1e-9 of noise on these losses; a wrong
// gradient is off by far more than this.
constexpr double tolerance = 1e-6;

void expect_small(const GradcheckReport& report, const std::string& what) {
  INFO(what << "\n" << report.str());
  CHECK(report.max_error() < tolerance);
}

template <class B>
void check_layer(const std::string& what, int batch = 3) {
  expect_small(ctnn::testing::gradcheck_layer<B>(batch), what + " on " + B::input_shape::str());
}

}  // namespace

TEST_CASE("gradcheck: Conv", "[gradcheck]") {
  check_layer<Conv<4, 3>::bind<Shape<3, 5, 6>>>("Conv<4,3>");
  check_layer<Conv<3, 2, Stride<2>>::bind<Shape<2, 7, 6>>>("Conv<3,2,Stride<2>>");
  check_layer<Conv<2, 3, Pad<1>>::bind<Shape<2, 4, 5>>>("Conv<2,3,Pad<1>>");
  check_layer<Conv<2, 3, Dilation<2>>::bind<Shape<1, 6, 7>>>("Conv<2,3,Dilation<2>>");
  check_layer<Conv<3, 3, Stride<2>, Pad<1>, Dilation<2>>::bind<Shape<2, 7, 9>>>(
      "Conv<3,3,Stride<2>,Pad<1>,Dilation<2>>");
  check_layer<Conv<2, 1>::bind<Shape<3, 2, 3>>>("Conv<2,1>");
  check_layer<Conv<2, 5, Pad<2>>::bind<Shape<1, 4, 4>>>("Conv<2,5,Pad<2>> (kernel wider than input)", 1);
}

TEST_CASE("gradcheck: MaxPool", "[gradcheck]") {
  check_layer<Pool<2>::bind<Shape<2, 6, 6>>>("Pool<2>");
  check_layer<Pool<2, Stride<1>>::bind<Shape<1, 5, 4>>>("Pool<2,Stride<1>> (overlapping)");
  check_layer<Pool<3, Stride<2>, Pad<1>>::bind<Shape<2, 7, 6>>>("Pool<3,Stride<2>,Pad<1>>");
  check_layer<MaxPool<3, Stride<3>>::bind<Shape<1, 7, 8>>>("MaxPool<3,Stride<3>> (ragged edge)");
}

TEST_CASE("gradcheck: AvgPool", "[gradcheck]") {
  check_layer<AvgPool<2>::bind<Shape<2, 6, 6>>>("AvgPool<2>");
  check_layer<AvgPool<3, Stride<2>, Pad<1>>::bind<Shape<2, 7, 6>>>("AvgPool<3,Stride<2>,Pad<1>>");
  check_layer<AvgPool<2, Stride<1>, Pad<1>>::bind<Shape<1, 3, 4>>>("AvgPool<2,Stride<1>,Pad<1>>");
}

TEST_CASE("gradcheck: Dense", "[gradcheck]") {
  check_layer<Dense<5>::bind<Shape<7>>>("Dense<5>");
  check_layer<Dense<4>::bind<Shape<2, 3, 3>>>("Dense<4> (flattening)");
  check_layer<Dense<1>::bind<Shape<3>>>("Dense<1>", 1);
}

TEST_CASE("gradcheck: activations", "[gradcheck]") {
  // random_distinct keeps every input at least 0.1 away from ReLU's kink at 0.
  check_layer<ReLU::bind<Shape<2, 3, 4>>>("ReLU");
  check_layer<ReLU::bind<Shape<9>>>("ReLU");
  check_layer<Sigmoid::bind<Shape<2, 3, 4>>>("Sigmoid");
  check_layer<Sigmoid::bind<Shape<9>>>("Sigmoid");
  check_layer<Tanh::bind<Shape<2, 3, 4>>>("Tanh");
  check_layer<Tanh::bind<Shape<9>>>("Tanh");
}

TEST_CASE("gradcheck: Softmax", "[gradcheck]") {
  check_layer<Softmax::bind<Shape<6>>>("Softmax");
  check_layer<Softmax::bind<Shape<10>>>("Softmax", 1);
  check_layer<Softmax::bind<Shape<1>>>("Softmax of one value");
}

namespace {
using LeNet5 = models::LeNet5;
using RgbCnn = Network<Seq<Conv<8, 3, Pad<1>>, ReLU, Pool<2>,
                           Conv<12, 3, Stride<2>, Pad<1>, Dilation<2>>, Tanh, AvgPool<2>,
                           Dense<24>, Sigmoid,
                           Dense<10>, Softmax>,
                       Input<3, 32, 32>>;
using Mlp = Network<Seq<Dense<16>, Tanh, Dense<12>, Sigmoid, Dense<5>, Softmax>, Input<20>>;
}  // namespace

TEST_CASE("gradcheck: a network's bound layers", "[gradcheck]") {
  using Small = Network<Seq<Conv<3, 3, Pad<1>>, Tanh, Pool<2>, Dense<4>, Softmax>, Input<2, 6, 5>>;
  check_layer<Small::bound_at<0>>("Small layer 0 (Conv)");
  check_layer<Small::bound_at<1>>("Small layer 1 (Tanh)");
  check_layer<Small::bound_at<2>>("Small layer 2 (Pool)");
  check_layer<Small::bound_at<3>>("Small layer 3 (Dense)");
  check_layer<Small::bound_at<4>>("Small layer 4 (Softmax)");
}

TEST_CASE("gradcheck: whole networks", "[gradcheck][network]") {
  GradcheckOptions sampled;
  sampled.max_per_tensor = 24;  // every tensor of every layer, 24 values each
  SECTION("LeNet-5") { expect_small(ctnn::testing::gradcheck_network<LeNet5>(2, sampled), "LeNet-5"); }
  SECTION("RGB 3x32x32 CNN") { expect_small(ctnn::testing::gradcheck_network<RgbCnn>(2, sampled), "RgbCnn"); }
  SECTION("MLP Input<20> with Tanh and Sigmoid") {
    expect_small(ctnn::testing::gradcheck_network<Mlp>(3), "Mlp (every parameter)");
  }
}

TEST_CASE("gradcheck: softmax cross-entropy, fused gradient through the network", "[gradcheck][loss]") {
  GradcheckOptions sampled;
  sampled.max_per_tensor = 24;
  SECTION("LeNet-5") { expect_small(ctnn::testing::gradcheck_cross_entropy<LeNet5>(3, sampled), "LeNet-5"); }
  SECTION("RGB CNN") { expect_small(ctnn::testing::gradcheck_cross_entropy<RgbCnn>(2, sampled), "RgbCnn"); }
  SECTION("MLP") { expect_small(ctnn::testing::gradcheck_cross_entropy<Mlp>(4), "Mlp (every parameter)"); }
}

namespace {
// A Dense whose weight gradient is off by 0.01% in one value, and a max pool that sends the gradient
// to the last maximum of a window instead of the first.
using DenseB = Dense<3>::bind<Shape<4>>;
struct SkewedDense : DenseB {
  template <class T>
  static void backward(const T* w, const T* x, const T* y, const T* dy, T* dx, T* dw, T* db, int batch) {
    DenseB::backward(w, x, y, dy, dx, dw, db, batch);
    dw[5] *= T(1.0001);
  }
};
using PoolB = Pool<2>::bind<Shape<1, 2, 2>>;
struct WrongPool : PoolB {
  template <class T>
  static void backward(const T*, const T*, const T*, const T* dy, T* dx, T*, T*, int batch) {
    for (int n = 0; n < batch; ++n) dx[4 * n] = dx[4 * n + 1] = dx[4 * n + 2] = 0, dx[4 * n + 3] = dy[n];
  }
};
}  // namespace

TEST_CASE("gradcheck: catches a wrong gradient (negative control)", "[gradcheck]") {
  const GradcheckReport skewed = ctnn::testing::gradcheck_layer<SkewedDense>(2);
  INFO(skewed.str());
  CHECK(skewed.max_error() > 10 * tolerance);
  REQUIRE(skewed.tensors.size() == 3);
  CHECK(skewed.tensors[1].name == "dw");
  CHECK(skewed.tensors[1].worst_index == 5);
  CHECK(skewed.tensors[0].worst < tolerance);  // dx and db are still right
  CHECK(skewed.tensors[2].worst < tolerance);
  CHECK(ctnn::testing::gradcheck_layer<WrongPool>(3).max_error() > 0.1);
}
