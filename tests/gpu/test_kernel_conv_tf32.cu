// The TF32 convolution kernels (kernels/conv_mma.cuh, chosen by CudaContext::math == Math::tf32 for the
// implicit-GEMM family) against a host reference in double on fresh random inputs, outputs poisoned
// first: forward, backward data and backward weights + bias, each tile, on the CIFAR layers,
// strided and dilated layers, channel counts that fill no tile evenly, batch 1 and odd batches. Then a
// training check: a small CIFAR-like network trained with TF32 stays close to the FP32 run.
//
// Each output is checked twice:
//  1. Against the exact sum in double, within the bound TF32 allows: each operand is rounded to TF32
//     (10-bit mantissa) with relative error <= 2^-11, so each product with <= 2·2^-11 + 2^-22, and the
//     FP32 sum of K terms adds at most K·2^-24 of their magnitude:
//       |got − ref| <= (2^-10 + 2^-21 + K·2^-24)·(|b| + Σ_k |a_k·b_k|).
//     And the result must sit much nearer the sum of the TF32-rounded operands than the exact sum:
//     proof that the operands went through TF32 rounding, not through an FP32 kernel.
//  2. Against the sum in double of the operands rounded as the kernel rounds them (cvt.rna: nearest,
//     ties away from zero), with the FP32 tolerance of the other kernel tests (close_sum): only the
//     FP32 accumulation differs there. Bound 1 grows with K (for the weight gradient, K is batch·OH·OW)
//     and alone would not see one missing term; this one does, and the test shows it: the same check
//     against a reference with each output's largest term left out must fail.
// db (row sums of dy, no TF32 rounding) is checked against the double sum with close_sum.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include <ctnn/ctnn.hpp>
#include <ctnn/kernels/conv.cuh>
#include <ctnn/layers/conv.hpp>
#include <ctnn/train/cuda_trainer.hpp>

#include "kernel_test.hpp"
#include "tf32_check.hpp"
#include "synthetic_images.hpp"

using namespace ctnn;
using namespace ctnn_test;

namespace {

// CTNN_QUICK (set under compute-sanitizer, where every launch is slow): batches 1 and 3 only.
std::vector<int> batch_list(std::initializer_list<int> batches) {
  if (std::getenv("CTNN_QUICK")) return {1, 3};
  return batches;
}

// The three directions of a convolution in one pass over (n, o, oy, ox, c, ky, kx).
template <class G>
void host_reference(const std::vector<float>& w, const std::vector<float>& b, const std::vector<float>& x,
                    const std::vector<float>& dy, int batch, RoundedReference& y, RoundedReference& dx, RoundedReference& dw,
                    std::vector<double>& db) {
  for (int o = 0; o < G::Out; ++o) db[o] = 0;
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < G::Out; ++o)
      for (int oy = 0; oy < G::OH; ++oy)
        for (int ox = 0; ox < G::OW; ++ox) {
          const std::size_t yi = ((std::size_t(n) * G::Out + o) * G::OH + oy) * G::OW + ox;
          y.exact[yi] = y.rounded[yi] = b[o];
          y.mag[yi] = std::fabs(double(b[o]));
          db[o] += dy[yi];
          for (int c = 0; c < G::C; ++c)
            for (int ky = 0; ky < G::K; ++ky)
              for (int kx = 0; kx < G::K; ++kx) {
                const int iy = oy * G::S - G::P + ky * G::D, ix = ox * G::S - G::P + kx * G::D;
                if (iy < 0 || iy >= G::H || ix < 0 || ix >= G::W) continue;
                const std::size_t wi = ((std::size_t(o) * G::C + c) * G::K + ky) * G::K + kx;
                const std::size_t xi = ((std::size_t(n) * G::C + c) * G::H + iy) * G::W + ix;
                y.add(yi, w[wi], x[xi]);
                dx.add(xi, w[wi], dy[yi]);
                dw.add(wi, dy[yi], x[xi]);
              }
        }
}

// TF32 weight-gradient tiles checked beside the rule's (CG × KG warps, stages: conv_patch_wgrad_mma.cuh).
struct WgradMmaTile {
  int cg, kg, stages;
};
constexpr WgradMmaTile wgrad_mma_tiles[] = {{1, 4, 2}, {2, 4, 2}, {4, 4, 3}};

template <class L, class In>
void test_conv_tf32(Tally& t, const char* name, std::initializer_list<int> batch_init, std::uint64_t seed) {
  if (!case_selected(name)) return;
  const std::vector<int> batches = batch_list(batch_init);
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  using G = typename Dev::dims;
  using Fwd = kernels::ConvFwdGemm<G>;
  constexpr auto gemm = ConvAlgo::implicit_gemm;
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  std::printf("== %s: %dx%dx%d -> %dx%dx%d, K=%d S=%d P=%d D=%d, TF32 (rule: forward %s)\n", name, G::C, G::H, G::W,
              G::Out, G::OH, G::OW, G::K, G::S, G::P, G::D,
              Dev::forward_algo == gemm ? "implicit GEMM" : "direct; GEMM forced here");

  Stream stream;
  std::size_t ws_floats = Dev::template workspace_floats_for<gemm>(max_batch);
  if constexpr (kernels::conv_patch_wgrad_mma_fits<G>())  // the weight-gradient tiles beside the rule's
    kernels::static_for<std::size(wgrad_mma_tiles)>([&](auto i) {
      constexpr WgradMmaTile v = wgrad_mma_tiles[i];
      ws_floats = std::max(ws_floats, kernels::ConvPatchWgradMma<G, 64, v.cg, v.kg, v.stages>::Splits::workspace_floats(max_batch));
    });
  DeviceBuffer<float> ws(ws_floats);
  CudaContext ctx{stream.s, nullptr, ws.ptr, ws.n};
  ctx.math = Math::tf32;
  const std::vector<float> w = random_vector(B::weight_count, seed), b = random_vector(B::bias_count, seed + 1);
  DeviceBuffer<float> d_w(w), d_b(b), d_dw(B::weight_count), d_db(B::bias_count);
  Labeler label(name);

  for (const int batch : batches) {
    const std::size_t nx = std::size_t(batch) * B::in_size, ny = std::size_t(batch) * B::out_size;
    const std::vector<float> x = random_vector(nx, seed + 2 + batch), dy = random_vector(ny, seed + 3 + 7 * batch);
    RoundedReference y_ref(ny), dx_ref(nx), dw_ref(B::weight_count);
    std::vector<double> db_ref(B::bias_count);
    host_reference<G>(w, b, x, dy, batch, y_ref, dx_ref, dw_ref, db_ref);
    DeviceBuffer<float> d_x(x), d_dy(dy), d_y(ny), d_dx(nx);
    auto run = [&](auto&& launch, DeviceBuffer<float>& out) {
      out.poison();
      launch();
      stream.sync();
      return out.download();
    };

    // Forward through the layer (the rule's tile) and through each tile; the tiles sum in different
    // orders (their warps split the columns differently), so they are not compared bitwise.
    const auto y = run([&] { Dev::template forward_with<gemm>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }, d_y);
    check_tf32(t, y, y_ref, label(batch, "forward"));
    if constexpr (Dev::forward_algo == gemm) {  // ReLU in the epilogue of the rule's kernel
      const auto y_act = run([&] { Dev::template forward_act<relu_fn>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }, d_y);
      std::vector<float> want(y);
      for (float& v : want) v = relu_fn::apply(v);
      t(same_bits(y_act, want, label(batch, "forward with ReLU in the epilogue = ReLU(forward)")));
    }
    check_tf32(t, run([&] { kernels::launch_conv_mma<Fwd, kernels::ConvMmaWide<Fwd::M>>(stream.s, d_w.ptr, d_b.ptr,
                                                                                         d_x.ptr, d_y.ptr, batch); },
                      d_y),
               y_ref, label(batch, "forward, wide tile"));
    check_tf32(t, run([&] { kernels::launch_conv_mma<Fwd, kernels::ConvMmaNarrow<Fwd::M>>(stream.s, d_w.ptr, d_b.ptr,
                                                                                           d_x.ptr, d_y.ptr, batch); },
                      d_y),
               y_ref, label(batch, "forward, narrow tile"));
    check_tf32(t, run([&] { kernels::launch_conv_mma<Fwd, kernels::ConvMmaSlim<Fwd::M>>(stream.s, d_w.ptr, d_b.ptr,
                                                                                         d_x.ptr, d_y.ptr, batch); },
                      d_y),
               y_ref, label(batch, "forward, slim tile"));
    if constexpr (kernels::conv_patch_fwd_s2_mma_fits<G>()) {  // stride 2: the rule takes a patch tile
      using kernels::ConvPatchFwdS2MmaWide, kernels::ConvPatchFwdS2MmaNarrow, kernels::launch_conv_patch_fwd_s2_mma;
      const auto wide = run([&] { launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2MmaWide<G>>(stream.s, d_w.ptr, d_b.ptr,
                                                                                             d_x.ptr, d_y.ptr, batch); }, d_y);
      const auto narrow = run([&] { launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2MmaNarrow<G>>(stream.s, d_w.ptr, d_b.ptr,
                                                                                                 d_x.ptr, d_y.ptr, batch); }, d_y);
      check_tf32(t, wide, y_ref, label(batch, "forward, stride-2 patch kernel, wide tile"));
      check_tf32(t, narrow, y_ref, label(batch, "forward, stride-2 patch kernel, narrow tile"));
      t(same_bits(y, kernels::conv_patch_fwd_s2_mma_wide<G>(batch) ? wide : narrow,
                  label(batch, "forward = the stride-2 patch tile the rule picks")));
      check_tf32(t, run([&] { kernels::launch_conv_mma_auto<Fwd>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }, d_y),
                 y_ref, label(batch, "forward, gathering kernel (auto tile)"));
    }
    const auto y2 = run([&] { Dev::template forward_with<gemm>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }, d_y);
    t(same_bits(y2, y, label(batch, "forward, second run")));

    // Backward data, through the layer and through each tile.
    const auto dx = run([&] { Dev::template backward_data_with<gemm>(ctx, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); }, d_dx);
    check_tf32(t, dx, dx_ref, label(batch, "backward data"));
    if constexpr (Dev::dgrad_algo == gemm) {  // ReLU's backward in the epilogue where the rule's kernel has one
      bool fused = false;
      const auto dx_act =
          run([&] { fused = Dev::template backward_data_act<relu_fn>(ctx, d_w.ptr, d_x.ptr, d_dy.ptr, d_dx.ptr, batch); }, d_dx);
      if (fused) {
        std::vector<float> want(dx);
        for (std::size_t k = 0; k < want.size(); ++k) want[k] *= relu_fn::derivative(x[k]);
        t(same_bits(dx_act, want, label(batch, "backward data with ReLU's backward in the epilogue = dx · ReLU'(x)")));
      }
      const bool expected = (kernels::conv_patch_fits<G>() && kernels::conv_patch_chosen<G>(batch)) ||
                            kernels::conv_patch_dgrad_s2_mma_fits<G>();
      if (!t(fused == expected)) std::printf("FAIL %s: backward_data_act ran the epilogue: %d\n", label(batch, ""), fused);
    }
    if constexpr (kernels::conv_patch_dgrad_s2_mma_fits<G>())  // the rule took the stride-2 patch: the gathering kernel too
      check_tf32(t, run([&] { kernels::launch_conv_dgrad_mma_auto<G>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); }, d_dx),
                 dx_ref, label(batch, "backward data, gathering kernel (auto tile)"));
    check_tf32(t, run([&] { kernels::launch_conv_dgrad_mma<G, kernels::ConvMmaWide<G::C>>(stream.s, d_w.ptr, d_dy.ptr,
                                                                                          d_dx.ptr, batch); },
                      d_dx),
               dx_ref, label(batch, "backward data, wide tile"));
    check_tf32(t, run([&] { kernels::launch_conv_dgrad_mma<G, kernels::ConvMmaNarrow<G::C>>(stream.s, d_w.ptr,
                                                                                            d_dy.ptr, d_dx.ptr, batch); },
                      d_dx),
               dx_ref, label(batch, "backward data, narrow tile"));
    check_tf32(t, run([&] { kernels::launch_conv_dgrad_mma<G, kernels::ConvMmaSlim<G::C>>(stream.s, d_w.ptr, d_dy.ptr,
                                                                                          d_dx.ptr, batch); },
                      d_dx),
               dx_ref, label(batch, "backward data, slim tile"));

    // Stride-1 "same" layers: the staged-patch kernels (conv_patch.cuh), each tile forced (64 and 32
    // rows, fewer rows per block, 2 stages, 8 warps, other warp layout), both directions; two runs,
    // same bits.
    if constexpr (kernels::conv_patch_fits<G>()) {
      using PF = kernels::ConvPatchFwd<G>;
      using PD = kernels::ConvPatchDgrad<G>;
      auto patch = [&]<class Pb, class T>(const char* tile) {
        constexpr bool fwd = !Pb::dgrad;
        if constexpr (!T::within_budget) return;  // a tile the rule never takes (over its shared memory)
        char q[120];
        std::snprintf(q, sizeof q, "%s, patch kernel %s (BM %d, %d rows of %d, %d stages)", fwd ? "forward" : "backward data",
                      tile, T::BM, T::TH, G::W, T::stages);
        auto go = [&] {
          if constexpr (fwd) kernels::launch_conv_patch<Pb, T>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
          else kernels::launch_conv_patch<Pb, T>(stream.s, d_w.ptr, nullptr, d_dy.ptr, d_dx.ptr, batch);
        };
        const auto r1 = run(go, fwd ? d_y : d_dx);
        check_tf32(t, r1, fwd ? y_ref : dx_ref, label(batch, q));
        std::snprintf(q + std::strlen(q), sizeof q - std::strlen(q), ", second run");
        t(same_bits(run(go, fwd ? d_y : d_dx), r1, label(batch, q)));
      };
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 64>>("64");
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 32>>("32");
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 32, 4>>("32, 4 rows");
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 32, 0, 2>>("32, 2 stages");
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 64, 2>>("64, 2 rows");
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 64, 0, 3, 0, true, 8>>("64, 8 warps");
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 32, 0, 3, 0, true, 8>>("32, 8 warps");
      patch.template operator()<PF, kernels::ConvPatchTile<PF, 64, 0, 3, 1, false>>("64, 1 x 4 warps, weights past L1");
      patch.template operator()<PF, kernels::ConvPatchShort<PF>>("short (the rule's)");
      patch.template operator()<PD, kernels::ConvPatchTall<PD>>("tall (the rule's)");
      patch.template operator()<PD, kernels::ConvPatchShort<PD>>("short (the rule's)");
      patch.template operator()<PD, kernels::ConvPatchTile<PD, 64>>("64");
      patch.template operator()<PD, kernels::ConvPatchTile<PD, 32>>("32");
      patch.template operator()<PD, kernels::ConvPatchTile<PD, 32, 4>>("32, 4 rows");
      patch.template operator()<PD, kernels::ConvPatchTile<PD, 64, 2>>("64, 2 rows");
      patch.template operator()<PD, kernels::ConvPatchTile<PD, 64, 0, 3, 0, true, 8>>("64, 8 warps");
    }

    // Split-K over clusters of 2, 4 and 8 blocks (narrow and slim tiles, both directions); two runs,
    // same bits. And the layer's choice equals its plan (tile and split) forced.
    auto fwd_mma = [&](kernels::ConvMmaTileChoice tile, int splits) {
      using kernels::ConvMmaTileChoice;
      if (tile == ConvMmaTileChoice::wide)
        kernels::launch_conv_mma<Fwd, kernels::ConvMmaWide<Fwd::M>>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch, splits);
      else if (tile == ConvMmaTileChoice::narrow)
        kernels::launch_conv_mma<Fwd, kernels::ConvMmaNarrow<Fwd::M>>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch, splits);
      else
        kernels::launch_conv_mma<Fwd, kernels::ConvMmaSlim<Fwd::M>>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch, splits);
    };
    auto dgrad_mma = [&](kernels::ConvMmaTileChoice tile, int splits) {
      using kernels::ConvMmaTileChoice;
      if (tile == ConvMmaTileChoice::wide)
        kernels::launch_conv_dgrad_mma<G, kernels::ConvMmaWide<G::C>>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch, splits);
      else if (tile == ConvMmaTileChoice::narrow)
        kernels::launch_conv_dgrad_mma<G, kernels::ConvMmaNarrow<G::C>>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch, splits);
      else
        kernels::launch_conv_dgrad_mma<G, kernels::ConvMmaSlim<G::C>>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch, splits);
    };
    const kernels::ConvMmaPlan fp = kernels::conv_mma_fwd_plan<Fwd>(batch), dp = kernels::conv_mma_dgrad_plan<G>(batch);
    if constexpr (kernels::conv_patch_fits<G>()) {
      if (kernels::conv_patch_chosen<G>(batch)) {  // the rule takes the patch kernel
        using PF = kernels::ConvPatchFwd<G>;
        using PD = kernels::ConvPatchDgrad<G>;
        const auto pf = kernels::conv_patch_plan<PF>(batch), pd = kernels::conv_patch_plan<PD>(batch);
        t(same_bits(run([&] { kernels::launch_conv_patch_tile<PF>(pf, stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                        d_y),
                    y, label(batch, "forward = its plan (patch kernel)")));
        t(same_bits(run([&] { kernels::launch_conv_patch_tile<PD>(pd, stream.s, d_w.ptr, nullptr, d_dy.ptr, d_dx.ptr, batch); },
                        d_dx),
                    dx, label(batch, "backward data = its plan (patch kernel)")));
      }
    }
    if (!kernels::conv_patch_chosen<G>(batch)) {
      if (!kernels::conv_patch_fwd_s2_mma_fits<G>())  // (stride 2: the rule takes the patch kernel, checked above)
        t(same_bits(run([&] { fwd_mma(fp.tile, fp.splits); }, d_y), y, label(batch, "forward = its plan")));
      if constexpr (kernels::conv_patch_dgrad_s2_mma_fits<G>()) {  // stride 2: the rule takes the patch kernel
        t(same_bits(run([&] { kernels::launch_conv_patch_dgrad_s2_mma<G>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); }, d_dx),
                    dx, label(batch, "backward data = the stride-2 patch kernel")));
        check_tf32(t, run([&] {
          kernels::launch_conv_patch_dgrad_s2_mma<G, identity_fn, kernels::ConvPatchS2Mma<G, 1>>(stream.s, d_w.ptr, d_dy.ptr,
                                                                                                 d_dx.ptr, batch);
        }, d_dx), dx_ref, label(batch, "backward data, stride-2 patch kernel, 1 x 4 warps"));
      }
      else
        t(same_bits(run([&] { dgrad_mma(dp.tile, dp.splits); }, d_dx), dx, label(batch, "backward data = its plan")));
    }
    if (kernels::clusters_supported())
      for (const int splits : {2, 4, 8})
        for (const auto tile : {kernels::ConvMmaTileChoice::narrow, kernels::ConvMmaTileChoice::slim}) {
          const char* tn = tile == kernels::ConvMmaTileChoice::narrow ? "narrow" : "slim";
          char q[80];
          std::snprintf(q, sizeof q, "forward, %s tile, split-K %d", tn, splits);
          const auto y1 = run([&] { fwd_mma(tile, splits); }, d_y);
          check_tf32(t, y1, y_ref, label(batch, q));
          std::snprintf(q, sizeof q, "forward, %s tile, split-K %d, second run", tn, splits);
          t(same_bits(run([&] { fwd_mma(tile, splits); }, d_y), y1, label(batch, q)));
          std::snprintf(q, sizeof q, "backward data, %s tile, split-K %d", tn, splits);
          const auto dx1 = run([&] { dgrad_mma(tile, splits); }, d_dx);
          check_tf32(t, dx1, dx_ref, label(batch, q));
          std::snprintf(q, sizeof q, "backward data, %s tile, split-K %d, second run", tn, splits);
          t(same_bits(run([&] { dgrad_mma(tile, splits); }, d_dx), dx1, label(batch, q)));
        }

    // Backward weights and bias (the workspace poisoned too: stage 2 reads only what stage 1 wrote).
    d_dw.poison(), d_db.poison(), ws.poison();
    Dev::template backward_weights_with<gemm>(ctx, d_x.ptr, d_dy.ptr, d_dw.ptr, d_db.ptr, batch);
    stream.sync();
    const std::vector<float> dw = d_dw.download(), db = d_db.download();
    // Where C <= 4, up to a batch size, the rule takes the FP32 patch kernel (conv_patch_wgrad_mma.cuh):
    // then its bits and FP32's accuracy, else TF32's.
    bool fp32_rule = false;
    if constexpr (G::C <= 4 && kernels::conv_patch_wgrad_fits<G>())
      if (batch <= kernels::tf32_wgrad_fp32_stem_max_batch) {
        fp32_rule = true;
        d_dw.poison(), d_db.poison(), ws.poison();
        kernels::launch_conv_patch_wgrad<G>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr, batch);
        stream.sync();
        t(same_bits(d_dw.download(), dw, label(batch, "backward weights (rule: the FP32 patch kernel for C <= 4) = it")));
        t(close_sum(dw, to_float(dw_ref.exact), label(batch, "backward weights (FP32 patch kernel)")));
      }
    if (!fp32_rule) check_tf32(t, dw, dw_ref, label(batch, "backward weights"));
    t(close_sum(db, to_float(db_ref), label(batch, "backward bias")));
    d_dw.poison(), d_db.poison(), ws.poison();
    Dev::template backward_weights_with<gemm>(ctx, d_x.ptr, d_dy.ptr, d_dw.ptr, d_db.ptr, batch);
    stream.sync();
    t(same_bits(d_dw.download(), dw, label(batch, "backward weights, second run")));
    t(same_bits(d_db.download(), db, label(batch, "backward bias, second run")));
    if constexpr (kernels::conv_patch_wgrad_mma_fits<G>()) {  // the rule took the staged patch: the gathering kernel too
      d_dw.poison(), d_db.poison(), ws.poison();
      kernels::launch_conv_wgrad_mma<G>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr, batch);
      stream.sync();
      check_tf32(t, d_dw.download(), dw_ref, label(batch, "backward weights, gathering kernel"));
      t(close_sum(d_db.download(), to_float(db_ref), label(batch, "backward bias, gathering kernel")));
      kernels::static_for<std::size(wgrad_mma_tiles)>([&](auto i) {
        constexpr WgradMmaTile v = wgrad_mma_tiles[i];
        using T = kernels::ConvPatchWgradMma<G, 64, v.cg, v.kg, v.stages>;
        if constexpr (T::fits) {
          char q[120];
          std::snprintf(q, sizeof q, "backward weights, patch tile %d x %d warps, %d stages", v.cg, v.kg, v.stages);
          d_dw.poison(), d_db.poison(), ws.poison();
          kernels::launch_conv_patch_wgrad_mma<G, T>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr, batch);
          stream.sync();
          const std::vector<float> dw1 = d_dw.download();
          check_tf32(t, dw1, dw_ref, label(batch, q));
          std::snprintf(q, sizeof q, "backward bias, patch tile %d x %d warps, %d stages", v.cg, v.kg, v.stages);
          t(close_sum(d_db.download(), to_float(db_ref), label(batch, q)));
          d_dw.poison();
          kernels::launch_conv_patch_wgrad_mma<G, T>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr, batch);
          stream.sync();
          std::snprintf(q, sizeof q, "backward weights, patch tile %d x %d warps, second run", v.cg, v.kg);
          t(same_bits(d_dw.download(), dw1, label(batch, q)));
        }
      });
    }
  }
}

// --- RGB stems: the TF32 forward on the tensor cores (kernels/conv_stem_mma.cuh) -------------------------
// The layer's own rule in TF32 (not a forced family): the stem kernel where it fits, checked against
// TF32's bound and proven to round its operands; ReLU in its store = ReLU(forward) bit for bit; two runs
// the same bits; in FP32 the rule keeps the direct kernel (FP32's accuracy); a misaligned output falls
// back to the direct kernel (nothing launched by the stem's launcher).
template <class L, class In>
void test_stem_tf32(Tally& t, const char* name, std::initializer_list<int> batch_init, std::uint64_t seed) {
  if (!case_selected(name)) return;
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  using G = typename Dev::dims;
  static_assert(kernels::ConvStemMma<G>::fits && Dev::forward_algo == ConvAlgo::direct, "a stem case");
  std::printf("== %s: %dx%dx%d -> %dx%dx%d, K=%d, TF32 stem kernel (%d rows a block)\n", name, G::C, G::H, G::W,
              G::Out, G::OH, G::OW, G::K, kernels::ConvStemMma<G>::TH);
  const std::vector<int> batches = batch_list(batch_init);
  Stream stream;
  CudaContext ctx{stream.s, nullptr, nullptr, 0};
  ctx.math = Math::tf32;
  CudaContext fp32_ctx{stream.s, nullptr, nullptr, 0};
  const std::vector<float> w = random_vector(B::weight_count, seed), b = random_vector(B::bias_count, seed + 1);
  DeviceBuffer<float> d_w(w), d_b(b);
  Labeler label(name);
  for (const int batch : batches) {
    const std::size_t nx = std::size_t(batch) * B::in_size, ny = std::size_t(batch) * B::out_size;
    const std::vector<float> x = random_vector(nx, seed + 2 + batch), dy = random_vector(ny, seed + 3 + batch);
    RoundedReference y_ref(ny), dx_ref(nx), dw_ref(B::weight_count);
    std::vector<double> db_ref(B::bias_count);
    host_reference<G>(w, b, x, dy, batch, y_ref, dx_ref, dw_ref, db_ref);
    DeviceBuffer<float> d_x(x), d_y(ny);
    auto run = [&](auto&& launch) {
      d_y.poison();
      launch();
      stream.sync();
      return d_y.download();
    };
    const auto y = run([&] { Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); });
    check_tf32(t, y, y_ref, label(batch, "forward (the rule: stem kernel)"));
    t(same_bits(run([&] { Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }), y,
                label(batch, "forward, second run")));
    // Fewer blocks than units (each block loops over several, its copies 1 or 2 units ahead): same bits
    // (a warp computes each output whole, in the same order, whatever the tile).
    using kernels::launch_conv_stem_mma, kernels::ConvStemMmaTile;
    using Few2 = ConvStemMmaTile<G, 3, 2>;  // 3 blocks, 2 stages
    using Few3 = ConvStemMmaTile<G, 2, 3>;  // 2 blocks, 3 stages
    t(same_bits(run([&] { launch_conv_stem_mma<G, identity_fn, Few2>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }),
                y, label(batch, "forward in 3 blocks, 2 stages = the rule's")));
    t(same_bits(run([&] { launch_conv_stem_mma<G, identity_fn, Few3>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }),
                y, label(batch, "forward in 2 blocks, 3 stages = the rule's")));
    const auto y_act = run([&] { Dev::template forward_act<relu_fn>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); });
    std::vector<float> want(y);
    for (float& v : want) v = relu_fn::apply(v);
    t(same_bits(y_act, want, label(batch, "forward with ReLU in the store = ReLU(forward)")));
    // FP32: the direct kernel, FP32's accuracy.
    t(close_sum(run([&] { Dev::forward(fp32_ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }), to_float(y_ref.exact),
                label(batch, "forward in FP32 (direct kernel)")));
    // A misaligned output: the launcher declines, the layer runs the direct kernel (FP32 results).
    if (batch == 1) {
      DeviceBuffer<float> d_yu(ny + 1);
      d_yu.poison();
      const bool launched = kernels::launch_conv_stem_mma<G>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_yu.ptr + 1, batch);
      if (!t(!launched)) std::printf("FAIL %s: the stem kernel took a misaligned output\n", label(batch, ""));
      Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_yu.ptr + 1, batch);
      stream.sync();
      const std::vector<float> all = d_yu.download(), got(all.begin() + 1, all.end());
      t(close_sum(got, to_float(y_ref.exact),
                  label(batch, "forward in TF32 to a misaligned output (direct kernel, FP32 accuracy)")));
    }
  }
}

// --- Training: a small CIFAR-like network, TF32 against FP32 -----------------------------------------
// Three of its four convolutions run the implicit GEMM (16 -> 32, 32 -> 32 stride 2, 32 -> 48); the
// RGB stem (3 -> 16) runs the TF32 stem kernel forward and FP32 kernels backward.
using SmallCifar = Network<Seq<Conv<16, 3, Pad<1>>, ReLU, Conv<32, 3, Pad<1>>, ReLU, Conv<32, 3, Stride<2>, Pad<1>>,
                               ReLU, Conv<48, 3, Pad<1>>, ReLU, Pool<2>, Dense<10>, Softmax>,
                           Input<3, 16, 16>>;

// An evaluation pass (forward_fused) of SmallCifar, whose first group is its RGB stem and ReLU: with TF32
// the group runs the stem kernel with ReLU in its store (bit for bit that kernel launched on the same
// input and weights), not the fused FP32 direct group, which FP32 keeps (FP32's accuracy).
void test_stem_in_network(Tally& t) {
  if (!case_selected("stem in a network")) return;
  using Dev = CudaNetwork<SmallCifar, 16>;
  using Stem = cuda_layer<Conv<16, 3, Pad<1>>, Shape<3, 16, 16>>;
  static_assert(Stem::has_stem_mma && Dev::plan::act_size[2] == 16 * 16 * 16);
  constexpr int batch = 5;
  Dev net(3);
  const std::vector<float> x = random_vector(Dev::plan::act_size[0] * batch, 91);
  const std::vector<float> p = net.parameters();
  const auto w0 = p.begin() + Dev::plan::weight_offset[0], b0 = p.begin() + Dev::plan::bias_offset[0];
  const std::vector<float> w(w0, w0 + 16 * 27), b(b0, b0 + 16);
  DeviceBuffer<float> d_w(w), d_b(b), d_x(x), d_y(Dev::plan::act_size[2] * batch);
  Stream stream;
  CudaContext ctx{stream.s, nullptr, nullptr, 0};
  ctx.math = Math::tf32;
  d_y.poison();
  Stem::forward_act<relu_fn>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
  stream.sync();
  const std::vector<float> want = d_y.download();
  std::vector<double> exact(want.size());  // ReLU(the stem) in double
  for (int n = 0; n < batch; ++n)
    for (int o = 0; o < 16; ++o)
      for (int y = 0; y < 16; ++y)
        for (int xx = 0; xx < 16; ++xx) {
          double acc = b[o];
          for (int c = 0; c < 3; ++c)
            for (int ky = 0; ky < 3; ++ky)
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = y + ky - 1, ix = xx + kx - 1;
                if (iy >= 0 && iy < 16 && ix >= 0 && ix < 16)
                  acc += double(w[(o * 3 + c) * 9 + ky * 3 + kx]) * x[((n * 3 + c) * 16 + iy) * 16 + ix];
              }
          exact[((n * 16 + o) * 16 + y) * 16 + xx] = acc > 0 ? acc : 0;
        }
  for (const Math math : {Math::tf32, Math::fp32}) {
    net.set_math(math);
    CTNN_CUDA_CHECK(cudaMemcpy(net.input(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    CTNN_CUDA_CHECK(cudaMemset(net.activation(2), 0xFF, want.size() * sizeof(float)));
    net.forward_fused(batch);
    CTNN_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> got(want.size());
    CTNN_CUDA_CHECK(cudaMemcpy(got.data(), net.activation(2), got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    if (math == Math::tf32) t(same_bits(got, want, "stem in a network, TF32 evaluation: the stem kernel's bits"));
    else t(close_sum(got, to_float(exact), "stem in a network, FP32 evaluation: the fused FP32 group"));
  }
}

double norm_of_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s);
}

void test_training_tf32(Tally& t) {
  if (!case_selected("training")) return;
  constexpr int batch = 64;
  // One step from the same parameters: the TF32 update differs from the FP32 one by TF32's rounding of
  // the gradients, a small part of the update itself (under 1% measured on an H100: the rounding error
  // of a gradient element is about 2^-11 of the magnitude of its terms, which cancel in part; 3% allowed).
  {
    const Dataset one = patterns(batch, 7);
    TrainOptions o;
    o.batch = batch, o.learning_rate = 0.05f, o.stop_when_stuck = false, o.mean = 0.4f, o.std = 0.3f;
    Trainer<SmallCifar, ctnn::cuda, batch> fp32(5), tf32(5);
    tf32.set_math(Math::tf32);
    const std::vector<float> start = fp32.parameters();
    fp32.fit(one, o);
    tf32.fit(one, o);
    const std::vector<float> p32 = fp32.parameters(), p19 = tf32.parameters();
    const double update = norm_of_difference(p32, start), apart = norm_of_difference(p19, p32);
    const bool ok = update > 0 && apart <= 0.03 * update;
    std::printf("%s SmallCifar, one step: |update| %.4g, |TF32 - FP32| %.3g (%.2f%% of the update; at most 3%%)\n",
                ok ? "ok  " : "FAIL", update, apart, 100 * apart / update);
    t(ok);
  }
  // A few epochs: both learn, and end close.
  if (!std::getenv("CTNN_QUICK")) {
    const Dataset train = patterns(4096, 1), test = patterns(1024, 2);
    TrainOptions o;
    o.epochs = 3, o.batch = batch, o.learning_rate = 0.02f, o.mean = 0.4f, o.std = 0.3f;
    double accuracy[2] = {}, loss[2] = {};
    for (int m = 0; m < 2; ++m) {
      Trainer<SmallCifar, ctnn::cuda, batch> trainer(3);
      trainer.set_math(m == 0 ? Math::fp32 : Math::tf32);
      o.on_epoch = [&](const EpochStats& s) { loss[m] = s.loss; };
      trainer.fit(train, o);
      accuracy[m] = trainer.evaluate(test).accuracy;
    }
    const bool ok = accuracy[0] > 0.9 && std::fabs(accuracy[0] - accuracy[1]) <= 0.02 &&
                    std::fabs(loss[0] - loss[1]) <= 0.1 * loss[0] + 0.01;
    std::printf("%s SmallCifar, 3 epochs on synthetic patterns: FP32 %.2f%% (loss %.4f), TF32 %.2f%% (loss %.4f)\n",
                ok ? "ok  " : "FAIL", 100 * accuracy[0], loss[0], 100 * accuracy[1], loss[1]);
    t(ok);
  }
}

}  // namespace

int main() {
  require_cuda_device();
  Tally t;
  try {
    // The CIFAR networks' GEMM layers (benchmarks/cifar_nets.hpp): 3×3 pad 1, two strided.
    test_conv_tf32<Conv<32, 3, Pad<1>>, Shape<32, 32, 32>>(t, "CIFAR 32->32 at 32x32", {1, 13}, 31);
    test_conv_tf32<Conv<64, 3, Stride<2>, Pad<1>>, Shape<32, 32, 32>>(t, "CIFAR 32->64 stride 2", {1, 13}, 32);
    test_conv_tf32<Conv<64, 3, Pad<1>>, Shape<32, 16, 16>>(t, "CIFAR 32->64 at 16x16", {1, 17}, 33);
    test_conv_tf32<Conv<64, 3, Pad<1>>, Shape<64, 16, 16>>(t, "CIFAR 64->64 at 16x16", {1, 13}, 34);
    test_conv_tf32<Conv<128, 3, Stride<2>, Pad<1>>, Shape<64, 16, 16>>(t, "CIFAR 64->128 stride 2", {1, 13}, 35);
    test_conv_tf32<Conv<64, 3, Pad<1>>, Shape<64, 8, 8>>(t, "CIFAR 64->64 at 8x8", {1, 37, 64}, 36);
    // Channels that fill no tile evenly; odd sizes with stride 2 (parity classes of different sizes).
    test_conv_tf32<Conv<40, 3, Stride<2>, Pad<1>>, Shape<20, 15, 15>>(t, "odd 20->40 stride 2", {1, 37}, 37);
    // Stride 3, dilation 2, a 4-tap kernel: some parity classes have no taps; C·K·K = 272.
    test_conv_tf32<Conv<24, 4, Stride<3>, Dilation<2>, Pad<3>>, Shape<17, 11, 13>>(t, "stride 3 dilation 2", {1, 37}, 38);
    // Two BM tiles (72 rows), C·K·K = 144; and 5×5 on 18 channels (C·K·K = 450, not a multiple of 4:
    // the forward's weights gathered one float at a time).
    test_conv_tf32<Conv<72, 3, Pad<1>>, Shape<16, 8, 8>>(t, "wide 16->72", {1, 37}, 39);
    test_conv_tf32<Conv<20, 5, Pad<2>>, Shape<18, 9, 9>>(t, "5x5 18->20", {1, 37}, 40);
    // The patch kernel on 5×5 (halo 2), 24 columns (3 mma tiles per row), 10 rows (the last row tile
    // partly outside the image) and 24 and 16 rows of M (partial BM tiles).
    test_conv_tf32<Conv<24, 5, Pad<2>>, Shape<16, 10, 24>>(t, "patch 5x5 16->24 at 10x24", {1, 13}, 42);
    // An RGB stem forced onto the GEMM (M = 3 rows in backward data).
    test_conv_tf32<Conv<32, 3, Pad<1>>, Shape<3, 32, 32>>(t, "RGB stem 3->32 (GEMM forced)", {1, 5, 65}, 41);
    // The TF32 stem kernel: the CIFAR stem; 16 columns; 24 columns (an m tile's two halves in two rows),
    // 5×5 on 4 channels, 6 rows (2-row blocks); one channel, 8 columns, 64 output channels.
    test_stem_tf32<Conv<32, 3, Pad<1>>, Shape<3, 32, 32>>(t, "stem 3->32 at 32x32", {1, 5, 64}, 43);
    test_stem_tf32<Conv<16, 3, Pad<1>>, Shape<3, 16, 16>>(t, "stem 3->16 at 16x16", {1, 7}, 44);
    test_stem_tf32<Conv<8, 5, Pad<2>>, Shape<4, 6, 24>>(t, "stem 5x5 4->8 at 6x24", {1, 9}, 45);
    test_stem_tf32<Conv<64, 3, Pad<1>>, Shape<1, 8, 8>>(t, "stem 1->64 at 8x8", {1, 3}, 46);
    test_stem_in_network(t);
    test_training_tf32(t);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
