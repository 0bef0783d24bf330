// LeakyReLU, GlobalAvgPool, Dropout and BatchNorm kernels against their host references on fresh
// random inputs, outputs poisoned first, at batch 1, an odd batch and the largest tested; then a
// whole network with all four, and one with nested Residual blocks (CudaNetwork against
// HostNetwork<Net, float>, training mode: the same dropout mask from the same (seed, step, layer), the
// same batch statistics and running statistics).
//   bitwise: LeakyReLU, GlobalAvgPool backward, Dropout (mask, forward, backward): one float
//            operation per element, the same on both sides.
//   close:   GlobalAvgPool forward (float sum against the host's double), BatchNorm (both reduce in
//            double, in different orders; outputs rounded to float once).
//   repeat:  BatchNorm's training forward and backward run twice give the same bits.
#include <cstdio>
#include <initializer_list>
#include <vector>

#include <ctnn/ctnn.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

template <class L, class In>
void test_simple(Tally& t, const char* name, std::initializer_list<int> batches, std::uint64_t seed, bool exact_fwd) {
  Labeler label(name);
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  Stream stream;
  const CudaContext ctx{stream.s, nullptr, nullptr, 0};
  for (const int batch : batches) {
    const std::size_t nx = std::size_t(batch) * B::in_size, ny = std::size_t(batch) * B::out_size;
    const std::vector<float> x = random_vector(nx, seed + batch, -3.f, 3.f), dy = random_vector(ny, seed + 7 * batch);
    std::vector<float> y_ref(ny), dx_ref(nx);
    B::template forward<float>(nullptr, nullptr, x.data(), y_ref.data(), batch);
    B::template backward<float>(nullptr, x.data(), y_ref.data(), dy.data(), dx_ref.data(), nullptr, nullptr, batch);
    DeviceBuffer<float> d_x(x), d_y(ny), d_y_ref(y_ref), d_dy(dy), d_dx(nx);
    d_y.poison(), d_dx.poison();
    Dev::forward(ctx, nullptr, nullptr, d_x.ptr, d_y.ptr, batch);
    Dev::backward(ctx, nullptr, d_x.ptr, d_y_ref.ptr, d_dy.ptr, d_dx.ptr, nullptr, nullptr, batch);
    stream.sync();
    if (exact_fwd) t(same_bits(d_y.download(), y_ref, label(batch, "forward")));
    else t(close_sum(d_y.download(), y_ref, label(batch, "forward"), 1e-5));
    t(same_bits(d_dx.download(), dx_ref, label(batch, "backward dx")));
  }
}

template <float P, class In>
void test_dropout(Tally& t, const char* name, std::initializer_list<int> batches, std::uint64_t seed) {
  Labeler label(name);
  using L = Dropout<P>;
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  Stream stream;
  const std::uint64_t run_seed = 77, layer = 3, step = 1234;
  DeviceBuffer<std::uint64_t> d_step(std::vector<std::uint64_t>{step});
  CudaContext ctx{stream.s, nullptr, nullptr, 0};
  ctx.step = d_step.ptr;
  for (const int batch : batches) {
    const std::size_t n = std::size_t(batch) * B::in_size;
    const std::vector<float> x = random_vector(n, seed + batch), dy = random_vector(n, seed + 5 * batch);
    std::vector<float> y_ref(n), mask_ref(n), dx_ref(n);
    ForwardArgs<float> h;
    h.x = x.data(), h.y = y_ref.data(), h.saved = mask_ref.data(), h.batch = batch, h.mode = Mode::train;
    h.rng_key = counter_key(run_seed, step, layer);
    B::forward(h);
    BackwardArgs<float> hb;
    hb.dy = dy.data(), hb.saved = mask_ref.data(), hb.dx = dx_ref.data(), hb.batch = batch;
    B::backward(hb);

    DeviceBuffer<float> d_x(x), d_y(n), d_mask(n), d_dy(dy), d_dx(n);
    d_y.poison(), d_mask.poison(), d_dx.poison();
    ForwardArgs<float> a = h;
    a.x = d_x.ptr, a.y = d_y.ptr, a.saved = d_mask.ptr;
    a.rng_key = layer_key(run_seed, layer);  // the device combines it with *ctx.step
    Dev::forward(ctx, a);
    BackwardArgs<float> b = hb;
    b.dy = d_dy.ptr, b.saved = d_mask.ptr, b.dx = d_dx.ptr;
    Dev::backward(ctx, b);
    stream.sync();
    t(same_bits(d_mask.download(), mask_ref, label(batch, "mask (host and device draw the same)")));
    t(same_bits(d_y.download(), y_ref, label(batch, "forward")));
    t(same_bits(d_dx.download(), dx_ref, label(batch, "backward dx")));
    // Evaluation: the identity.
    d_y.poison();
    a.mode = Mode::eval;
    Dev::forward(ctx, a);
    stream.sync();
    t(same_bits(d_y.download(), x, label(batch, "eval forward (identity)")));
  }
}

template <class In>
void test_batchnorm(Tally& t, const char* name, std::initializer_list<int> batches, std::uint64_t seed) {
  Labeler label(name);
  using B = BatchNorm::bind<In>;
  using Dev = cuda_layer<BatchNorm, In>;
  constexpr std::size_t C = std::size_t(B::C);
  Stream stream;
  const CudaContext ctx{stream.s, nullptr, nullptr, 0};
  for (const int batch : batches) {
    const std::size_t n = std::size_t(batch) * B::in_size;
    // Inputs with an offset and scale per channel, so that the mean and variance matter.
    std::vector<float> x = random_vector(n, seed + batch, -2.f, 2.f);
    for (std::size_t i = 0; i < n; ++i) x[i] = x[i] * (1.f + float(i / B::S % C)) + 0.5f * float(i / B::S % C);
    const std::vector<float> dy = random_vector(n, seed + 3 * batch), w = random_vector(C, seed + 1, 0.5f, 1.5f),
                             b = random_vector(C, seed + 2);
    std::vector<float> state0 = random_vector(2 * C + 1, seed + 4, 0.5f, 1.5f);
    state0[2 * C] = 3.f;
    const bool train = B::values(batch) >= 2;

    std::vector<float> y_ref(n), saved_ref(B::saved_size * std::size_t(batch)), state_ref = state0;
    std::vector<float> dx_ref(n), dw_ref(C), db_ref(C), y_eval_ref(n);
    ForwardArgs<float> h;
    h.w = w.data(), h.b = b.data(), h.state = state_ref.data(), h.x = x.data(), h.batch = batch;
    h.y = y_eval_ref.data(), h.mode = Mode::eval;
    B::forward(h);
    DeviceBuffer<float> d_x(x), d_y(n), d_w(w), d_b(b), d_state(state0), d_saved(saved_ref.size()), d_dy(dy),
        d_dx(n), d_dw(C), d_db(C);
    ForwardArgs<float> a = h;
    a.w = d_w.ptr, a.b = d_b.ptr, a.state = d_state.ptr, a.x = d_x.ptr, a.y = d_y.ptr, a.saved = d_saved.ptr;
    d_y.poison();
    Dev::forward(ctx, a);
    stream.sync();
    t(close(d_y.download(), y_eval_ref, label(batch, "eval forward"), 1e-5, 1e-6));
    if (!train) continue;

    h.mode = Mode::train, h.y = y_ref.data(), h.saved = saved_ref.data();
    B::forward(h);
    BackwardArgs<float> hb;
    hb.w = w.data(), hb.x = x.data(), hb.y = y_ref.data(), hb.dy = dy.data(), hb.saved = saved_ref.data();
    hb.dx = dx_ref.data(), hb.dw = dw_ref.data(), hb.db = db_ref.data(), hb.batch = batch;
    B::backward(hb);

    std::vector<float> first_y, first_dx;
    for (int repeat = 0; repeat < 2; ++repeat) {
      d_state.upload(state0);
      d_y.poison(), d_saved.poison(), d_dx.poison(), d_dw.poison(), d_db.poison();
      a.mode = Mode::train;
      Dev::forward(ctx, a);
      BackwardArgs<float> b2 = hb;
      b2.w = d_w.ptr, b2.x = d_x.ptr, b2.y = d_y.ptr, b2.dy = d_dy.ptr, b2.saved = d_saved.ptr;
      b2.dx = d_dx.ptr, b2.dw = d_dw.ptr, b2.db = d_db.ptr;
      Dev::backward(ctx, b2);
      stream.sync();
      const std::vector<float> y = d_y.download(), dx = d_dx.download();
      if (repeat == 1) {
        t(same_bits(y, first_y, label(batch, "train forward, run twice")));
        t(same_bits(dx, first_dx, label(batch, "backward dx, run twice")));
        break;
      }
      first_y = y, first_dx = dx;
      t(close(y, y_ref, label(batch, "train forward"), 1e-5, 1e-5));
      const std::vector<float> saved = d_saved.download();  // the first 2C floats are used
      t(close(std::vector<float>(saved.begin(), saved.begin() + 2 * C),
              std::vector<float>(saved_ref.begin(), saved_ref.begin() + 2 * C), label(batch, "saved mean, 1/sigma"),
              1e-6, 1e-7));
      t(close(d_state.download(), state_ref, label(batch, "running statistics, count"), 1e-6, 1e-7));
      t(close_sum(dx, dx_ref, label(batch, "backward dx"), 1e-4));
      t(close_sum(d_dw.download(), dw_ref, label(batch, "backward dweight"), 1e-4));
      t(close_sum(d_db.download(), db_ref, label(batch, "backward dbias"), 1e-4));
    }
  }
}

// The whole network on both backends, training mode, from the same parameters and state.
template <class Net, int MaxBatch>
void test_network(Tally& t, const char* name, std::initializer_list<int> batches) {
  Labeler label(name);
  using plan = BufferPlan<Net>;
  constexpr std::size_t L = Net::layer_count;
  const std::uint64_t seed = 5, step = 42;
  CudaNetwork<Net, MaxBatch> dev(seed);
  DeviceBuffer<std::uint64_t> d_step(std::vector<std::uint64_t>{step});
  dev.set_random(d_step.ptr, seed);
  for (const int batch : batches) {
    HostNetwork<Net, float> host(batch, seed);
    host.params() = dev.parameters();
    host.state() = dev.state_values();
    const std::vector<float> x = random_vector(plan::act_size[0] * std::size_t(batch), 100 + batch);
    const std::vector<float> dy = random_vector(plan::act_size[L] * std::size_t(batch), 200 + batch);
    const float* y_host = host.forward(x.data(), batch, Mode::train, StepRandom{seed, step});
    const std::vector<float> y_ref(y_host, y_host + dy.size());
    host.backward(dy.data(), batch);
    dev.upload_input(x.data(), batch);
    dev.forward(batch, L - 1, Mode::train);
    dev.upload_output_grad(dy.data(), batch);
    dev.backward(batch);
    dev.synchronize();
    t(close(dev.download_activation(L, batch), y_ref, label(batch, "network train forward"), 1e-4, 1e-5));
    t(close_sum(dev.gradients(), host.grads(), label(batch, "network gradients"), 1e-3));
    t(close(dev.state_values(), host.state(), label(batch, "network layer state"), 1e-5, 1e-6));
    // Evaluation with the updated running statistics.
    const float* e = host.forward(x.data(), batch, Mode::eval);
    dev.forward(batch, L - 1, Mode::eval);
    t(close(dev.download_activation(L, batch), std::vector<float>(e, e + dy.size()),
            label(batch, "network eval forward"), 1e-4, 1e-5));
    dev.set_state(host.state());  // the next batch starts both from the same state again
  }
}

using CnnNet = Network<Seq<Conv<8, 3, Pad<1>>, BatchNorm, LeakyReLU<>, Dropout<0.25f>, Conv<8, 3, Pad<1>>,
                           BatchNorm, ReLU, GlobalAvgPool, Dense<16>, BatchNorm, LeakyReLU<0.1f>, Dropout<>, Dense<10>>,
                       Input<1, 12, 12>>;
// A Residual block with BatchNorm and Dropout inside, nested in another block.
using ResNet = Network<Seq<Conv<8, 3, Pad<1>>, BatchNorm, ReLU,
                           Residual<Seq<Conv<8, 3, Pad<1>>, BatchNorm, LeakyReLU<>, Dropout<0.25f>, Conv<8, 3, Pad<1>>,
                                        Residual<Seq<BatchNorm, ReLU, Dropout<0.5f>>>>>,
                           GlobalAvgPool, Dense<10>>,
                       Input<1, 11, 11>>;

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    test_simple<LeakyReLU<>, Shape<6, 28, 28>>(t, "LeakyReLU 0.01", {1, 37, 256}, 11, true);
    test_simple<LeakyReLU<0.2f>, Shape<83>>(t, "LeakyReLU 0.2 odd size", {1, 37, 256}, 12, true);
    test_simple<GlobalAvgPool, Shape<16, 7, 7>>(t, "GlobalAvgPool 16x7x7", {1, 37, 256}, 13, false);
    test_simple<GlobalAvgPool, Shape<3, 33, 31>>(t, "GlobalAvgPool 3x33x31", {1, 37, 64}, 14, false);
    test_dropout<0.5f, Shape<6, 14, 14>>(t, "Dropout 0.5", {1, 37, 256}, 15);
    test_dropout<0.1f, Shape<83>>(t, "Dropout 0.1 odd size", {1, 37, 256}, 16);
    test_batchnorm<Shape<16, 10, 10>>(t, "BatchNorm2d 16x10x10", {1, 37, 256}, 17);
    test_batchnorm<Shape<3, 5, 7>>(t, "BatchNorm2d 3x5x7", {1, 37, 1024}, 18);
    test_batchnorm<Shape<120>>(t, "BatchNorm1d 120", {1, 2, 37, 256}, 19);
    test_network<CnnNet, 64>(t, "CNN net", {2, 37, 64});
    test_network<ResNet, 64>(t, "Residual net", {1, 37, 64});
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return t.summary();
}
