// Each layer's host reference forward (and the backward rules that are specific to a layer: max
// pooling's tie-break, average pooling's padded divisor) on small hand-computed examples.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ctnn/ctnn.hpp"

using namespace ctnn;
using Approx = Catch::Detail::Approx;
using V = std::vector<double>;

namespace {

// Runs B::forward on x (batch inferred from its size) and returns y.
template <class B>
V forward(const V& w, const V& b, const V& x) {
  const int batch = int(x.size() / B::in_size);
  REQUIRE(x.size() == B::in_size * std::size_t(batch));
  REQUIRE(w.size() == B::weight_count);
  REQUIRE(b.size() == B::bias_count);
  V y(B::out_size * std::size_t(batch), -777.0);  // poisoned
  B::forward(w.data(), b.data(), x.data(), y.data(), batch);
  return y;
}

// dx of a parameterless layer for upstream gradient dy.
template <class B>
V backward_dx(const V& x, const V& dy) {
  const int batch = int(x.size() / B::in_size);
  V y(B::out_size * std::size_t(batch)), dx(x.size(), -777.0);
  const double* none = nullptr;  // no parameters
  B::forward(none, none, x.data(), y.data(), batch);
  B::backward(none, x.data(), y.data(), dy.data(), dx.data(), static_cast<double*>(nullptr),
              static_cast<double*>(nullptr), batch);
  return dx;
}

void expect_equal(const V& got, const V& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("index " << i);
    CHECK(got[i] == Approx(want[i]).margin(1e-12));
  }
}

V iota(std::size_t n) {
  V v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = double(i);
  return v;
}

}  // namespace

TEST_CASE("Conv: cross-correlation, no kernel flip, bias added", "[layers][conv]") {
  using B = Conv<1, 2>::bind<Shape<1, 2, 3>>;
  STATIC_REQUIRE(std::is_same_v<B::output_shape, Shape<1, 1, 2>>);
  // x = [1 2 3; 4 5 6], w = [1 2; 3 4]
  expect_equal(forward<B>({1, 2, 3, 4}, {1}, {1, 2, 3, 4, 5, 6}), {1 + 4 + 12 + 20 + 1, 2 + 6 + 15 + 24 + 1});
}

TEST_CASE("Conv: zero padding", "[layers][conv]") {
  using B = Conv<1, 3, Pad<1>>::bind<Shape<1, 3, 3>>;
  STATIC_REQUIRE(std::is_same_v<B::output_shape, Shape<1, 3, 3>>);
  // All-ones kernel: each output is the sum of the 3x3 neighbourhood of x = 1..9, zeros outside.
  expect_equal(forward<B>(V(9, 1.0), {0.5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
               {12.5, 21.5, 16.5, 27.5, 45.5, 33.5, 24.5, 39.5, 28.5});
}

TEST_CASE("Conv: stride", "[layers][conv]") {
  using B = Conv<1, 2, Stride<2>>::bind<Shape<1, 4, 4>>;
  STATIC_REQUIRE(std::is_same_v<B::output_shape, Shape<1, 2, 2>>);
  // Diagonal kernel: y(oy,ox) = x[2oy][2ox] + x[2oy+1][2ox+1], x[r][c] = 4r + c.
  expect_equal(forward<B>({1, 0, 0, 1}, {0}, iota(16)), {5, 9, 21, 25});
}

TEST_CASE("Conv: dilation on a non-square input", "[layers][conv]") {
  using B = Conv<1, 2, Dilation<2>>::bind<Shape<1, 3, 4>>;
  STATIC_REQUIRE(std::is_same_v<B::output_shape, Shape<1, 1, 2>>);
  // Taps at rows {0, 2} and columns {ox, ox+2}: y = 1·x[0][ox] + 2·x[0][ox+2] + 3·x[2][ox] + 4·x[2][ox+2].
  expect_equal(forward<B>({1, 2, 3, 4}, {0}, iota(12)), {0 + 4 + 24 + 40, 1 + 6 + 27 + 44});
}

TEST_CASE("Conv: stride and padding together", "[layers][conv]") {
  using B = Conv<1, 3, Stride<2>, Pad<1>>::bind<Shape<1, 3, 3>>;
  STATIC_REQUIRE(std::is_same_v<B::output_shape, Shape<1, 2, 2>>);
  expect_equal(forward<B>(V(9, 1.0), {0}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), {12, 16, 24, 28});
}

TEST_CASE("Conv: channels in and out, weight layout [Out][In][K][K], batch", "[layers][conv]") {
  using B = Conv<2, 1>::bind<Shape<2, 1, 2>>;
  // w[0] = {1, 10}, w[1] = {-1, 0.5}; b = {0.5, -1}; sample 0: ch0 = {1, 2}, ch1 = {3, 4}; sample 1 = 2 x sample 0.
  const V w{1, 10, -1, 0.5}, b{0.5, -1};
  expect_equal(forward<B>(w, b, {1, 2, 3, 4, 2, 4, 6, 8}),
               {31.5, 42.5, -0.5, -1, 62.5, 84.5, 0, -1});
}

TEST_CASE("MaxPool: values, overlapping windows", "[layers][pool]") {
  using B = Pool<2, Stride<1>>::bind<Shape<1, 3, 3>>;
  expect_equal(forward<B>({}, {}, {1, 2, 3, 4, 5, 6, 7, 8, 9}), {5, 6, 8, 9});
  using B2 = Pool<2>::bind<Shape<2, 2, 4>>;  // default stride = K; per channel
  expect_equal(forward<B2>({}, {}, {1, 9, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4, -5, -6, -7, -8}), {9, 7, -1, -3});
}

TEST_CASE("MaxPool: padding is ignored, not a zero", "[layers][pool]") {
  using B = Pool<2, Stride<2>, Pad<1>>::bind<Shape<1, 2, 2>>;
  STATIC_REQUIRE(std::is_same_v<B::output_shape, Shape<1, 2, 2>>);
  // Each window holds one real pixel; all are negative, so a padded zero would win if counted.
  expect_equal(forward<B>({}, {}, {-1, -2, -3, -4}), {-1, -2, -3, -4});
}

TEST_CASE("MaxPool: the gradient goes to the first maximum in row-major order", "[layers][pool]") {
  using B = Pool<2>::bind<Shape<1, 2, 2>>;
  expect_equal(backward_dx<B>({3, 5, 5, 1}, {1}), {0, 1, 0, 0});
  expect_equal(backward_dx<B>({2, 2, 2, 2}, {1}), {1, 0, 0, 0});
  expect_equal(backward_dx<B>({0, 1, 7, 7}, {2.5}), {0, 0, 2.5, 0});
  // Overlapping windows add their gradients on a shared maximum.
  using B2 = Pool<2, Stride<1>>::bind<Shape<1, 2, 3>>;
  expect_equal(backward_dx<B2>({1, 9, 2, 3, 4, 5}, {1, 10}), {0, 11, 0, 0, 0, 0});
}

TEST_CASE("AvgPool: values", "[layers][pool]") {
  using B = AvgPool<2>::bind<Shape<1, 2, 4>>;
  expect_equal(forward<B>({}, {}, iota(8)), {2.5, 4.5});
}

TEST_CASE("AvgPool: padded zeros count in the divisor", "[layers][pool]") {
  using B = AvgPool<2, Stride<2>, Pad<1>>::bind<Shape<1, 2, 2>>;
  // Each window holds one real pixel and three padded zeros: y = x / 4.
  expect_equal(forward<B>({}, {}, {4, 8, 12, 16}), {1, 2, 3, 4});
  expect_equal(backward_dx<B>({4, 8, 12, 16}, {1, 1, 1, 1}), {0.25, 0.25, 0.25, 0.25});
  using B3 = AvgPool<3, Stride<1>, Pad<1>>::bind<Shape<1, 2, 2>>;
  // Each 3x3 window covers all four pixels (sum 10) plus five zeros: 10 / 9.
  expect_equal(forward<B3>({}, {}, {1, 2, 3, 4}), {10.0 / 9, 10.0 / 9, 10.0 / 9, 10.0 / 9});
}

TEST_CASE("Dense: y = W x + b, batch-major", "[layers][dense]") {
  using B = Dense<2>::bind<Shape<3>>;
  const V w{1, 2, 3, -1, 0, 1}, b{0.5, -0.5};
  expect_equal(forward<B>(w, b, {1, 1, 2, 0, 1, 0}), {9.5, 0.5, 2.5, -0.5});
}

TEST_CASE("Dense: flattens C, H, W in that order", "[layers][dense]") {
  using B = Dense<1>::bind<Shape<2, 1, 2>>;
  STATIC_REQUIRE(B::weight_count == 4);
  expect_equal(forward<B>({1, 10, 100, 1000}, {0}, {1, 2, 3, 4}), {4321});
}

TEST_CASE("Dense: float instantiation", "[layers][dense]") {
  using B = Dense<2>::bind<Shape<2>>;
  const std::vector<float> w{0.5f, 0.25f, -1, 2}, b{1, 0}, x{2, 4};
  std::vector<float> y(2, -777.f);
  B::forward(w.data(), b.data(), x.data(), y.data(), 1);
  CHECK(y[0] == 3.0f);
  CHECK(y[1] == 6.0f);
}

TEST_CASE("Activations: forward and derivative from the output", "[layers][activation]") {
  const V x{-2, -0.5, 0.5, 3};
  expect_equal(forward<ReLU::bind<Shape<4>>>({}, {}, x), {0, 0, 0.5, 3});
  expect_equal(backward_dx<ReLU::bind<Shape<4>>>(x, {1, 2, 3, 4}), {0, 0, 3, 4});

  V s(4), t(4);
  for (int i = 0; i < 4; ++i) s[i] = 1 / (1 + std::exp(-x[i])), t[i] = std::tanh(x[i]);
  expect_equal(forward<Sigmoid::bind<Shape<4>>>({}, {}, x), s);
  expect_equal(forward<Sigmoid::bind<Shape<1>>>({}, {}, {0}), {0.5});
  expect_equal(backward_dx<Sigmoid::bind<Shape<4>>>(x, {1, 1, 1, 2}),
               {s[0] * (1 - s[0]), s[1] * (1 - s[1]), s[2] * (1 - s[2]), 2 * s[3] * (1 - s[3])});
  expect_equal(forward<Tanh::bind<Shape<2, 1, 2>>>({}, {}, x), t);
  expect_equal(backward_dx<Tanh::bind<Shape<4>>>(x, {1, 1, 1, 1}),
               {1 - t[0] * t[0], 1 - t[1] * t[1], 1 - t[2] * t[2], 1 - t[3] * t[3]});
}

TEST_CASE("Softmax: known values, rows sum to 1", "[layers][softmax]") {
  using B = Softmax::bind<Shape<3>>;
  const V y = forward<B>({}, {}, {0, std::log(2.0), std::log(3.0), 1, 2, 3});
  expect_equal({y[0], y[1], y[2]}, {1.0 / 6, 2.0 / 6, 3.0 / 6});
  CHECK(y[3] + y[4] + y[5] == Approx(1.0).margin(1e-15));
  CHECK(y[5] > y[4]);
  CHECK(y[4] > y[3]);
}

TEST_CASE("Softmax: stable for large logits", "[layers][softmax]") {
  using B = Softmax::bind<Shape<3>>;
  const V y = forward<B>({}, {}, {1000, 1000, 999, -1000, 0, -1000});
  for (double v : y) CHECK(std::isfinite(v));
  const double e = std::exp(-1.0);
  expect_equal(y, {1 / (2 + e), 1 / (2 + e), e / (2 + e), 0, 1, 0});

  using F = Softmax::bind<Shape<2>>;  // also in float
  const std::vector<float> x{1000.f, 1000.f};
  std::vector<float> yf(2, -777.f);
  const float* none = nullptr;
  F::forward(none, none, x.data(), yf.data(), 1);
  CHECK(yf[0] == 0.5f);
  CHECK(yf[1] == 0.5f);
}
