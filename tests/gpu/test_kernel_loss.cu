// The fused loss kernels (kernels/loss.cuh) against the host references (train/softmax_cross_entropy.hpp,
// train/mse.hpp) on fresh random logits, labels and targets, outputs poisoned first: softmax
// cross-entropy with and without label smoothing, against labels and against probability targets;
// the mean squared error against one-hot labels and against float targets; widths 1, 10, 37 and 100
// (more than a warp's lanes); batches 1, 7 and 1024. Also: null grad and probs, and a bad label
// (loss NaN, correct 0), and two launches giving the same bits.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <ctnn/kernels/loss.cuh>
#include <ctnn/train/mse.hpp>
#include <ctnn/train/softmax_cross_entropy.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

enum class Target { labels, floats };

std::vector<std::int32_t> random_labels(int batch, int width, std::uint64_t seed) {
  ctnn::Random rng(seed);
  std::vector<std::int32_t> y(static_cast<std::size_t>(batch));
  for (auto& v : y) v = std::int32_t(rng.below(std::uint64_t(width)));
  return y;
}

// Rows of positive weights summing to 1 (probability targets) or plain values in [-1, 1] (regression).
std::vector<float> random_targets(int batch, int width, std::uint64_t seed, bool distribution) {
  std::vector<float> t = random_vector(std::size_t(batch) * width, seed, distribution ? 0.f : -1.f, 1.f);
  if (distribution)
    for (int n = 0; n < batch; ++n) {
      double sum = 0;
      for (int i = 0; i < width; ++i) sum += t[std::size_t(n) * width + i];
      for (int i = 0; i < width; ++i) t[std::size_t(n) * width + i] = float(t[std::size_t(n) * width + i] / sum);
    }
  return t;
}

template <class Loss, int W>
void test_loss(Tally& t, const typename Loss::Options& o, Target target, int batch, std::uint64_t seed,
               bool outputs = true) {
  constexpr bool sce = std::is_same_v<Loss, SoftmaxCrossEntropy>;
  const std::size_t size = std::size_t(batch) * W;
  const std::vector<float> z = random_vector(size, seed, -3.f, 3.f);
  const std::vector<std::int32_t> y = random_labels(batch, W, seed + 1);
  const std::vector<float> targets = random_targets(batch, W, seed + 2, sce);
  const bool labels = target == Target::labels;

  std::vector<float> grad(size), loss(static_cast<std::size_t>(batch)), probs(size);
  std::vector<std::int32_t> correct(static_cast<std::size_t>(batch));
  Loss::host(o, z.data(), labels ? y.data() : nullptr, labels ? nullptr : targets.data(), batch, W, grad.data(),
             loss.data(), correct.data(), sce ? probs.data() : nullptr);

  Stream stream;
  DeviceBuffer<float> d_z(z), d_t(targets), d_grad(size), d_loss(static_cast<std::size_t>(batch)), d_probs(size);
  DeviceBuffer<std::int32_t> d_y(y), d_correct(static_cast<std::size_t>(batch));
  d_grad.poison(), d_loss.poison(), d_probs.poison(), d_correct.poison();
  kernels::loss_forward_backward<Loss, W>(stream.s, o, d_z.ptr, labels ? d_y.ptr : nullptr,
                                          labels ? nullptr : d_t.ptr, batch, outputs ? d_grad.ptr : nullptr,
                                          d_loss.ptr, d_correct.ptr, outputs && sce ? d_probs.ptr : nullptr);
  stream.sync();
  std::string eps;
  if constexpr (sce) eps = " eps " + std::to_string(o.label_smoothing);
  const std::string what = std::string(Loss::name) + " width " + std::to_string(W) + " batch " +
                           std::to_string(batch) + (labels ? " labels" : " targets") +
                           eps +
                           (outputs ? "" : " (null grad/probs)");
  // Float sums of at most 100 terms against double: a few ulps of the largest term.
  t(close_sum(d_loss.download(), loss, (what + ": loss").c_str(), 1e-5));
  if (outputs) {
    t(close_sum(d_grad.download(), grad, (what + ": grad").c_str(), 1e-5));
    if (sce) t(close_sum(d_probs.download(), probs, (what + ": probs").c_str(), 1e-5));
  }
  t(same_bits(d_correct.download(), correct, (what + ": correct").c_str()));
}

template <int W>
void test_width(Tally& t, std::uint64_t seed) {
  for (int batch : {1, 7, 1024}) {
    test_loss<SoftmaxCrossEntropy, W>(t, {0.f}, Target::labels, batch, seed++);
    test_loss<SoftmaxCrossEntropy, W>(t, {0.1f}, Target::labels, batch, seed++);
    test_loss<SoftmaxCrossEntropy, W>(t, {0.2f}, Target::floats, batch, seed++);
    test_loss<Mse, W>(t, {}, Target::labels, batch, seed++);
    test_loss<Mse, W>(t, {}, Target::floats, batch, seed++);
  }
  test_loss<SoftmaxCrossEntropy, W>(t, {0.1f}, Target::labels, 33, seed++, false);
  test_loss<Mse, W>(t, {}, Target::floats, 33, seed++, false);
}

// A label outside [0, W) must show: loss NaN, correct 0, NaN gradient row; the other samples unharmed.
template <class Loss>
void test_bad_label(Tally& t) {
  constexpr int W = 10, batch = 3;
  const std::vector<float> z = random_vector(batch * W, 5, -3.f, 3.f);
  const std::vector<std::int32_t> y{2, W, 7};
  Stream stream;
  DeviceBuffer<float> d_z(z), d_grad(batch * W), d_loss(batch);
  DeviceBuffer<std::int32_t> d_y(y), d_correct(batch);
  d_grad.poison(), d_loss.poison(), d_correct.poison();
  kernels::loss_forward_backward<Loss, W>(stream.s, {}, d_z.ptr, d_y.ptr, nullptr, batch, d_grad.ptr, d_loss.ptr,
                                          d_correct.ptr, nullptr);
  stream.sync();
  const auto loss = d_loss.download();
  const auto correct = d_correct.download();
  const auto grad = d_grad.download();
  const bool ok = std::isnan(loss[1]) && correct[1] == 0 && std::isnan(grad[W]) && std::isfinite(loss[0]) &&
                  std::isfinite(loss[2]) && std::isfinite(grad[0]) && std::isfinite(grad[2 * W]);
  std::printf("%s %s: a label outside 0..%d gives loss NaN, correct 0\n", ok ? "ok  " : "FAIL", Loss::name, W - 1);
  t(ok);
}

// Two launches on the same inputs give the same bits (fixed-order warp reductions, no atomics).
template <class Loss>
void test_repeat(Tally& t, const typename Loss::Options& o) {
  constexpr int W = 100, batch = 1024;
  const std::vector<float> z = random_vector(std::size_t(batch) * W, 9, -3.f, 3.f);
  const std::vector<std::int32_t> y = random_labels(batch, W, 10);
  Stream stream;
  DeviceBuffer<float> d_z(z), d_grad(std::size_t(batch) * W), d_loss(batch), d_probs(std::size_t(batch) * W);
  DeviceBuffer<std::int32_t> d_y(y), d_correct(batch);
  std::vector<float> first_grad, first_loss;
  for (int run = 0; run < 2; ++run) {
    d_grad.poison(), d_loss.poison();
    kernels::loss_forward_backward<Loss, W>(stream.s, o, d_z.ptr, d_y.ptr, nullptr, batch, d_grad.ptr, d_loss.ptr,
                                            d_correct.ptr, d_probs.ptr);
    stream.sync();
    if (run == 0) first_grad = d_grad.download(), first_loss = d_loss.download();
  }
  t(same_bits(d_grad.download(), first_grad, (std::string(Loss::name) + " twice: grad").c_str()));
  t(same_bits(d_loss.download(), first_loss, (std::string(Loss::name) + " twice: loss").c_str()));
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_width<1>(t, 100);
    test_width<10>(t, 200);
    test_width<37>(t, 300);
    test_width<100>(t, 400);
    test_bad_label<SoftmaxCrossEntropy>(t);
    test_bad_label<Mse>(t);
    test_repeat<SoftmaxCrossEntropy>(t, {0.1f});
    test_repeat<Mse>(t, {});
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
