// Conv kernels (kernels/conv.cuh) against the host reference Conv::bind<In>::forward/backward on fresh
// random inputs, outputs poisoned first: forward through the rule's strategy and through both
// strategies explicitly, backward dx, dw and db, and the determinism of the weight-gradient reduction
// (a second run must give the same bits).
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include <ctnn/kernels/conv.cuh>
#include <ctnn/layers/conv.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

const char* algo_name(ConvAlgo a) { return a == ConvAlgo::direct ? "direct" : "implicit GEMM"; }

template <class L, class In>
void test_conv(Tally& t, const char* name, std::initializer_list<int> batches, std::uint64_t seed) {
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  using G = typename Dev::dims;
  constexpr bool direct_fits = kernels::ConvDirect<G>::fits;
  const int max_batch = std::max(batches);
  std::printf("== %s: %dx%dx%d -> %dx%dx%d, K=%d S=%d P=%d D=%d; forward %s, backward data %s; "
              "workspace %zu floats at batch %d\n",
              name, G::C, G::H, G::W, G::Out, G::OH, G::OW, G::K, G::S, G::P, G::D, algo_name(Dev::forward_algo),
              kernels::conv_dgrad_by_flip<G>() ? "flipped direct" : "gather", Dev::workspace_floats(max_batch),
              max_batch);

  Stream stream;
  DeviceBuffer<float> ws(Dev::workspace_floats(max_batch));
  const CudaContext ctx{stream.s, nullptr, ws.ptr, ws.n};
  const std::vector<float> w = random_vector(B::weight_count, seed), b = random_vector(B::bias_count, seed + 1);
  DeviceBuffer<float> d_w(w), d_b(b), d_dw(B::weight_count), d_db(B::bias_count);
  char what[160];
  auto label = [&](int batch, const char* q) {
    std::snprintf(what, sizeof what, "%s batch %d %s", name, batch, q);
    return what;
  };

  for (const int batch : batches) {
    const std::size_t nx = std::size_t(batch) * B::in_size, ny = std::size_t(batch) * B::out_size;
    const std::vector<float> x = random_vector(nx, seed + 2 + batch), dy = random_vector(ny, seed + 3 + 7 * batch);
    std::vector<float> y_ref(ny), dx_ref(nx), dw_ref(B::weight_count), db_ref(B::bias_count);
    B::forward(w.data(), b.data(), x.data(), y_ref.data(), batch);
    B::backward(w.data(), x.data(), y_ref.data(), dy.data(), dx_ref.data(), dw_ref.data(), db_ref.data(), batch);

    DeviceBuffer<float> d_x(x), d_dy(dy), d_y(ny), d_dx(nx);
    d_y.poison();
    Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
    stream.sync();
    t(close_sum(d_y.download(), y_ref, label(batch, "forward (rule)")));

    std::vector<float> y_direct, y_gemm;
    if constexpr (direct_fits) {
      d_y.poison();
      Dev::template forward_with<ConvAlgo::direct>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
      stream.sync();
      y_direct = d_y.download();
      t(close_sum(y_direct, y_ref, label(batch, "forward direct")));
    }
    d_y.poison();
    Dev::template forward_with<ConvAlgo::implicit_gemm>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
    stream.sync();
    y_gemm = d_y.download();
    t(close_sum(y_gemm, y_ref, label(batch, "forward implicit GEMM")));
    if (direct_fits)
      std::printf("info: direct and implicit GEMM forward are %s\n",
                  y_direct == y_gemm ? "equal" : "different (both within tolerance or reported above)");

    d_dx.poison(), d_dw.poison(), d_db.poison(), ws.poison();
    Dev::backward(ctx, d_w.ptr, d_x.ptr, nullptr, d_dy.ptr, d_dx.ptr, d_dw.ptr, d_db.ptr, batch);
    stream.sync();
    const std::vector<float> dw = d_dw.download(), db = d_db.download();
    t(close_sum(d_dx.download(), dx_ref, label(batch, "backward dx")));
    t(close_sum(dw, dw_ref, label(batch, "backward dw")));
    t(close_sum(db, db_ref, label(batch, "backward db")));

    // Determinism, and dx = null (the first layer): the same bits again, dx untouched.
    d_dx.poison(), d_dw.poison(), d_db.poison(), ws.poison();
    Dev::backward(ctx, d_w.ptr, d_x.ptr, nullptr, d_dy.ptr, nullptr, d_dw.ptr, d_db.ptr, batch);
    stream.sync();
    t(same_bits(d_dw.download(), dw, label(batch, "backward dw, second run")));
    t(same_bits(d_db.download(), db, label(batch, "backward db, second run")));
    const std::vector<float> untouched = d_dx.download();
    t(std::all_of(untouched.begin(), untouched.end(), [](float v) { return v != v; }) ||
      (std::printf("FAIL %s: dx written although null was passed\n", name), false));
  }

  // A workspace one float short is refused before anything is launched.
  if (Dev::workspace_floats(max_batch) > 0) {
    const CudaContext small{stream.s, nullptr, ws.ptr, Dev::workspace_floats(max_batch) - 1};
    bool threw = false;
    try {
      Dev::backward(small, d_w.ptr, nullptr, nullptr, nullptr, nullptr, d_dw.ptr, d_db.ptr, max_batch);
    } catch (const std::invalid_argument& e) {
      threw = true;
      std::printf("ok   %s: short workspace refused: %s\n", name, e.what());
    }
    if (!threw) std::printf("FAIL %s: a short workspace was accepted\n", name);
    t(threw);
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    // LeNet-5's two convolutions, at batch 1, an odd batch and a training batch (conv1 at 256 runs
    // more work units than stage-1 blocks, so blocks loop over several units).
    test_conv<Conv<6, 5, Pad<2>>, Shape<1, 28, 28>>(t, "LeNet-5 conv1", {1, 37, 256}, 11);
    test_conv<Conv<16, 5>, Shape<6, 14, 14>>(t, "LeNet-5 conv2", {1, 37, 256}, 12);
    // Stride and padding on an odd size; the gather's divisibility checks.
    test_conv<Conv<8, 3, Stride<2>, Pad<1>>, Shape<4, 13, 13>>(t, "strided padded", {1, 37, 64}, 13);
    // Dilation on a non-square input with C = 3.
    test_conv<Conv<5, 3, Dilation<2>, Pad<1>>, Shape<3, 11, 17>>(t, "dilated non-square", {1, 37, 64}, 14);
    // C = 3, K = 5, stride 2 (an RGB stem).
    test_conv<Conv<12, 5, Stride<2>, Pad<2>>, Shape<3, 32, 32>>(t, "RGB stem", {1, 37, 64}, 15);
    // Even kernel, stride 3 with dilation 2 on a non-square input.
    test_conv<Conv<7, 4, Stride<3>, Dilation<2>, Pad<3>>, Shape<2, 20, 23>>(t, "even kernel stride 3", {1, 37, 64}, 16);
    // GEMM-shaped (the rule picks implicit GEMM): two BM tiles, nine weight-gradient channel tiles,
    // two backward-data channel passes.
    test_conv<Conv<72, 3, Pad<1>>, Shape<16, 8, 8>>(t, "wide", {1, 37, 64}, 17);
    // C·K·K + 1 > 256: two weight-gradient k tiles, each staging only the channels it reads.
    test_conv<Conv<40, 3, Pad<1>>, Shape<32, 8, 8>>(t, "deep", {1, 37, 64}, 18);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
