// Softmax kernels (kernels/softmax.cuh) on fresh random inputs, outputs poisoned first: the layer's
// forward and general backward against the host reference Softmax::bind<In>, and the fused
// softmax + cross-entropy kernel against the same math done inline in double (and against
// train/loss.hpp's batch loss and correct count). Includes tied logits (argmax takes the lowest
// index) and a label out of range (loss NaN, not counted correct).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <vector>

#include <ctnn/kernels/softmax.cuh>
#include <ctnn/layers/softmax.hpp>
#include <ctnn/train/loss.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <int N>
void test_layer(Tally& t, std::initializer_list<int> batches, std::uint64_t seed) {
  using B = Softmax::bind<Shape<N>>;
  using Dev = cuda_layer<Softmax, Shape<N>>;
  Stream stream;
  const CudaContext ctx{stream.s, nullptr, nullptr, 0};
  char what[160];
  for (const int batch : batches) {
    const std::size_t n = std::size_t(batch) * N;
    const std::vector<float> x = random_vector(n, seed + batch, -6.f, 6.f), dy = random_vector(n, seed + 1 + batch);
    std::vector<float> y_ref(n), dx_ref(n);
    B::template forward<float>(nullptr, nullptr, x.data(), y_ref.data(), batch);
    B::template backward<float>(nullptr, x.data(), y_ref.data(), dy.data(), dx_ref.data(), nullptr, nullptr, batch);
    DeviceBuffer<float> d_x(x), d_y(n), d_yref(y_ref), d_dy(dy), d_dx(n);
    d_y.poison(), d_dx.poison();
    Dev::forward(ctx, nullptr, nullptr, d_x.ptr, d_y.ptr, batch);
    Dev::backward(ctx, nullptr, d_x.ptr, d_yref.ptr, d_dy.ptr, d_dx.ptr, nullptr, nullptr, batch);
    stream.sync();
    std::snprintf(what, sizeof what, "Softmax N=%d batch %d forward", N, batch);
    t(close(d_y.download(), y_ref, what, 1e-5, 1e-7));
    std::snprintf(what, sizeof what, "Softmax N=%d batch %d backward", N, batch);
    t(close_sum(d_dx.download(), dx_ref, what));
  }
}

template <int N>
void test_cross_entropy(Tally& t, std::initializer_list<int> batches, std::uint64_t seed) {
  Stream stream;
  char what[160];
  auto label_of = [&](int batch, const char* q) {
    std::snprintf(what, sizeof what, "softmax cross-entropy N=%d batch %d %s", N, batch, q);
    return what;
  };
  for (const int batch : batches) {
    const std::size_t n = std::size_t(batch) * N;
    std::vector<float> z = random_vector(n, seed + batch, -5.f, 5.f);
    std::vector<std::int32_t> labels(batch);
    Random rng(seed + 1 + batch);
    for (auto& l : labels) l = std::int32_t(rng.below(N));
    // Sample 0: all logits equal (argmax is class 0). Sample 1: the maximum twice (the lower index
    // wins). Sample 2: a label out of range.
    if (batch > 0)
      for (int i = 0; i < N; ++i) z[i] = 0.5f;
    if (batch > 1 && N > 2) z[std::size_t(N) + N / 2] = z[std::size_t(N) + N - 1] = 6.f;
    const int bad = batch > 2 ? 2 : -1;
    if (bad >= 0) labels[bad] = N;

    // Expectations in double.
    std::vector<float> p_ref(n), dz_ref(n), loss_ref;
    std::vector<std::int32_t> correct_ref(batch);
    for (int s = 0; s < batch; ++s) {
      const float* zs = z.data() + std::size_t(s) * N;
      int top = 0;
      for (int i = 1; i < N; ++i) top = zs[i] > zs[top] ? i : top;
      double sum = 0;
      for (int i = 0; i < N; ++i) sum += std::exp(double(zs[i]) - zs[top]);
      for (int i = 0; i < N; ++i) {
        const double p = std::exp(double(zs[i]) - zs[top]) / sum;
        p_ref[std::size_t(s) * N + i] = float(p);
        dz_ref[std::size_t(s) * N + i] = float((p - (i == labels[s] ? 1.0 : 0.0)) / batch);
      }
      if (s != bad) loss_ref.push_back(float(double(zs[top]) + std::log(sum) - zs[labels[s]]));
      correct_ref[s] = s != bad && top == labels[s];
    }

    DeviceBuffer<float> d_z(z), d_p(n), d_dz(n), d_loss(batch);
    DeviceBuffer<std::int32_t> d_labels(labels), d_correct(batch);
    d_p.poison(), d_dz.poison(), d_loss.poison(), d_correct.poison();
    kernels::softmax_cross_entropy<N>(stream.s, d_z.ptr, d_labels.ptr, d_p.ptr, d_dz.ptr, d_loss.ptr, d_correct.ptr,
                                      batch);
    stream.sync();
    t(close(d_p.download(), p_ref, label_of(batch, "probabilities"), 1e-5, 1e-7));
    t(close(d_dz.download(), dz_ref, label_of(batch, "dlogits"), 1e-4, 2e-6 / batch));
    std::vector<float> loss_all = d_loss.download(), loss;
    for (int s = 0; s < batch; ++s)
      if (s != bad) loss.push_back(loss_all[s]);
    t(close(loss, loss_ref, label_of(batch, "loss"), 1e-5, 1e-6));
    const std::vector<std::int32_t> correct = d_correct.download();
    t(same_bits(correct, correct_ref, label_of(batch, "correct")));
    if (bad >= 0) {
      const bool nan = std::isnan(loss_all[bad]);
      std::printf("%s %s: bad label gives loss NaN\n", nan ? "ok  " : "FAIL", label_of(batch, "loss"));
      t(nan);
    }
    // The host trainer's loss (train/loss.hpp) on the samples with valid labels.
    if (bad < 0) {
      const CrossEntropy host = softmax_cross_entropy<N>(z.data(), labels.data(), batch);
      double mean = 0;
      std::size_t right = 0;
      for (int s = 0; s < batch; ++s) mean += loss_all[s], right += std::size_t(correct[s]);
      mean /= batch;
      const bool ok = std::fabs(mean - host.loss) <= 1e-5 * (1 + std::fabs(host.loss)) && right == host.correct;
      std::printf("%s %s: mean %.7g vs %.7g, correct %zu vs %zu\n", ok ? "ok  " : "FAIL",
                  label_of(batch, "vs train/loss.hpp"), mean, host.loss, right, host.correct);
      t(ok);
    }
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_layer<10>(t, {1, 37, 256}, 51);
    test_layer<1>(t, {1, 37}, 52);
    test_layer<37>(t, {1, 37, 256}, 53);   // more classes than lanes
    test_layer<100>(t, {1, 37, 64}, 54);
    test_cross_entropy<10>(t, {1, 2, 37, 256}, 55);
    test_cross_entropy<3>(t, {1, 37}, 56);
    test_cross_entropy<47>(t, {1, 37, 64}, 57);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
