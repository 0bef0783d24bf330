// Conv kernels (kernels/conv.cuh, conv_direct.cuh, conv_gemm.cuh, conv_patch_fp32.cuh, conv_winograd.cuh) against
// the host reference
// Conv::bind<In>::forward/backward on fresh random inputs, outputs poisoned first: every kernel family
// that can run the layer, in each direction (forward; backward data; backward weights and bias), the
// implicit GEMM with both its tiles, and the rule's choice through forward/backward. Determinism: a
// second run gives the same bits, and the families that sum in the same order agree to the bit.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include <ctnn/kernels/conv.cuh>
#include <ctnn/layers/conv.hpp>

#include "kernel_test.hpp"

using namespace ctnn;
using namespace ctnn_test;

// Layers narrower than a Winograd tile (a 1×1 image: a Dense as a 1×1 convolution, a 3×3 window on one
// pixel) are not Winograd layers; asking must compile cleanly (it divided by a tile count of zero).
static_assert(!kernels::conv_winograd_fits<kernels::ConvDims<4096, 1, 1, 256, 1, 1, 0, 1>>() &&
                  !kernels::conv_winograd_fits<kernels::ConvDims<8, 1, 1, 8, 3, 1, 1, 1>>() &&
                  !kernels::conv_winograd_dgrad_fits<kernels::ConvDims<8, 1, 1, 8, 3, 1, 1, 1>>(),
              "no Winograd tile for a 1x1 image");

namespace {

const char* algo_name(ConvAlgo a) { return a == ConvAlgo::direct ? "direct" : "implicit GEMM"; }

// CTNN_QUICK (set under compute-sanitizer, where every launch is slow): batches 1 and 5 only.
std::vector<int> batch_list(std::initializer_list<int> batches) {
  if (std::getenv("CTNN_QUICK")) return {1, 5};
  return batches;
}

template <class L, class In>
void test_conv(Tally& t, const char* name, std::initializer_list<int> batch_init, std::uint64_t seed) {
  if (!case_selected(name)) return;
  const std::vector<int> batches = batch_list(batch_init);
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  using G = typename Dev::dims;
  using Fwd = kernels::ConvFwdGemm<G>;
  constexpr bool fwd_direct = kernels::ConvDirect<G>::fits;
  constexpr bool dgrad_direct = kernels::conv_dgrad_direct_fits<G>();
  constexpr bool wgrad_direct = kernels::ConvWgrad<G>::fits;
  // The FP32 staged-patch kernels run its forward and backward data (stride-1 "same" layers).
  constexpr bool patch = kernels::conv_patch_fp32_fits<G>();
  // The stride-2 one runs the backward data of stride-2 layers (conv_patch_dgrad_s2.cuh).
  constexpr bool patch_s2 = kernels::conv_patch_dgrad_s2_fits<G>();
  // Its forward twin (conv_patch_fwd_s2.cuh): the rule's forward of stride-2 layers where it fits.
  constexpr bool patch_fwd_s2 = kernels::conv_patch_fwd_s2_fits<G>();
  // The Winograd forward (conv_winograd.cuh) runs 3×3 stride-1 padding-1 layers.
  constexpr bool winograd = kernels::conv_winograd_fits<G>();
  constexpr bool winograd4 = kernels::conv_winograd_fits<G, 4>();
  // Its backward data: the forward of the layer turned around (Out -> C channels).
  constexpr bool winograd_dgrad = kernels::conv_winograd_dgrad_fits<G>();
  constexpr bool winograd_dgrad4 = winograd_dgrad && kernels::conv_winograd_fits<kernels::ConvWinogradDgradDims<G>, 4>();
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  std::size_t ws_floats = Dev::template workspace_floats_for<ConvAlgo::implicit_gemm>(max_batch);
  if constexpr (wgrad_direct)
    ws_floats = std::max(ws_floats, Dev::template workspace_floats_for<ConvAlgo::direct>(max_batch));
  if constexpr (kernels::conv_patch_wgrad_fits<G>())  // the 4-column and two-halves variants below
    ws_floats = std::max({ws_floats, kernels::ConvPatchWgrad<G, 4, 4>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, (G::S == 1 ? 8 : 4), 4, 1>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, 8, 4, 1, 4, 1024>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, 8, 2, 2, 4, 1024>::Splits::workspace_floats(max_batch)});
  std::printf("== %s: %dx%dx%d -> %dx%dx%d, K=%d S=%d P=%d D=%d; rule: forward %s, backward data %s, "
              "backward weights %s; workspace %zu floats at batch %d\n",
              name, G::C, G::H, G::W, G::Out, G::OH, G::OW, G::K, G::S, G::P, G::D, algo_name(Dev::forward_algo),
              algo_name(Dev::dgrad_algo), algo_name(Dev::wgrad_algo), Dev::workspace_floats(max_batch), max_batch);

  Stream stream;
  DeviceBuffer<float> ws(ws_floats);
  const CudaContext ctx{stream.s, nullptr, ws.ptr, ws.n};
  const std::vector<float> w = random_vector(B::weight_count, seed), b = random_vector(B::bias_count, seed + 1);
  DeviceBuffer<float> d_w(w), d_b(b), d_dw(B::weight_count), d_db(B::bias_count);
  Labeler label(name);

  for (const int batch : batches) {
    const std::size_t nx = std::size_t(batch) * B::in_size, ny = std::size_t(batch) * B::out_size;
    const std::vector<float> x = random_vector(nx, seed + 2 + batch), dy = random_vector(ny, seed + 3 + 7 * batch);
    std::vector<float> y_ref(ny), dx_ref(nx), dw_ref(B::weight_count), db_ref(B::bias_count);
    B::forward(w.data(), b.data(), x.data(), y_ref.data(), batch);
    B::backward(w.data(), x.data(), y_ref.data(), dy.data(), dx_ref.data(), dw_ref.data(), db_ref.data(), batch);
    DeviceBuffer<float> d_x(x), d_dy(dy), d_y(ny), d_dx(nx);

    // Runs `launch` on poisoned outputs, checks `out` against `ref`, returns what it wrote.
    // The Winograd kernel with 4 × 4 tiles: its transforms scale partial values by up to 5 (B^T) and 8
    // (A^T) along each axis, so its rounding error is about ten times the GEMM's (1e-5 of the largest
    // output measured on these layers): an absolute allowance of 1e-4 of the largest output instead of
    // close_sum's 1e-5. An indexing error still moves results by O(1).
    auto close_winograd4 = [&](const std::vector<float>& got, const std::vector<float>& ref, const char* q) {
      return t(close(got, ref, label(batch, q), 1e-4, 1e-4 * max_abs(ref)));
    };
    // Runs `launch` on poisoned outputs, checks `out` against `ref` (winograd4: with that allowance),
    // returns what it wrote.
    auto run = [&](auto&& launch, DeviceBuffer<float>& out, const std::vector<float>& ref, const char* q,
                   bool winograd4 = false) {
      out.poison();
      launch();
      stream.sync();
      std::vector<float> got = out.download();
      if (winograd4) close_winograd4(got, ref, q);
      else t(close_sum(got, ref, label(batch, q)));
      return got;
    };
    // The tiles the rule's Winograd kernel takes for the forward and backward data (0: none).
    const int fwd_tile = [&] {
      if constexpr (winograd) return kernels::conv_winograd_tile<G>(batch);
      else return 0;
    }();
    const int dgrad_tile = [&] {
      if constexpr (winograd_dgrad) return kernels::conv_winograd_tile<kernels::ConvWinogradDgradDims<G>>(batch);
      else return 0;
    }();

    // Forward: the rule, each family, each GEMM tile; all sum bias + taps in (c, ky, kx) order.
    const auto y_rule = run([&] { Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }, d_y, y_ref,
                            "forward (rule)", fwd_tile == 4);
    using Wide = kernels::ConvGemmWide<Fwd::M>;
    using Narrow = kernels::ConvGemmNarrow<Fwd::M>;
    const auto y_wide = run([&] { kernels::launch_conv_gemm<Fwd, kernels::ConvGemmWide<Fwd::M>>(
                                      stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                            d_y, y_ref, "forward GEMM wide tile");
    const auto y_narrow = run([&] { kernels::launch_conv_gemm<Fwd, kernels::ConvGemmNarrow<Fwd::M>>(
                                        stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                              d_y, y_ref, "forward GEMM narrow tile");
    t(same_bits(y_narrow, y_wide, label(batch, "forward GEMM narrow = wide")));
    // The rule's tile and split-K factor, forced: the same bits as the rule (through the layer).
    const kernels::ConvGemmPlan fplan = kernels::conv_gemm_fwd_plan<Fwd>(batch);
    auto fwd_gemm = [&](bool wide, int splits) {
      if (wide) kernels::launch_conv_gemm<Fwd, Wide>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch, splits);
      else kernels::launch_conv_gemm<Fwd, Narrow>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch, splits);
    };
    const auto y_plan = run([&] { fwd_gemm(fplan.wide, fplan.splits); }, d_y, y_ref, "forward GEMM, the rule's plan");
    // The Winograd kernel (3×3 stride-1 layers) with 2 × 2 and 4 × 4 output tiles against the host, with
    // ReLU in its store; the rule takes one of them where it wins. Otherwise, where it fits, the FP32
    // patch kernel, which sums in the unsplit GEMM's order.
    bool rule_winograd = false;
    if constexpr (winograd) {
      auto relu_in_store = [&](auto&& launch_relu, const std::vector<float>& plain, const char* q) {
        d_y.poison();
        launch_relu();
        stream.sync();
        std::vector<float> want(plain);
        for (float& v : want) v = relu_fn::apply(v);
        t(same_bits(d_y.download(), want, label(batch, q)));
      };
      const auto y_wino = run([&] { kernels::launch_conv_winograd<G>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                              d_y, y_ref, "forward Winograd");
      relu_in_store([&] { kernels::launch_conv_winograd<G, relu_fn>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                    y_wino, "forward Winograd with ReLU = ReLU(Winograd)");
      std::vector<float> y_wino4;
      if constexpr (winograd4) {
        y_wino4 = run([&] { kernels::launch_conv_winograd<G, identity_fn, 4>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                      d_y, y_ref, "forward Winograd 4x4 tiles", true);
        relu_in_store([&] { kernels::launch_conv_winograd<G, relu_fn, 4>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                      y_wino4, "forward Winograd 4x4 with ReLU = ReLU(Winograd 4x4)");
      }
      rule_winograd = fwd_tile != 0;
      if (fwd_tile == 2) t(same_bits(y_rule, y_wino, label(batch, "forward (rule: Winograd) = Winograd")));
      if (fwd_tile == 4) {
        t(same_bits(y_rule, y_wino4, label(batch, "forward (rule: Winograd 4x4) = Winograd 4x4")));
        // Into an output only 8-byte aligned, the rule takes the 2 × 2 tiles (their stores are 8 bytes).
        DeviceBuffer<float> d_y_off(ny + 2);
        d_y_off.poison();
        Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y_off.ptr + 2, batch);
        stream.sync();
        const std::vector<float> off = d_y_off.download();
        t(same_bits(std::vector<float>(off.begin() + 2, off.end()), y_wino,
                    label(batch, "forward (rule), output 8-byte aligned = Winograd 2x2")));
      }
    }
    // The patch rule's split tile (few blocks) adds its thread groups' sums in another order: compared
    // with that tile below instead of with the GEMM.
    const bool fwd_split = [&] {
      if constexpr (patch) return kernels::conv_patch_fp32_tile<kernels::ConvPatchFwd<G>>(batch) == 2;
      else return false;
    }();
    if (Dev::forward_algo == ConvAlgo::implicit_gemm && !rule_winograd && !patch_fwd_s2 && !fwd_split)
      t(same_bits(y_rule, patch ? y_wide : y_plan, label(batch, patch ? "forward (rule: patch) = GEMM" : "forward (rule) = its plan")));
    if constexpr (patch) {
      using PF = kernels::ConvPatchFwd<G>;
      const auto y_pw = run([&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32Wide<PF>>(
                                      stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                            d_y, y_ref, "forward patch wide tile");
      t(same_bits(y_pw, y_wide, label(batch, "forward patch wide = GEMM")));
      const auto y_pn = run([&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32Narrow<PF>>(
                                      stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                            d_y, y_ref, "forward patch narrow tile");
      t(same_bits(y_pn, y_wide, label(batch, "forward patch narrow = GEMM")));
      const auto y_ps = run([&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32NarrowSplit<PF>>(
                                      stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                            d_y, y_ref, "forward patch narrow tile, channels split in 2");
      if (fwd_split && !rule_winograd)
        t(same_bits(y_rule, y_ps, label(batch, "forward (rule: patch narrow split) = that tile")));
      run([&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32WideSplit<PF>>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr,
                                                                                      d_y.ptr, batch); },
          d_y, y_ref, "forward patch wide tile, channels split in 2");
    }
    if constexpr (kernels::conv_patch_fwd_s2_shape<G>()) {  // stride 2: the staged-patch forward's tiles
      auto s2_tile = [&](auto tile, const char* q) {  // one group of threads: the GEMM's sums, to the bit
        using T = decltype(tile);
        const auto got = run([&] { kernels::launch_conv_patch_fwd_s2<G, T>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); },
                             d_y, y_ref, q);
        if (T::KS == 1) t(same_bits(got, y_wide, label(batch, q)));
      };
      s2_tile(kernels::ConvPatchFwdS2<G, 4, 8>{}, "forward s2 patch 4x8 = GEMM");
      s2_tile(kernels::ConvPatchFwdS2<G, 8, 4>{}, "forward s2 patch 8x4 = GEMM");
      s2_tile(kernels::ConvPatchFwdS2<G, 2, 4>{}, "forward s2 patch 2x4 = GEMM");
      s2_tile(kernels::ConvPatchFwdS2<G, 4, 8, 2, 128>{}, "forward s2 patch 4x8, channels split in 2");
      s2_tile(kernels::ConvPatchFwdS2<G, 8, 4, 4, 64>{}, "forward s2 patch 8x4, channels split in 4");
      if constexpr (patch_fwd_s2) {  // the rule's tiles: the rule's bits
        const bool split4 = kernels::conv_patch_fwd_s2_split4<G>(batch);
        const auto got = run([&] {
          if (split4) kernels::launch_conv_patch_fwd_s2<G, kernels::ConvPatchFwdS2Split4<G>>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
          else kernels::launch_conv_patch_fwd_s2<G, kernels::ConvPatchFwdS2Split2<G>>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
        }, d_y, y_ref, split4 ? "forward s2 patch, the rule's tile (split 4)" : "forward s2 patch, the rule's tile (split 2)");
        t(same_bits(y_rule, got, label(batch, "forward (rule: s2 patch) = its tile")));
      }
    }
    if constexpr (fwd_direct) {
      const auto y_direct = run([&] { Dev::template forward_with<ConvAlgo::direct>(ctx, d_w.ptr, d_b.ptr, d_x.ptr,
                                                                                   d_y.ptr, batch); },
                                d_y, y_ref, "forward direct");
      t(same_bits(y_direct, y_wide, label(batch, "forward direct = GEMM")));
      // Into an output 4 bytes past a 16-byte boundary (rows of pixels then go one store a pixel).
      DeviceBuffer<float> d_y_off(ny + 1);
      d_y_off.poison();
      Dev::template forward_with<ConvAlgo::direct>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y_off.ptr + 1, batch);
      stream.sync();
      const std::vector<float> off = d_y_off.download();
      t(same_bits(std::vector<float>(off.begin() + 1, off.end()), y_direct,
                  label(batch, "forward direct, output not 16-byte aligned")));
    }
    run([&] { Dev::forward(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch); }, d_y, y_ref, "forward (rule), again",
        fwd_tile == 4);
    t(same_bits(d_y.download(), y_rule, label(batch, "forward (rule), second run")));
    {  // ReLU in the epilogue of the rule's kernel (direct, patch or GEMM): ReLU(forward) to the bit
      d_y.poison();
      Dev::template forward_act<relu_fn>(ctx, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch);
      stream.sync();
      std::vector<float> want(y_rule);
      for (float& v : want) v = relu_fn::apply(v);
      t(same_bits(d_y.download(), want, label(batch, "forward with ReLU in the epilogue = ReLU(forward)")));
    }

    // Backward data: the implicit-GEMM family's rule (Winograd, patch or GEMM), then each kernel.
    const auto dx_gemm = run([&] { Dev::template backward_data_with<ConvAlgo::implicit_gemm>(ctx, d_w.ptr, d_dy.ptr,
                                                                                             d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data (family rule)", dgrad_tile == 4);
    if constexpr (winograd_dgrad) {
      const auto dx_wino = run([&] { kernels::launch_conv_winograd_dgrad<G>(stream.s, d_w.ptr, d_dy.ptr, nullptr, d_dx.ptr, batch); },
                               d_dx, dx_ref, "backward data Winograd");
      if (dgrad_tile == 2) t(same_bits(dx_gemm, dx_wino, label(batch, "backward data (rule: Winograd) = Winograd")));
      if constexpr (winograd_dgrad4) {
        const auto dx_wino4 = run([&] { kernels::launch_conv_winograd_dgrad<G, identity_fn, 4>(stream.s, d_w.ptr, d_dy.ptr,
                                                                                               nullptr, d_dx.ptr, batch); },
                                  d_dx, dx_ref, "backward data Winograd 4x4 tiles", true);
        if (dgrad_tile == 4) t(same_bits(dx_gemm, dx_wino4, label(batch, "backward data (rule: Winograd 4x4) = Winograd 4x4")));
      }
    }
    const auto dx_wide = run([&] { kernels::launch_conv_dgrad_gemm<G, kernels::ConvGemmWide<G::C>>(
                                       stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data GEMM wide tile");
    const auto dx_narrow = run([&] { kernels::launch_conv_dgrad_gemm<G, kernels::ConvGemmNarrow<G::C>>(
                                         stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                               d_dx, dx_ref, "backward data GEMM narrow tile");
    t(same_bits(dx_narrow, dx_wide, label(batch, "backward data GEMM narrow = wide")));
    const kernels::ConvGemmPlan dplan = kernels::conv_gemm_dgrad_plan<G>(batch);
    auto dgrad_gemm = [&](bool wide, int splits) {
      if (wide) kernels::launch_conv_dgrad_gemm<G, kernels::ConvGemmWide<G::C>>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch, splits);
      else kernels::launch_conv_dgrad_gemm<G, kernels::ConvGemmNarrow<G::C>>(stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch, splits);
    };
    const auto dx_plan = run([&] { dgrad_gemm(dplan.wide, dplan.splits); }, d_dx, dx_ref, "backward data GEMM, the rule's plan");
    // Where the patch rule takes a tile whose thread groups split the channels, its sums are added in
    // another order: compared with that tile below instead.
    const bool dgrad_split = [&] {
      if constexpr (patch) return kernels::conv_patch_fp32_tile<kernels::ConvPatchDgrad<G>>(batch) == 2;
      else if constexpr (patch_s2) {
        const auto tile = kernels::conv_patch_dgrad_s2_tile<G>(batch);
        return tile == kernels::ConvS2Tile::wide_split || tile == kernels::ConvS2Tile::narrow_split ||
               tile == kernels::ConvS2Tile::row_split;
      } else return false;
    }();
    if (dgrad_tile == 0 && !dgrad_split)
      t(same_bits(patch || patch_s2 ? dx_wide : dx_plan, dx_gemm,
                  label(batch, patch || patch_s2 ? "backward data (rule: patch) = GEMM" : "backward data GEMM (rule) = its plan")));
    if (dplan.splits == 1 && dgrad_tile == 0 && !dgrad_split)
      t(same_bits(dx_wide, dx_gemm, label(batch, "backward data GEMM (rule, unsplit) = wide")));
    if constexpr (patch) {
      using PD = kernels::ConvPatchDgrad<G>;
      const auto dx_pw = run([&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32Wide<PD>>(
                                       stream.s, d_w.ptr, nullptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data patch wide tile");
      t(same_bits(dx_pw, dx_wide, label(batch, "backward data patch wide = GEMM")));
      const auto dx_pn = run([&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32Narrow<PD>>(
                                       stream.s, d_w.ptr, nullptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data patch narrow tile");
      t(same_bits(dx_pn, dx_wide, label(batch, "backward data patch narrow = GEMM")));
      const auto dx_ps = run([&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32NarrowSplit<PD>>(
                                       stream.s, d_w.ptr, nullptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data patch narrow tile, channels split in 2");
      if (dgrad_split && dgrad_tile == 0)
        t(same_bits(dx_gemm, dx_ps, label(batch, "backward data (rule: patch narrow split) = that tile")));
      run([&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32WideSplit<PD>>(stream.s, d_w.ptr, nullptr,
                                                                                      d_dy.ptr, d_dx.ptr, batch); },
          d_dx, dx_ref, "backward data patch wide tile, channels split in 2");
    }
    if constexpr (patch_s2) {  // dx_wide: the unsplit GEMM, whose order these kernels keep
      const auto dx_sw = run([&] { kernels::launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2Wide<G>>(
                                       stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data stride-2 patch wide tile");
      t(same_bits(dx_sw, dx_wide, label(batch, "backward data stride-2 patch wide = GEMM")));
      const auto dx_sn = run([&] { kernels::launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2Narrow<G>>(
                                       stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data stride-2 patch narrow tile");
      t(same_bits(dx_sn, dx_wide, label(batch, "backward data stride-2 patch narrow = GEMM")));
      const auto dx_s4 = run([&] { kernels::launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2<G, 4, 4>>(
                                       stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data stride-2 patch, 4 x 4 a thread");
      t(same_bits(dx_s4, dx_wide, label(batch, "backward data stride-2 patch, 4 x 4 a thread = GEMM")));
      const auto dx_ws = run([&] { kernels::launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2WideSplit<G>>(
                                       stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data stride-2 patch 2 x 8, channels split in 2");
      const auto dx_ns = run([&] { kernels::launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2NarrowSplit<G>>(
                                       stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                             d_dx, dx_ref, "backward data stride-2 patch 1 x 8, channels split in 2");
      std::vector<float> dx_rs;  // whole dy rows a thread, in steps of 16 output channels where Out % 16 == 0
      if constexpr (kernels::conv_s2_row_tile<G>())
        dx_rs = run([&] { kernels::launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2RowSplit<G>>(
                              stream.s, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
                    d_dx, dx_ref, "backward data stride-2 patch, whole dy rows, channels split in 2");
      if (dgrad_split) {
        const auto tile = kernels::conv_patch_dgrad_s2_tile<G>(batch);
        const auto& split = tile == kernels::ConvS2Tile::wide_split ? dx_ws : tile == kernels::ConvS2Tile::narrow_split ? dx_ns : dx_rs;
        t(same_bits(dx_gemm, split, label(batch, "backward data (rule: stride-2 patch split) = that tile")));
      }
    }

    // The backward of an activation below the layer in the store (x standing for its output): exactly
    // where the rule runs a Winograd or patch kernel, and then dx · Fn'(x) to the bit (ReLU: a mask;
    // Tanh: a product).
    auto dgrad_act = [&]<class Fn>(Fn) {
      d_dx.poison();
      const bool fused = Dev::template backward_data_act<Fn>(ctx, d_w.ptr, d_x.ptr, d_dy.ptr, d_dx.ptr, batch);
      stream.sync();
      const bool expected = (patch || patch_s2 || dgrad_tile != 0) && Dev::dgrad_algo == ConvAlgo::implicit_gemm;
      if (!t(fused == expected))
        std::printf("FAIL %s: backward_data_act<%s> ran the epilogue: %d, expected %d\n", label(batch, ""), Fn::name,
                    fused, expected);
      if (fused) {
        std::vector<float> want(dx_gemm);
        for (std::size_t k = 0; k < want.size(); ++k) want[k] *= Fn::derivative(x[k]);
        char q[120];
        std::snprintf(q, sizeof q, "backward data with %s's backward in the epilogue = dx · %s'(x)", Fn::name, Fn::name);
        t(same_bits(d_dx.download(), want, label(batch, q)));
      }
    };
    dgrad_act(relu_fn{});
    dgrad_act(tanh_fn{});

    // Split-K over clusters of 2, 4 and 8 blocks, both tiles, both directions: each split sums its
    // range of k, the partials are added in split order (so not the unsplit bits); two runs, same bits.
    if (kernels::clusters_supported())
      for (const int splits : {2, 4, 8}) {
        char q[80];
        for (const bool wide : {false, true}) {
          std::snprintf(q, sizeof q, "forward GEMM %s tile, split-K %d", wide ? "wide" : "narrow", splits);
          const auto y1 = run([&] { fwd_gemm(wide, splits); }, d_y, y_ref, q);
          if (!wide) {  // ReLU in the split reduction's store: ReLU of the reduced sums, to the bit
            d_y.poison();
            kernels::launch_conv_gemm<Fwd, Narrow, relu_fn>(stream.s, d_w.ptr, d_b.ptr, d_x.ptr, d_y.ptr, batch, splits);
            stream.sync();
            std::vector<float> want(y1);
            for (float& v : want) v = relu_fn::apply(v);
            std::snprintf(q, sizeof q, "forward GEMM narrow split-K %d with ReLU in the store = ReLU(forward)", splits);
            t(same_bits(d_y.download(), want, label(batch, q)));
          }
          std::snprintf(q, sizeof q, "backward data GEMM %s tile, split-K %d", wide ? "wide" : "narrow", splits);
          const auto dx1 = run([&] { dgrad_gemm(wide, splits); }, d_dx, dx_ref, q);
          if (wide) continue;
          std::snprintf(q, sizeof q, "forward GEMM narrow split-K %d, second run", splits);
          t(same_bits(run([&] { fwd_gemm(wide, splits); }, d_y, y_ref, q), y1, label(batch, q)));
          std::snprintf(q, sizeof q, "backward data GEMM narrow split-K %d, second run", splits);
          t(same_bits(run([&] { dgrad_gemm(wide, splits); }, d_dx, dx_ref, q), dx1, label(batch, q)));
        }
      }
    if constexpr (dgrad_direct)
      run([&] { Dev::template backward_data_with<ConvAlgo::direct>(ctx, d_w.ptr, d_dy.ptr, d_dx.ptr, batch); },
          d_dx, dx_ref, "backward data direct");

    // Backward weights and bias (the workspace poisoned too: stage 2 reads only what stage 1 wrote).
    auto wgrad_run = [&](auto&& launch, const char* q) {
      d_dw.poison(), d_db.poison(), ws.poison();
      launch();
      stream.sync();
      std::vector<float> dw = d_dw.download(), db = d_db.download();
      char q2[80];
      std::snprintf(q2, sizeof q2, "%s dw", q);
      t(close_sum(dw, dw_ref, label(batch, q2)));
      std::snprintf(q2, sizeof q2, "%s db", q);
      t(close_sum(db, db_ref, label(batch, q2)));
      dw.insert(dw.end(), db.begin(), db.end());
      return dw;
    };
    auto wgrad = [&](auto algo_tag, const char* q) {
      constexpr ConvAlgo A = decltype(algo_tag)::value;
      return wgrad_run([&] { Dev::template backward_weights_with<A>(ctx, d_x.ptr, d_dy.ptr, d_dw.ptr, d_db.ptr, batch); }, q);
    };
    wgrad(std::integral_constant<ConvAlgo, ConvAlgo::implicit_gemm>{}, "backward weights (implicit-GEMM family)");
    if constexpr (wgrad_direct) wgrad(std::integral_constant<ConvAlgo, ConvAlgo::direct>{}, "backward weights direct");
    if constexpr (kernels::conv_patch_wgrad_fits<G>()) {  // the family runs the patch kernel: the GEMM too
      wgrad_run([&] { kernels::launch_conv_wgrad_gemm<G>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr, batch); },
                "backward weights GEMM");
      const auto p1 = wgrad_run([&] { kernels::launch_conv_patch_wgrad<G>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr,
                                                                           d_db.ptr, batch); },
                                "backward weights patch");
      t(same_bits(wgrad_run([&] { kernels::launch_conv_patch_wgrad<G>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr,
                                                                       d_db.ptr, batch); },
                            "backward weights patch, again"),
                  p1, label(batch, "backward weights patch, second run")));
      wgrad_run([&] { kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 4, 4>>(stream.s, d_x.ptr, d_dy.ptr,
                                                                                             ws.ptr, d_dw.ptr, d_db.ptr, batch); },
                "backward weights patch, 4 columns a thread");
      using OneHalf = kernels::ConvPatchWgrad<G, (G::S == 1 ? 8 : 4), 4, 1>;
      wgrad_run([&] { kernels::launch_conv_patch_wgrad<G, OneHalf>(stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr,
                                                                  batch); },
                "backward weights patch, one half of 4 warps");
      // Lanes of 4 input channels (the rule's for C <= 4), one half and two halves of 2 channels a lane.
      wgrad_run([&] { kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 8, 4, 1, 4, 1024>>(
                          stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr, batch); },
                "backward weights patch, 4-channel lanes");
      wgrad_run([&] { kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 8, 2, 2, 4, 1024>>(
                          stream.s, d_x.ptr, d_dy.ptr, ws.ptr, d_dw.ptr, d_db.ptr, batch); },
                "backward weights patch, 4-channel lanes, two halves");
    }

    // The rule through backward(), twice: same bits; with dx = null (a first layer) dx is untouched.
    d_dx.poison(), d_dw.poison(), d_db.poison(), ws.poison();
    Dev::backward(ctx, d_w.ptr, d_x.ptr, nullptr, d_dy.ptr, d_dx.ptr, d_dw.ptr, d_db.ptr, batch);
    stream.sync();
    const std::vector<float> dx = d_dx.download(), dw = d_dw.download(), db = d_db.download();
    if (dgrad_tile == 4) close_winograd4(dx, dx_ref, "backward (rule: Winograd 4x4) dx");
    else t(close_sum(dx, dx_ref, label(batch, "backward (rule) dx")));
    t(close_sum(dw, dw_ref, label(batch, "backward (rule) dw")));
    t(close_sum(db, db_ref, label(batch, "backward (rule) db")));
    if (Dev::dgrad_algo == ConvAlgo::implicit_gemm) t(same_bits(dx, dx_gemm, label(batch, "backward (rule) dx = GEMM")));
    d_dx.poison(), d_dw.poison(), d_db.poison(), ws.poison();
    Dev::backward(ctx, d_w.ptr, d_x.ptr, nullptr, d_dy.ptr, nullptr, d_dw.ptr, d_db.ptr, batch);
    stream.sync();
    t(same_bits(d_dw.download(), dw, label(batch, "backward dw, second run")));
    t(same_bits(d_db.download(), db, label(batch, "backward db, second run")));
    const std::vector<float> untouched = d_dx.download();
    t(std::all_of(untouched.begin(), untouched.end(), [](float v) { return v != v; }) ||
      (std::printf("FAIL %s: dx written although null was passed\n", name), false));
    d_dx.poison();
    Dev::backward(ctx, d_w.ptr, d_x.ptr, nullptr, d_dy.ptr, d_dx.ptr, d_dw.ptr, d_db.ptr, batch);
    stream.sync();
    t(same_bits(d_dx.download(), dx, label(batch, "backward dx, second run")));
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
    // CIFAR-sized layers (the rule picks implicit GEMM): 3×3 pad 1 at 32×32 and 16×16, one strided.
    test_conv<Conv<32, 3, Pad<1>>, Shape<32, 32, 32>>(t, "CIFAR 32->32 at 32x32", {1, 37, 64}, 21);
    test_conv<Conv<64, 3, Stride<2>, Pad<1>>, Shape<32, 32, 32>>(t, "CIFAR 32->64 stride 2", {1, 37, 64}, 22);
    test_conv<Conv<64, 3, Pad<1>>, Shape<64, 16, 16>>(t, "CIFAR 64->64 at 16x16", {1, 3, 64}, 23);
    test_conv<Conv<64, 3, Pad<1>>, Shape<32, 16, 16>>(t, "CIFAR 32->64 at 16x16", {1, 5, 64}, 27);
    test_conv<Conv<128, 3, Stride<2>, Pad<1>>, Shape<64, 16, 16>>(t, "CIFAR 64->128 stride 2", {1, 5, 64}, 29);
    // The stride-2 patch kernel off the CIFAR shapes: 5x5 (dy window of 3 rows, halo 1) and 1x1 (odd
    // dx rows and columns get no tap), C filling no 32-channel tile evenly (12, 20), H != W.
    test_conv<Conv<16, 5, Stride<2>, Pad<2>>, Shape<12, 32, 16>>(t, "stride-2 patch 5x5 12->16", {1, 3, 37}, 30);
    test_conv<Conv<24, 1, Stride<2>>, Shape<20, 16, 16>>(t, "stride-2 patch 1x1 20->24", {1, 3, 37}, 31);
    // The stride-2 forward patch kernel: a 5×5 window on a tall image, a 1×1 window with a partial channel tile.
    test_conv<Conv<16, 5, Stride<2>, Pad<2>>, Shape<16, 32, 16>>(t, "stride-2 forward patch 5x5 16->16", {1, 3, 37}, 35);
    test_conv<Conv<20, 1, Stride<2>>, Shape<16, 16, 16>>(t, "stride-2 forward patch 1x1 16->20", {1, 3, 37}, 36);
    // The patch kernels off the CIFAR shapes: a 5x5 window (halo 2), rows past the image in the last row
    // tile (H = 10 is no multiple of the tiles' rows), partial 32-channel tiles (M = 24, 40), W = 24.
    test_conv<Conv<40, 5, Pad<2>>, Shape<24, 10, 24>>(t, "patch 5x5 24->40", {1, 3, 37}, 28);
    // Winograd: 20 channels (the last step of 8 half zeros), 96 outputs (three tiles of 32), one block
    // a sample; and 64 -> 64 at 32 × 32 (eight blocks a sample).
    test_conv<Conv<96, 3, Pad<1>>, Shape<20, 16, 16>>(t, "Winograd 20->96 at 16x16", {1, 3, 43}, 32);
    test_conv<Conv<64, 3, Pad<1>>, Shape<64, 32, 32>>(t, "Winograd 64->64 at 32x32", {1, 17}, 33);
    // 4 × 4 tiles with 20 channels (a step half zeros), a sample a block; the rule takes them at 130.
    test_conv<Conv<64, 3, Pad<1>>, Shape<20, 16, 16>>(t, "Winograd 20->64 at 16x16", {1, 5, 130}, 34);
    // The RGB stem of those networks (C = 3: direct, but the GEMM is checked too).
    test_conv<Conv<32, 3, Pad<1>>, Shape<3, 32, 32>>(t, "CIFAR stem 3->32", {1, 37, 64}, 24);
    // Odd sizes with stride 2: parity classes of different sizes; channels that fill no tile evenly.
    test_conv<Conv<40, 3, Stride<2>, Pad<1>>, Shape<20, 15, 15>>(t, "odd 20->40 stride 2", {1, 37, 64}, 25);
    // Stride 2 with dilation 2 and a 4-tap kernel: some parity classes get no taps at all.
    test_conv<Conv<24, 4, Stride<3>, Dilation<2>, Pad<3>>, Shape<17, 11, 13>>(t, "stride 3 dilation 2", {1, 37, 64}, 26);
    // Stride and padding on an odd size; the gather's divisibility checks.
    test_conv<Conv<8, 3, Stride<2>, Pad<1>>, Shape<4, 13, 13>>(t, "strided padded", {1, 37, 64}, 13);
    // Dilation on a non-square input with C = 3.
    test_conv<Conv<5, 3, Dilation<2>, Pad<1>>, Shape<3, 11, 17>>(t, "dilated non-square", {1, 37, 64}, 14);
    // C = 3, K = 5, stride 2 (an RGB stem).
    test_conv<Conv<12, 5, Stride<2>, Pad<2>>, Shape<3, 32, 32>>(t, "RGB stem", {1, 37, 64}, 15);
    // The direct forward's rows of 4 pixels × 8 channels a thread (ConvDirect::rx): stride 2, and a
    // dilated two-channel layer.
    test_conv<Conv<16, 5, Stride<2>, Pad<2>>, Shape<3, 32, 32>>(t, "RGB stem, 16 channels, stride 2", {1, 37, 64}, 25);
    test_conv<Conv<8, 3, Dilation<2>, Pad<2>>, Shape<2, 12, 20>>(t, "dilated, two channels, 4-pixel rows", {1, 37, 64},
                                                                 26);
    // Even kernel, stride 3 with dilation 2 on a non-square input.
    test_conv<Conv<7, 4, Stride<3>, Dilation<2>, Pad<3>>, Shape<2, 20, 23>>(t, "even kernel stride 3", {1, 37, 64}, 16);
    // Wide: two forward BM tiles, several weight-gradient tiles.
    test_conv<Conv<72, 3, Pad<1>>, Shape<16, 8, 8>>(t, "wide", {1, 37, 64}, 17);
    // C·K·K > 256: several weight-gradient k tiles.
    test_conv<Conv<40, 3, Pad<1>>, Shape<32, 8, 8>>(t, "deep", {1, 37, 64}, 18);
  } catch (const std::exception& e) {
    std::printf("FAIL: exception: %s\n", e.what());
    t(false);
  }
  return t.summary();
}
