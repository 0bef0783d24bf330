// The wgmma convolutions inside a network (CudaNetwork with Math::tf32, built for sm_90a): the network
// keeps TF32 copies of its wgmma layers' weights, remade at the start of every pass, and those layers'
// forward and backward data run on the wgmma kernels. On fresh random inputs, slots poisoned first:
//   - the copies hold every weight of each wgmma layer in the kernels' layouts (forward, backward data),
//     rounded to TF32, bit for bit, and follow new parameters at the next pass;
//   - each wgmma layer's output and input gradient in the network against the host reference in double
//     (wgmma_reference.hpp: the TF32 bound, and the sum of the operands the wgmma kernel sees: weights
//     rounded, the source truncated), and bit for bit against the wgmma kernel launched directly; so is
//     the weight gradient where it runs on wgmma (conv_wgmma_wgrad.cuh: the 32→64 layer);
//   - the same for a network of stride-2 layers (32→64 at 32×32, 64→128 at 16×16: the strided CIFAR
//     network's), whose forward alone runs on wgmma (ConvWgmmaFwdS2; a forward copy only), at batches that
//     take both of its tiles (all 128 channels a block, and 64);
//   - the trainer's fused pass of either network computes the stem's weight gradient in the 32→64 layer's
//     backward data (conv_stem_wgrad_epilogue.cuh), bit for bit as that kernel launched directly;
//   - training: the network learns synthetic patterns with TF32 on wgmma to within a point of FP32.
// Skipped (exit 77) without a device, or where the program's device code has no wgmma (not sm_90a).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/train/cuda_trainer.hpp>

#include "kernel_test.hpp"
#include "synthetic_images.hpp"
#include "wgmma_reference.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

// An RGB stem (3 channels: not a wgmma layer), then two wgmma layers (32→64 at 16×16, 64→64 at 8×8)
// around a pooling, and a Dense head.
using Net = Network<Seq<Conv<32, 3, Pad<1>>, ReLU, Conv<64, 3, Pad<1>>, ReLU, Pool<2>, Conv<64, 3, Pad<1>>, ReLU,
                        Dense<10>, Softmax>,
                    Input<3, 16, 16>>;
constexpr int max_batch = 32;
using Dev = CudaNetwork<Net, max_batch>;
static_assert(!Dev::wgmma_layer<0>() && Dev::wgmma_layer<2>() && Dev::wgmma_layer<5>() && Dev::wgmma_layers == 2);

// Two stride-2 layers after an RGB stem (the strided CIFAR network's first three convolutions).
using NetS2 = Network<Seq<Conv<32, 3, Pad<1>>, ReLU, Conv<64, 3, Stride<2>, Pad<1>>, ReLU,
                          Conv<128, 3, Stride<2>, Pad<1>>, ReLU, Dense<10>, Softmax>,
                      Input<3, 32, 32>>;
using DevS2 = CudaNetwork<NetS2, 128>;
static_assert(!DevS2::wgmma_layer<0>() && DevS2::wgmma_layer<2>() && DevS2::wgmma_layer<4>() &&
              DevS2::wgmma_layers == 2);

std::vector<float> download(const float* p, std::size_t n) {
  std::vector<float> h(n);
  CTNN_CUDA_CHECK(cudaDeviceSynchronize());
  CTNN_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}
void upload(float* p, const std::vector<float>& h) {
  CTNN_CUDA_CHECK(cudaDeviceSynchronize());
  CTNN_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
}
float tf32_rna(float x) { return float(tf32_rounded(x)); }

// Layer I's copies in the network's wgmma region against its weights, laid out on the host (a stride-2
// layer has the forward's only).
template <class D, std::size_t I>
void check_copies(Tally& t, D& net, const char* when) {
  using K = typename D::template layer_kernels<I>;
  using G = typename K::dims;
  constexpr int C = G::C, Out = G::Out, KK = 9;
  const CudaContext& ctx = net.context();
  const std::size_t at = D::plan::weight_offset[I] - D::wgmma_first, n = std::size_t(Out) * C * KK;
  const std::vector<float> w = download(net.params() + D::plan::weight_offset[I], n);
  const std::vector<float> copies = download(ctx.wgmma_weights, 2 * ctx.wgmma_floats);
  for (int dir = 0; dir < (G::S == 1 ? 2 : 1); ++dir) {
    const int M = dir == 0 ? Out : C, SC = dir == 0 ? C : Out;
    constexpr int CK = 8;  // the rule's tile: one k8 slice a step
    if constexpr (G::S == 1)
      static_assert(kernels::ConvWgmmaRule<kernels::ConvPatchFwd<G>>::CK == CK &&
                    kernels::ConvWgmmaRule<kernels::ConvPatchDgrad<G>>::CK == CK);
    else
      static_assert(kernels::ConvWgmmaS2Rule<G>::CK == CK && kernels::ConvWgmmaS2Split<G>::CK == CK);
    std::vector<float> want(n), got(copies.begin() + std::ptrdiff_t(dir * ctx.wgmma_floats + at),
                                    copies.begin() + std::ptrdiff_t(dir * ctx.wgmma_floats + at + n));
    for (int s = 0; s < SC / CK; ++s)
      for (int tap = 0; tap < KK; ++tap)
        for (int chunk = 0; chunk < CK / 4; ++chunk)
          for (int m = 0; m < M; ++m)
            for (int c4 = 0; c4 < 4; ++c4) {
              const int c = CK * s + 4 * chunk + c4;
              const float v = dir == 0 ? w[(std::size_t(m) * SC + c) * KK + tap] : w[(std::size_t(c) * M + m) * KK + KK - 1 - tap];
              want[(((std::size_t(s) * KK + tap) * (CK / 4) + chunk) * M + m) * 4 + c4] = tf32_rna(v);
            }
    char what[120];
    std::snprintf(what, sizeof what, "layer %zu's %s copy, %s", I, dir == 0 ? "forward" : "backward-data", when);
    t(same_bits(got, want, what));
  }
}

int wgrad_checked = 0;   // weight gradients on the wgmma kernel checked
int s2_checked[2] = {};  // stride-2 forwards checked: all channels a block, 64 a block

// Layer I's (stride 1) backward data against the reference; its y and dx (and its weight gradient where that
// runs on wgmma) bit for bit against the wgmma kernels launched directly.
template <class D, std::size_t I>
void check_backward(Tally& t, D& net, int batch, const std::vector<float>& x, const std::vector<float>& y,
                    const std::vector<float>& dy, const std::vector<float>& dx, const Reference& dx_ref) {
  using G = typename D::template layer_kernels<I>::dims;
  constexpr int C = G::C, Out = G::Out, H = G::H, W = G::W, plane = H * W;
  const std::size_t nw = std::size_t(Out) * C * 9, nx = std::size_t(batch) * C * plane, ny = std::size_t(batch) * Out * plane;
  const CudaContext& ctx = net.context();
  const float* wt = ctx.wgmma_weights + (D::plan::weight_offset[I] - D::wgmma_first);
  char what[120];
  std::snprintf(what, sizeof what, "network layer %zu (%d->%d at %dx%d) batch %d backward data", I, C, Out, H, W, batch);
  check(t, dx, dx_ref, Out * 9, what);

  // The same bits as the wgmma kernels launched directly on the network's copies and slots.
  using PF = kernels::ConvPatchFwd<G>;
  using PD = kernels::ConvPatchDgrad<G>;
  DeviceBuffer<float> d_y(ny), d_dx(nx);
  d_y.poison(), d_dx.poison();
  kernels::launch_conv_wgmma<PF, kernels::ConvWgmmaRule<PF>>(ctx.stream, wt, net.params() + D::plan::bias_offset[I],
                                                            net.activation(I), d_y.ptr, batch);
  kernels::launch_conv_wgmma<PD, kernels::ConvWgmmaRule<PD>>(ctx.stream, wt + ctx.wgmma_floats, nullptr,
                                                            net.activation_grad(I + 1), d_dx.ptr, batch);
  CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  std::snprintf(what, sizeof what, "network layer %zu batch %d forward = the wgmma kernel's", I, batch);
  t(same_bits(y, d_y.download(), what));
  std::snprintf(what, sizeof what, "network layer %zu batch %d backward data = the wgmma kernel's", I, batch);
  t(same_bits(dx, d_dx.download(), what));

  // The weight gradient, where the rule runs it on wgmma: against the reference (both operands truncated)
  // and bit for bit against the kernel launched directly on the network's slots.
  if (!kernels::conv_wgmma_wgrad_chosen<G>(batch)) return;
  const std::vector<float> dw = download(net.grads() + D::plan::weight_offset[I], nw);
  std::snprintf(what, sizeof what, "network layer %zu batch %d weight gradient", I, batch);
  check(t, dw, conv3x3_wgrad_reference(x, dy, batch, C, Out, H, W), batch * plane, what, truncated_by_truncated);
  DeviceBuffer<float> d_part(kernels::conv_wgmma_wgrad_workspace_floats<G>(batch)), d_dw(nw), d_db(Out);
  d_dw.poison();
  kernels::launch_conv_wgmma_wgrad_auto<G>(ctx.stream, net.activation(I), net.activation_grad(I + 1), d_part.ptr,
                                           d_dw.ptr, d_db.ptr, batch);
  CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
  std::snprintf(what, sizeof what, "network layer %zu batch %d weight gradient = the wgmma kernel's", I, batch);
  t(same_bits(dw, d_dw.download(), what));
  ++wgrad_checked;
}

// Layer I (a wgmma Conv) in the network after a layer-by-layer training forward and backward of `batch`.
template <class D, std::size_t I>
void check_layer(Tally& t, D& net, int batch) {
  using K = typename D::template layer_kernels<I>;
  using G = typename K::dims;
  constexpr int C = G::C, Out = G::Out, H = G::H, W = G::W, plane = H * W, out_plane = G::OH * G::OW;
  const std::size_t nw = std::size_t(Out) * C * 9;
  const std::vector<float> w = download(net.params() + D::plan::weight_offset[I], nw);
  const std::vector<float> b = download(net.params() + D::plan::bias_offset[I], Out);
  const std::size_t nx = std::size_t(batch) * C * plane, ny = std::size_t(batch) * Out * out_plane;
  const std::vector<float> x = download(net.activation(I), nx), y = download(net.activation(I + 1), ny);
  const std::vector<float> dy = download(net.activation_grad(I + 1), ny), dx = download(net.activation_grad(I), nx);
  const auto [y_ref, dx_ref] = conv3x3_reference(w, b, x, dy, batch, C, Out, H, W, G::S);
  char what[120];
  std::snprintf(what, sizeof what, "network layer %zu (%d->%d at %dx%d) batch %d forward", I, C, Out, H, W, batch);
  check(t, y, y_ref, C * 9, what);
  if constexpr (G::S == 2) {  // the forward alone; the same bits as the rule's tile launched directly
    const CudaContext& ctx = net.context();
    const float* wt = ctx.wgmma_weights + (D::plan::weight_offset[I] - D::wgmma_first);
    using Pb = kernels::ConvWgmmaFwdS2<G>;
    DeviceBuffer<float> d_y(ny);
    d_y.poison();
    kernels::launch_conv_wgmma<Pb, kernels::ConvWgmmaS2Rule<G>>(ctx.stream, wt, net.params() + D::plan::bias_offset[I],
                                                               net.activation(I), d_y.ptr, batch);
    CTNN_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    std::snprintf(what, sizeof what, "network layer %zu batch %d stride-2 forward = the wgmma kernel's (%s)", I,
                  batch, kernels::conv_wgmma_s2_split<G>(batch) ? "64 channels a block" : "all channels a block");
    t(same_bits(y, d_y.download(), what));
    ++s2_checked[kernels::conv_wgmma_s2_split<G>(batch)];
  } else {
    check_backward<D, I>(t, net, batch, x, y, dy, dx, dx_ref);
  }
}

// Passes of D at the given batches, parameters new each time; then check(net, batch, when).
template <class D, class Check>
void passes(Tally& t, const std::vector<int>& batches, Check&& check) {
  D net(7);
  net.set_math(Math::tf32);
  const bool on = net.wgmma();
  std::printf("%s the network runs its wgmma layers on wgmma with TF32 math\n", on ? "ok  " : "FAIL");
  t(on);
  if (!on) return;
  std::uint64_t seed = 100;
  for (const int batch : batches) {
    // Fresh parameters each round: the copies must follow them.
    std::vector<float> p = net.parameters();
    for (float& v : p) v = v == 0.f ? 0.f : v * (0.5f + float(std::fmod(double(seed++) * 0.618, 1.0)));
    net.set_parameters(p);
    CTNN_CUDA_CHECK(cudaMemset(const_cast<float*>(net.context().wgmma_weights), 0xFF,
                               2 * net.context().wgmma_floats * sizeof(float)));  // poison the copies
    for (std::size_t i = 0; i <= D::L; ++i) {
      CTNN_CUDA_CHECK(cudaMemset(net.activation(i), 0xFF, D::plan::act_size[i] * batch * sizeof(float)));
      CTNN_CUDA_CHECK(cudaMemset(net.activation_grad(i), 0xFF, D::plan::act_size[i] * batch * sizeof(float)));
    }
    upload(net.input(), random_vector(D::plan::act_size[0] * batch, seed++));
    net.forward(batch, D::L - 1, Mode::train);
    upload(net.activation_grad(D::L), random_vector(D::plan::act_size[D::L] * batch, seed++));
    net.backward(batch);
    char when[64];
    std::snprintf(when, sizeof when, "batch %d", batch);
    check(net, batch, when);
  }
  net.set_math(Math::fp32);
  std::printf("%s no wgmma with FP32 math\n", !net.wgmma() ? "ok  " : "FAIL");
  t(!net.wgmma());
}

void test_passes(Tally& t) {
  const bool quick = std::getenv("CTNN_QUICK");
  passes<Dev>(t, quick ? std::vector<int>{3} : std::vector<int>{1, 13, max_batch}, [&](Dev& net, int batch, const char* when) {
    check_copies<Dev, 2>(t, net, when);
    check_copies<Dev, 5>(t, net, when);
    check_layer<Dev, 2>(t, net, batch);
    check_layer<Dev, 5>(t, net, batch);
  });
  std::printf("%s %d weight gradients on the wgmma kernel checked\n", wgrad_checked > 0 ? "ok  " : "FAIL",
              wgrad_checked);
  t(wgrad_checked > 0);
  passes<DevS2>(t, quick ? std::vector<int>{3, 120} : std::vector<int>{1, 13, 120, 128}, [&](DevS2& net, int batch, const char* when) {
    check_copies<DevS2, 2>(t, net, when);
    check_copies<DevS2, 4>(t, net, when);
    check_layer<DevS2, 2>(t, net, batch);
    check_layer<DevS2, 4>(t, net, batch);
  });
  const bool both = s2_checked[0] > 0 && s2_checked[1] > 0;
  std::printf("%s stride-2 forwards checked: %d with all channels a block, %d with 64\n", both ? "ok  " : "FAIL",
              s2_checked[0], s2_checked[1]);
  t(both);
}

// The trainer's fused pass (loss_pass_fused) of D (Net, NetS2) with TF32: layer 2's backward data computes the
// stem's weight gradient in its epilogue (conv_stem_wgrad_epilogue.cuh; stem_wgrad_folded), and the stem's
// own weight-gradient kernel does not run. dW and db of layer 0 (poisoned first) bit for bit against that
// kernel launched directly on the network's slots (its own test checks it against the host); the rest of
// the gradients finite.
template <class D>
void test_stem_wgrad_folded(Tally& t, std::vector<int> batches) {
  using G0 = typename D::template layer_kernels<0>::dims;
  using G = typename D::template layer_kernels<2>::dims;
  static_assert(D::template layer_kernels<2>::template has_stem_wgrad_below<G0>);
  D net(9);
  net.set_math(Math::tf32);
  std::uint64_t seed = 500;
  for (const int batch : batches) {
    const std::vector<float> x = random_vector(D::plan::act_size[0] * batch, seed++);
    std::vector<std::int32_t> labels(batch);
    for (int i = 0; i < batch; ++i) labels[i] = int((seed * 7 + i * 3) % 10);
    DeviceBuffer<std::int32_t> d_labels(labels), d_correct(batch);
    DeviceBuffer<float> d_loss(batch);
    kernels::LossRun<SoftmaxCrossEntropy> run;
    run.labels = d_labels.ptr, run.loss = d_loss.ptr, run.correct = d_correct.ptr;
    CTNN_CUDA_CHECK(cudaMemset(net.grads() + D::plan::weight_offset[0], 0xFF,
                               D::plan::weight_count[0] * sizeof(float)));  // the stem's dW and db poisoned
    CTNN_CUDA_CHECK(cudaMemset(net.grads() + D::plan::bias_offset[0], 0xFF,
                               D::plan::bias_count[0] * sizeof(float)));
    upload(net.input(), x);
    net.loss_pass_fused(batch, Mode::train, run, true);
    CTNN_CUDA_CHECK(cudaStreamSynchronize(net.stream()));
    char what[120];
    std::snprintf(what, sizeof what, "batch %d: the fused pass computed the stem's weight gradient in layer 2's", batch);
    std::printf("%s %s\n", net.stem_wgrad_folded() ? "ok  " : "FAIL", what);
    t(net.stem_wgrad_folded());
    const std::vector<float> grads = net.gradients();
    bool finite = true;
    for (std::size_t i = 0; i < D::L; ++i) {
      for (std::size_t k = 0; k < D::plan::weight_count[i]; ++k)
        finite = finite && std::isfinite(grads[D::plan::weight_offset[i] + k]);
      for (std::size_t k = 0; k < D::plan::bias_count[i]; ++k)
        finite = finite && std::isfinite(grads[D::plan::bias_offset[i] + k]);
    }
    std::snprintf(what, sizeof what, "batch %d: every weight and bias gradient finite", batch);
    std::printf("%s %s\n", finite ? "ok  " : "FAIL", what);
    t(finite);

    using S = kernels::StemWgradEpilogue<G0>;
    DeviceBuffer<float> d_part(kernels::conv_stem_wgrad_workspace_floats<G, G0>(batch)), d_dw(S::split), d_db(S::M);
    d_dw.poison(), d_db.poison();
    kernels::launch_conv_dgrad_stem_wgrad<G, G0, relu_fn>(
        net.stream(), net.params() + D::plan::weight_offset[2], net.activation(2), net.activation_grad(3),
        net.activation(0), d_part.ptr, d_dw.ptr, d_db.ptr, batch);
    CTNN_CUDA_CHECK(cudaStreamSynchronize(net.stream()));
    std::snprintf(what, sizeof what, "batch %d: the stem's dW = the kernel's on the network's slots", batch);
    t(same_bits(std::vector<float>(grads.begin() + D::plan::weight_offset[0],
                                   grads.begin() + D::plan::weight_offset[0] + S::split),
                d_dw.download(), what));
    std::snprintf(what, sizeof what, "batch %d: the stem's db = the kernel's on the network's slots", batch);
    t(same_bits(std::vector<float>(grads.begin() + D::plan::bias_offset[0],
                                   grads.begin() + D::plan::bias_offset[0] + S::M),
                d_db.download(), what));
  }
}

void test_training(Tally& t) {
  const Dataset train = patterns(4096, 1), test = patterns(1024, 2);
  TrainOptions o;
  o.epochs = 2;
  o.batch = 32;
  o.learning_rate = 0.02f;
  double accuracy[2] = {};
  bool wgmma = false;
  for (int m = 0; m < 2; ++m) {
    Trainer<Net, ctnn::cuda, max_batch> trainer(3);
    trainer.set_math(m == 0 ? Math::fp32 : Math::tf32);
    if (m == 1) wgmma = trainer.network().wgmma();
    trainer.fit(train, o);
    accuracy[m] = trainer.evaluate(test).accuracy;
  }
  const bool ok = wgmma && accuracy[0] > 0.9 && std::fabs(accuracy[0] - accuracy[1]) <= 0.01;
  std::printf("%s 2 epochs on synthetic patterns: FP32 %.2f%%, TF32 on wgmma %.2f%%\n", ok ? "ok  " : "FAIL",
              100 * accuracy[0], 100 * accuracy[1]);
  t(ok);
}

}  // namespace

int main() {
  require_cuda_device();
  if (!kernels::conv_wgmma_available()) {
    std::printf("this program's device code has no wgmma (needs sm_90a and a Hopper GPU): skipping\n");
    return 77;
  }
  Tally t;
  try {
    test_passes(t);
    test_stem_wgrad_folded<Dev>(t, {1, 13, max_batch});  // (stride 1: conv_patch.cuh's kernel)
    test_stem_wgrad_folded<DevS2>(t, {1, 13, 128});
    if (!std::getenv("CTNN_QUICK")) test_training(t);
  } catch (const std::exception& e) {
    std::printf("FAIL exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
