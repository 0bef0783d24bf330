// Per-layer throughput of the convolution kernels (kernels/conv.cuh): for each layer, batch and
// direction (forward, backward data, backward weights incl. its second reduction stage) every kernel
// family that can run it (for stride-1 "same" layers the FP32 staged-patch tiles too), and the one the
// rule picks (marked *); for the implicit-GEMM layers also the
// TF32 tensor-core kernels (conv_mma.cuh, Math::tf32: the rule's tile marked *, and tile variants; for
// stride-1 "same" layers the staged-patch kernels of conv_patch.cuh and the gathering kernel beside them,
// and where the program has sm_90a device code the wgmma kernels of conv_wgmma.cuh, which a network's
// TF32 rule takes).
// Prints one table row each:
//   layer  batch  direction  kernel  µs  GFLOP  TFLOP/s  % of peak
// Timing (kernel_bench.hpp): inputs are fresh random numbers (never zeros); 5 warm-up calls (none for `1 1`), then
// `samples` samples of `reps` back-to-back calls between two CUDA events on one stream; the median sample / reps.
// FLOPs: 2·Out·OH·OW·C·K·K per sample for each direction (the dense GEMM's count; the zero taps of
// a padded border are counted, as everyone counts them; the Winograd kernel multiplies 2.25× (4 × 4 tiles: 4×) less, and
// its TFLOP/s is that count over its time, the rate a direct kernel would need to match it). Peak: FP32 FMA lanes (128 per SM on Hopper)
// × 2 × SM count × the peak clock the device reports; for the TF32 rows the dense TF32 tensor peak,
// 1024 FMA per clock per SM on Hopper (H100 SXM: 495 TFLOP/s at its 1.83 GHz boost clock).
// Usage: conv_bench [samples] [reps] [layer] [batch]   (conv_bench 1 1: one call each, for ncu)
//   layer: only the layers whose name contains this text; batch: only this batch (0: all)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ctnn/core/random.hpp>
#include <ctnn/kernels/conv.cuh>
#include <ctnn/kernels/conv_wgmma.cuh>
#include <ctnn/layers/conv.hpp>

#include "kernel_bench.hpp"

using namespace ctnn;
using namespace ctnn_bench;

namespace {

int g_batch = 0;
const char* g_layer = "";
bool g_wgmma = false;  // the program's device code has the wgmma kernels (sm_90a)

// TF32 weight-gradient tiles beside the rule's: warps CG × KG, stages.
struct WgradMmaVariant {
  int cg, kg, stages;
};
constexpr WgradMmaVariant wgrad_mma_variants[] = {{1, 4, 2}, {2, 4, 2}, {4, 4, 2}, {4, 4, 3}};

// The TF32 kernels of a GEMM-shaped layer: through the layer (the rule's tile, *), and tile variants:
// wide (BN 128), narrow (BN 64) and slim (BN 32), the wide tile with 4 stages or with the other warp
// layout.
template <class L, class In>
void tf32_rows(const char* name, int n, const CudaContext& ctx32, const Buf& w, const Buf& b, const Buf& x,
               const Buf& y, const Buf& dy, const Buf& dx, const Buf& dw, const Buf& db) {
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  using G = typename Dev::dims;
  using Fwd = kernels::ConvFwdGemm<G>;
  using Wide = kernels::ConvMmaWide<Fwd::M>;
  using namespace kernels;
  CudaContext ctx = ctx32;
  ctx.math = Math::tf32;
  const cudaStream_t s = ctx.stream;
  constexpr auto gemm = ConvAlgo::implicit_gemm;
  const double flops = double(B::flops) * n, tp = g_tf32_peak_tflops;
  auto fwd = [&](const char* k, bool chosen, auto&& f) { row(name, n, "fwd", k, chosen, time_us(s, f), flops, tp); };
  auto dgr = [&](const char* k, bool chosen, auto&& f) { row(name, n, "dgrad", k, chosen, time_us(s, f), flops, tp); };
  auto wgr = [&](const char* k, bool chosen, auto&& f) { row(name, n, "wgrad", k, chosen, time_us(s, f), flops, tp); };
  fwd("tf32 rule", true, [&] { Dev::template forward_with<gemm>(ctx, w.p, b.p, x.p, y.p, n); });
  fwd("tf32 wide 128", false, [&] { launch_conv_mma<Fwd, Wide>(s, w.p, b.p, x.p, y.p, n); });
  fwd("tf32 narrow 64", false, [&] { launch_conv_mma<Fwd, ConvMmaNarrow<Fwd::M>>(s, w.p, b.p, x.p, y.p, n); });
  fwd("tf32 wide 4 stages", false, [&] {
    launch_conv_mma<Fwd, MmaTile<Wide::BM, Wide::BN, Wide::WM, Wide::WN, 4>>(s, w.p, b.p, x.p, y.p, n);
  });
  fwd("tf32 wide warps swap", false, [&] {
    launch_conv_mma<Fwd, MmaTile<Wide::BM, Wide::BN, Wide::WM == 1 ? 2 : 1, Wide::WM == 1 ? 2 : 4>>(s, w.p, b.p, x.p,
                                                                                                   y.p, n);
  });
  fwd("tf32 slim 32", false, [&] { launch_conv_mma<Fwd, ConvMmaSlim<Fwd::M>>(s, w.p, b.p, x.p, y.p, n); });
  if constexpr (conv_patch_fwd_s2_mma_fits<G>()) {  // stride 2: the rule's patch tiles and variants, the gathering kernel
    fwd("tf32 mma (gather) auto", false, [&] { launch_conv_mma_auto<Fwd>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 s2 patch wide", false,
        [&] { launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2MmaWide<G>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 s2 patch narrow", false,
        [&] { launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2MmaNarrow<G>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 s2 patch wide 128 px", false,
        [&] { launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2Mma<G, 128, 64, 2>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 s2 patch narrow 128 px", false,
        [&] { launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2Mma<G, 128, 32, 1>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 s2 patch 64 ch 4 warps", false,
        [&] { launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2Mma<G, 128, 64, 1>>(s, w.p, b.p, x.p, y.p, n); });
  }
  for (const int k : {2, 4, 8}) {
    const std::string nk = "tf32 narrow split " + std::to_string(k), sk = "tf32 slim split " + std::to_string(k);
    fwd(nk.c_str(), false, [&] { launch_conv_mma<Fwd, ConvMmaNarrow<Fwd::M>>(s, w.p, b.p, x.p, y.p, n, k); });
    fwd(sk.c_str(), false, [&] { launch_conv_mma<Fwd, ConvMmaSlim<Fwd::M>>(s, w.p, b.p, x.p, y.p, n, k); });
  }
  dgr("tf32 rule", true, [&] { Dev::template backward_data_with<gemm>(ctx, w.p, dy.p, dx.p, n); });
  if constexpr (conv_patch_dgrad_s2_mma_fits<G>()) {
    dgr("tf32 mma (gather) auto", false, [&] { launch_conv_dgrad_mma_auto<G>(s, w.p, dy.p, dx.p, n); });
    dgr("tf32 s2 patch 1x4 warps", false, [&] {
      launch_conv_patch_dgrad_s2_mma<G, identity_fn, ConvPatchS2Mma<G, 1>>(s, w.p, dy.p, dx.p, n);
    });
  }
  dgr("tf32 wide 128", false, [&] { launch_conv_dgrad_mma<G, ConvMmaWide<G::C>>(s, w.p, dy.p, dx.p, n); });
  dgr("tf32 narrow 64", false, [&] { launch_conv_dgrad_mma<G, ConvMmaNarrow<G::C>>(s, w.p, dy.p, dx.p, n); });
  dgr("tf32 slim 32", false, [&] { launch_conv_dgrad_mma<G, ConvMmaSlim<G::C>>(s, w.p, dy.p, dx.p, n); });
  for (const int k : {2, 4, 8}) {
    const std::string nk = "tf32 narrow split " + std::to_string(k), sk = "tf32 slim split " + std::to_string(k);
    dgr(nk.c_str(), false, [&] { launch_conv_dgrad_mma<G, ConvMmaNarrow<G::C>>(s, w.p, dy.p, dx.p, n, k); });
    dgr(sk.c_str(), false, [&] { launch_conv_dgrad_mma<G, ConvMmaSlim<G::C>>(s, w.p, dy.p, dx.p, n, k); });
  }
  if constexpr (conv_patch_fits<G>()) {  // stride-1 "same" layers: the staged-patch kernels (conv_patch.cuh)
    using PF = ConvPatchFwd<G>;
    using PD = ConvPatchDgrad<G>;
    fwd("tf32 mma (gather)", false, [&] { launch_conv_mma_auto<Fwd>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 patch tall", false, [&] { launch_conv_patch<PF, ConvPatchTall<PF>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 patch short", false, [&] { launch_conv_patch<PF, ConvPatchShort<PF>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 patch tall 3 stages", false,
        [&] { launch_conv_patch<PF, ConvPatchTile<PF, 32>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 patch 32 8 warps", false,
        [&] { launch_conv_patch<PF, ConvPatchTile<PF, 32, 0, 3, 0, true, 8>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 patch 64", false, [&] { launch_conv_patch<PF, ConvPatchTile<PF, 64>>(s, w.p, b.p, x.p, y.p, n); });
    fwd("tf32 patch 64 8 warps", false,
        [&] { launch_conv_patch<PF, ConvPatchTile<PF, 64, 0, 3, 0, true, 8>>(s, w.p, b.p, x.p, y.p, n); });
    dgr("tf32 mma (gather)", false, [&] { launch_conv_dgrad_mma_auto<G>(s, w.p, dy.p, dx.p, n); });
    dgr("tf32 patch tall", false, [&] { launch_conv_patch<PD, ConvPatchTall<PD>>(s, w.p, nullptr, dy.p, dx.p, n); });
    dgr("tf32 patch short", false, [&] { launch_conv_patch<PD, ConvPatchShort<PD>>(s, w.p, nullptr, dy.p, dx.p, n); });
    dgr("tf32 patch 64", false, [&] { launch_conv_patch<PD, ConvPatchTile<PD, 64>>(s, w.p, nullptr, dy.p, dx.p, n); });
    dgr("tf32 patch 64 8 warps", false,
        [&] { launch_conv_patch<PD, ConvPatchTile<PD, 64, 0, 3, 0, true, 8>>(s, w.p, nullptr, dy.p, dx.p, n); });
  }
  // The wgmma kernels (sm_90a): a network's TF32 rule takes them (where it keeps the weights' copies: this
  // plain context does not, so the rule rows are the mma.sync kernels); the forward's weights' copy apart;
  // * marks the weight gradient where a network's rule takes it.
  if constexpr (conv_wgmma_fits<G>()) {
    if (g_wgmma) {
      using PF = ConvPatchFwd<G>;
      using PD = ConvPatchDgrad<G>;
      const Buf wt(B::weight_count, 99);
      launch_wgmma_weights<PF, ConvWgmmaRule<PF>>(s, w.p, wt.p);
      fwd("tf32 wgmma (sm_90a)", false,
          [&] { launch_conv_wgmma<PF, ConvWgmmaRule<PF>>(s, wt.p, b.p, x.p, y.p, n); });
      // The weights' copy: its time, no FLOPs (the TFLOP/s column reads 0).
      row(name, n, "fwd", "tf32 wgmma weights copy", false,
          time_us(s, [&] { launch_wgmma_weights<PF, ConvWgmmaRule<PF>>(s, w.p, wt.p); }), 0, tp);
      launch_wgmma_weights<PD, ConvWgmmaRule<PD>>(s, w.p, wt.p);
      dgr("tf32 wgmma (sm_90a)", false,
          [&] { launch_conv_wgmma<PD, ConvWgmmaRule<PD>>(s, wt.p, nullptr, dy.p, dx.p, n); });
      row(name, n, "dgrad", "tf32 wgmma weights copy", false,
          time_us(s, [&] { launch_wgmma_weights<PD, ConvWgmmaRule<PD>>(s, w.p, wt.p); }), 0, tp);
      if constexpr (conv_wgmma_wgrad_fits<G>())
        wgr("tf32 wgmma (sm_90a) + sum", conv_wgmma_wgrad_chosen<G>(n),
            [&] { launch_conv_wgmma_wgrad_auto<G>(s, x.p, dy.p, ctx.workspace, dw.p, db.p, n); });
    }
  }
  // The stride-2 forward on wgmma (parity-staged patch), which a network's TF32 rule takes: the rule's tile
  // (all channels a block, or 64 where that leaves SMs idle) and tiles beside it.
  if constexpr (conv_wgmma_s2_fits<G>()) {
    if (g_wgmma) {
      using P2 = ConvWgmmaFwdS2<G>;
      const Buf wt(B::weight_count, 99);
      launch_wgmma_weights<P2, ConvWgmmaS2Rule<G>>(s, w.p, wt.p);
      const bool split = conv_wgmma_s2_split<G>(n);
      fwd(split ? "tf32 wgmma s2, all ch" : "tf32 wgmma s2 (network rule)", false, [&] { launch_conv_wgmma<P2, ConvWgmmaS2Rule<G>>(s, wt.p, b.p, x.p, y.p, n); });
      if constexpr (G::Out > 64)
        fwd(split ? "tf32 wgmma s2 64 ch (network rule)" : "tf32 wgmma s2, 64 ch a block", false,
            [&] { launch_conv_wgmma<P2, ConvWgmmaS2Split<G>>(s, wt.p, b.p, x.p, y.p, n); });
      if constexpr (G::OW == 16) {
        fwd("tf32 wgmma s2, 1 warpgroup", false,
            [&] { launch_conv_wgmma<P2, ConvWgmmaTile<P2, 8, 1, 8>>(s, wt.p, b.p, x.p, y.p, n); });
        fwd("tf32 wgmma s2, 16 rows 4 wg", false,
            [&] { launch_conv_wgmma<P2, ConvWgmmaTile<P2, 16, 4, 8>>(s, wt.p, b.p, x.p, y.p, n); });
      }
    }
  }
  wgr(conv_patch_wgrad_mma_fits<G>() ? "tf32 rule (patch)" : "tf32 rule (gather)", true,
      [&] { Dev::template backward_weights_with<gemm>(ctx, x.p, dy.p, dw.p, db.p, n); });
  if constexpr (conv_patch_wgrad_mma_fits<G>()) {  // steps of about 32 and 128 pixels (the rule's: 64)
    static_for<2>([&](auto i) {
      constexpr int px = 32 << (2 * i);
      using T = ConvPatchWgradMma<G, px>;
      if constexpr (T::fits) {
        const std::string k = "tf32 patch " + std::to_string(px) + " px TH " + std::to_string(T::TH);
        wgr(k.c_str(), false, [&] { launch_conv_patch_wgrad_mma<G, T>(s, x.p, dy.p, ctx.workspace, dw.p, db.p, n); });
      }
    });
  }
  if constexpr (conv_patch_wgrad_mma_fits<G>()) {  // CG warps side by side over 8·CG channels, KG groups of them
    static_for<std::size(wgrad_mma_variants)>([&](auto i) {
      constexpr WgradMmaVariant v = wgrad_mma_variants[i];
      using T = ConvPatchWgradMma<G, 64, v.cg, v.kg, v.stages>;
      if constexpr (T::fits) {
        const std::string k = "tf32 patch " + std::to_string(8 * v.cg) + " ch, " + std::to_string(v.kg) + " groups, " +
                              std::to_string(v.stages) + " stages";
        wgr(k.c_str(), false, [&] { launch_conv_patch_wgrad_mma<G, T>(s, x.p, dy.p, ctx.workspace, dw.p, db.p, n); });
      }
    });
  }
  if constexpr (conv_patch_wgrad_mma_fits<G>())
    wgr("tf32 mma (gather) + sum", false,
        [&] { launch_conv_wgrad_mma<G>(s, x.p, dy.p, ctx.workspace, dw.p, db.p, n); });
}

template <class L, class In>
void bench(const char* name, std::initializer_list<int> all_batches) {
  if (std::string(name).find(g_layer) == std::string::npos) return;
  std::vector<int> batches;
  for (const int n : all_batches)
    if (g_batch == 0 || n == g_batch) batches.push_back(n);
  if (batches.empty()) return;
  using B = typename L::template bind<In>;
  using Dev = cuda_layer<L, In>;
  using G = typename Dev::dims;
  using Fwd = kernels::ConvFwdGemm<G>;
  constexpr bool fwd_direct = kernels::ConvDirect<G>::fits;
  constexpr bool dgrad_direct = kernels::conv_dgrad_direct_fits<G>();
  constexpr bool wgrad_direct = kernels::ConvWgrad<G>::fits;
  constexpr bool patch = kernels::conv_patch_fp32_fits<G>();
  constexpr auto gemm = ConvAlgo::implicit_gemm, direct = ConvAlgo::direct;
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  std::size_t ws_floats = Dev::template workspace_floats_for<gemm>(max_batch);
  if constexpr (wgrad_direct) ws_floats = std::max(ws_floats, Dev::template workspace_floats_for<direct>(max_batch));
  if constexpr (kernels::conv_patch_wgrad_fits<G>())  // the variants' splits
    ws_floats = std::max({ws_floats, kernels::ConvPatchWgrad<G, 4, 4>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, (G::S == 1 ? 8 : 4), 4, 1>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, 8, 4>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, 8, 8>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, 8, 4, 1, 4, 1024>::Splits::workspace_floats(max_batch),
                          kernels::ConvPatchWgrad<G, 8, 2, 2, 4, 1024>::Splits::workspace_floats(max_batch)});
  if constexpr (kernels::conv_patch_wgrad_mma_fits<G>()) {  // the TF32 variants' splits
    ws_floats = std::max(ws_floats, kernels::ConvPatchWgradMma<G, 32>::Splits::workspace_floats(max_batch));
    kernels::static_for<std::size(wgrad_mma_variants)>([&](auto i) {
      constexpr WgradMmaVariant v = wgrad_mma_variants[i];
      ws_floats = std::max(ws_floats,
                           kernels::ConvPatchWgradMma<G, 64, v.cg, v.kg, v.stages>::Splits::workspace_floats(max_batch));
    });
  }

  cudaStream_t s;
  CTNN_CUDA_CHECK(cudaStreamCreate(&s));
  Buf w(B::weight_count, 1), b(B::bias_count, 2), dw(B::weight_count, 3), db(B::bias_count, 4);
  Buf x(std::size_t(max_batch) * B::in_size, 5), y(std::size_t(max_batch) * B::out_size, 6);
  Buf dy(std::size_t(max_batch) * B::out_size, 7), dx(std::size_t(max_batch) * B::in_size, 8);
  Buf ws(ws_floats, 9);
  const CudaContext ctx{s, nullptr, ws.p, ws_floats};

  for (const int n : batches) {
    const double flops = double(B::flops) * n;
    const double fp = g_peak_tflops;
    auto fwd = [&](const char* k, bool chosen, auto&& f) { row(name, n, "fwd", k, chosen, time_us(s, f), flops, fp); };
    auto dgr = [&](const char* k, bool chosen, auto&& f) { row(name, n, "dgrad", k, chosen, time_us(s, f), flops, fp); };
    auto wgr = [&](const char* k, bool chosen, auto&& f) { row(name, n, "wgrad", k, chosen, time_us(s, f), flops, fp); };
    const bool fg = Dev::forward_algo == gemm, dg = Dev::dgrad_algo == gemm, wg = Dev::wgrad_algo == gemm;
    // "family rule": the implicit-GEMM family's choice (the patch kernel where it fits, else the GEMM's
    // tile and split rule); "gemm(auto tile)": the GEMM's own rule.
    constexpr bool wino = kernels::conv_winograd_fits<G>(), wino4 = kernels::conv_winograd_fits<G, 4>();
    const int wino_tile = wino ? kernels::conv_winograd_tile<G>(n) : 0;
    // The family rule's kernel: Winograd with tiles of `tile` (0: none), else a patch kernel or the GEMM.
    auto family_rule = [](int tile, bool patch_fits) {
      return tile == 4 ? "family rule (winograd 4x4)"
             : tile    ? "family rule (winograd 2x2)"
             : patch_fits ? "family rule (patch)"
                          : "family rule (gemm)";
    };
    constexpr bool fwd_s2 = kernels::conv_patch_fwd_s2_fits<G>();
    fwd(fwd_s2 ? "family rule (s2 patch)" : family_rule(wino_tile, patch), fg,
        [&] { Dev::template forward_with<gemm>(ctx, w.p, b.p, x.p, y.p, n); });
    if constexpr (wino)
      fwd("winograd F(2x2,3x3)", false, [&] { kernels::launch_conv_winograd<G>(s, w.p, b.p, x.p, y.p, n); });
    if constexpr (wino4)
      fwd("winograd F(4x4,3x3)", false, [&] { kernels::launch_conv_winograd<G, ctnn::identity_fn, 4>(s, w.p, b.p, x.p, y.p, n); });
    fwd("gemm(auto tile)", false, [&] { kernels::launch_conv_gemm_auto<Fwd>(s, w.p, b.p, x.p, y.p, n); });
    if constexpr (patch) {
      using PF = kernels::ConvPatchFwd<G>;
      fwd("patch wide 8x8", false, [&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32Wide<PF>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("patch narrow 8x4", false, [&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32Narrow<PF>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("patch narrow 8x4 ks2", false, [&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32NarrowSplit<PF>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("patch wide 8x8 ks2", false, [&] { kernels::launch_conv_patch_fp32<PF, kernels::ConvPatchF32WideSplit<PF>>(s, w.p, b.p, x.p, y.p, n); });
    }
    fwd("gemm wide 128", false, [&] {
      kernels::launch_conv_gemm<Fwd, kernels::ConvGemmWide<Fwd::M>>(s, w.p, b.p, x.p, y.p, n);
    });
    fwd("gemm narrow 64", false, [&] {
      kernels::launch_conv_gemm<Fwd, kernels::ConvGemmNarrow<Fwd::M>>(s, w.p, b.p, x.p, y.p, n);
    });
    if constexpr (kernels::conv_gemm_shaped<G>())
      for (const int k : {2, 4, 8}) {
        const std::string nk = "gemm narrow split " + std::to_string(k), wk = "gemm wide split " + std::to_string(k);
        fwd(nk.c_str(), false, [&] { kernels::launch_conv_gemm<Fwd, kernels::ConvGemmNarrow<Fwd::M>>(s, w.p, b.p, x.p, y.p, n, k); });
        fwd(wk.c_str(), false, [&] { kernels::launch_conv_gemm<Fwd, kernels::ConvGemmWide<Fwd::M>>(s, w.p, b.p, x.p, y.p, n, k); });
      }
    if constexpr (kernels::conv_patch_fwd_s2_shape<G>()) {  // TM channels × TN columns a thread (conv_patch_fwd_s2.cuh)
      using kernels::launch_conv_patch_fwd_s2, kernels::ConvPatchFwdS2;
      fwd("s2 patch 4x8", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 4, 8>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 8x4", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 8, 4>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 4x4", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 4, 4>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 2x8", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 2, 8>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 2x4", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 2, 4>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 4x8 ks2", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 4, 8, 2>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 4x8 ks2 u4 (rule)", false, [&] { launch_conv_patch_fwd_s2<G, kernels::ConvPatchFwdS2Split2<G>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 8x4 ks2", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 8, 4, 2>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 4x4 ks2", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 4, 4, 2>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 4x8 ks2 256", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 4, 8, 2, 128>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 8x4 ks2 256", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 8, 4, 2, 128>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 4x4 ks2 256", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 4, 4, 2, 128>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 8x8 ks2 256", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 8, 8, 2, 128>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 4x8 ks4 256", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 4, 8, 4, 64>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("s2 patch 8x4 ks4 256", false, [&] { launch_conv_patch_fwd_s2<G, ConvPatchFwdS2<G, 8, 4, 4, 64>>(s, w.p, b.p, x.p, y.p, n); });
    }
    if constexpr (fwd_direct)
      fwd("direct", !fg, [&] { Dev::template forward_with<direct>(ctx, w.p, b.p, x.p, y.p, n); });
    if constexpr (kernels::ConvStemMma<G>::fits) {  // the TF32 rule's kernel for this layer (% of the FP32 peak here)
      using kernels::launch_conv_stem_mma, kernels::ConvStemMmaTile;
      fwd("tf32 stem mma (TF32 rule)", false, [&] { launch_conv_stem_mma<G>(s, w.p, b.p, x.p, y.p, n); });
      fwd("tf32 stem mma, 396 blocks", false,
          [&] { launch_conv_stem_mma<G, identity_fn, ConvStemMmaTile<G, 396>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("tf32 stem mma, 792 blocks", false,
          [&] { launch_conv_stem_mma<G, identity_fn, ConvStemMmaTile<G, 792>>(s, w.p, b.p, x.p, y.p, n); });
      fwd("tf32 stem mma, 2 stages", false,
          [&] { launch_conv_stem_mma<G, identity_fn, ConvStemMmaTile<G, 264, 2>>(s, w.p, b.p, x.p, y.p, n); });
    }
    constexpr bool patch_s2 = kernels::conv_patch_dgrad_s2_fits<G>();
    constexpr bool wino_dgrad = kernels::conv_winograd_dgrad_fits<G>();
    using GD = kernels::ConvWinogradDgradDims<G>;  // the layer turned around
    const int dgrad_tile = wino_dgrad ? kernels::conv_winograd_tile<GD>(n) : 0;
    dgr(family_rule(dgrad_tile, patch || patch_s2), dg, [&] { Dev::template backward_data_with<gemm>(ctx, w.p, dy.p, dx.p, n); });
    if constexpr (wino_dgrad) {
      dgr("winograd F(2x2,3x3)", false, [&] { kernels::launch_conv_winograd_dgrad<G>(s, w.p, dy.p, nullptr, dx.p, n); });
      if constexpr (kernels::conv_winograd_fits<GD, 4>())
        dgr("winograd F(4x4,3x3)", false,
            [&] { kernels::launch_conv_winograd_dgrad<G, ctnn::identity_fn, 4>(s, w.p, dy.p, nullptr, dx.p, n); });
    }
    dgr("gemm(auto tile)", false, [&] { kernels::launch_conv_dgrad_gemm_auto<G>(s, w.p, dy.p, dx.p, n); });
    if constexpr (patch) {
      using PD = kernels::ConvPatchDgrad<G>;
      dgr("patch wide 8x8", false, [&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32Wide<PD>>(s, w.p, nullptr, dy.p, dx.p, n); });
      dgr("patch narrow 8x4", false, [&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32Narrow<PD>>(s, w.p, nullptr, dy.p, dx.p, n); });
      dgr("patch narrow 8x4 ks2", false, [&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32NarrowSplit<PD>>(s, w.p, nullptr, dy.p, dx.p, n); });
      dgr("patch wide 8x8 ks2", false, [&] { kernels::launch_conv_patch_fp32<PD, kernels::ConvPatchF32WideSplit<PD>>(s, w.p, nullptr, dy.p, dx.p, n); });
    }
    if constexpr (patch_s2) {  // TM channels × TB dy columns a thread (conv_patch_dgrad_s2.cuh)
      using kernels::launch_conv_patch_dgrad_s2, kernels::ConvPatchS2;
      dgr("s2 patch 2x8 (wide)", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 2, 8>>(s, w.p, dy.p, dx.p, n); });
      dgr("s2 patch 1x8 (narrow)", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 1, 8>>(s, w.p, dy.p, dx.p, n); });
      dgr("s2 patch 2x4", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 2, 4>>(s, w.p, dy.p, dx.p, n); });
      dgr("s2 patch 4x4", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 4, 4>>(s, w.p, dy.p, dx.p, n); });
      dgr("s2 patch 2x8 ks2", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 2, 8, 2>>(s, w.p, dy.p, dx.p, n); });
      dgr("s2 patch 1x8 ks2", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 1, 8, 2>>(s, w.p, dy.p, dx.p, n); });
      dgr("s2 patch 2x8 ks2 u2 (wide split)", false, [&] { launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2WideSplit<G>>(s, w.p, dy.p, dx.p, n); });
      dgr("s2 patch 1x8 ks2 u2 (narrow split)", false, [&] { launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2NarrowSplit<G>>(s, w.p, dy.p, dx.p, n); });
      if constexpr (G::Out % 16 == 0) {  // steps of 16 output channels (half the barriers)
        dgr("s2 patch 2x8 ks2 u2 ck16", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 2, 8, 2, 2, 16>>(s, w.p, dy.p, dx.p, n); });
        dgr("s2 patch 1x8 ks2 u2 ck16", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 1, 8, 2, 2, 16>>(s, w.p, dy.p, dx.p, n); });
      }
      if constexpr (kernels::conv_s2_row_tile<G>()) {  // whole dy rows a thread: no halo loads or products
        if constexpr (G::OW == 16)
          dgr("s2 patch 1x16 ks2 u2", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 1, 16, 2, 2>>(s, w.p, dy.p, dx.p, n); });
        dgr("s2 patch row split (rule)", false, [&] { launch_conv_patch_dgrad_s2<G, kernels::ConvPatchS2RowSplit<G>>(s, w.p, dy.p, dx.p, n); });
      }
      if constexpr (G::OW % 16 == 0)
        dgr("s2 patch 1x16", false, [&] { launch_conv_patch_dgrad_s2<G, ConvPatchS2<G, 1, 16>>(s, w.p, dy.p, dx.p, n); });
    }
    if constexpr (kernels::conv_gemm_shaped<G>())
      for (const int k : {1, 2, 4, 8}) {
        const std::string nk = "gemm narrow split " + std::to_string(k), wk = "gemm wide split " + std::to_string(k);
        dgr(nk.c_str(), false, [&] { kernels::launch_conv_dgrad_gemm<G, kernels::ConvGemmNarrow<G::C>>(s, w.p, dy.p, dx.p, n, k); });
        dgr(wk.c_str(), false, [&] { kernels::launch_conv_dgrad_gemm<G, kernels::ConvGemmWide<G::C>>(s, w.p, dy.p, dx.p, n, k); });
      }
    if constexpr (dgrad_direct)
      dgr(kernels::conv_dgrad_by_flip<G>() ? "direct (flip)" : "direct (gather)", !dg,
          [&] { Dev::template backward_data_with<direct>(ctx, w.p, dy.p, dx.p, n); });
    wgr(kernels::conv_patch_wgrad_fits<G>() ? "family rule (patch)" : "family rule (gemm)", wg,
        [&] { Dev::template backward_weights_with<gemm>(ctx, x.p, dy.p, dw.p, db.p, n); });
    wgr("gemm + sum", false, [&] { kernels::launch_conv_wgrad_gemm<G>(s, x.p, dy.p, ws.p, dw.p, db.p, n); });
    if constexpr (kernels::conv_patch_wgrad_fits<G>()) {
      wgr("patch (rule's tile) + sum", false, [&] { kernels::launch_conv_patch_wgrad<G>(s, x.p, dy.p, ws.p, dw.p, db.p, n); });
      {  // its second stage alone (the partials of the rule's tile), a column a lane and 4 a lane
        using Sp = typename kernels::ConvPatchWgradRule<G>::Splits;
        const int count = Sp::splits(n), E = Sp::E, split = G::Out * G::CKK;
        const std::string k1 = "sum alone, 1 a lane, " + std::to_string(count) + " rows";
        const std::string k4 = "sum alone, 4 a lane, " + std::to_string(count) + " rows";
        constexpr auto dep = kernels::Launch::dependent;
        wgr(k1.c_str(), false, [&] { kernels::launch_sum_partials<1>(s, ws.p, count, E, split, dw.p, db.p, dep); });
        if (E % 4 == 0)
          wgr(k4.c_str(), false, [&] { kernels::launch_sum_partials<4>(s, ws.p, count, E, split, dw.p, db.p, dep); });
      }
      wgr("patch 8 cols + sum", false, [&] {
        kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 8, 4>>(s, x.p, dy.p, ws.p, dw.p, db.p, n);
      });
      wgr("patch 4 cols + sum", false, [&] {
        kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 4, 4>>(s, x.p, dy.p, ws.p, dw.p, db.p, n);
      });
      wgr("patch one half (4 warps)", false, [&] {
        kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, (G::S == 1 ? 8 : 4), 4, 1>>(s, x.p, dy.p, ws.p, dw.p, db.p, n);
      });
      wgr("patch 8 ch a thread", false, [&] {
        kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 8, 8>>(s, x.p, dy.p, ws.p, dw.p, db.p, n);
      });
      if constexpr (G::C <= 4) {  // 4-channel lanes (RGB stems), several split counts
        kernels::static_for<5>([&](auto i) {
          constexpr int blocks = 64 << decltype(i)::value;
          const std::string k1 = "patch 4-ch lanes, " + std::to_string(blocks) + " blocks";
          const std::string k2 = "patch 4-ch lanes 2 halves TM2, " + std::to_string(blocks) + " blocks";
          wgr(k1.c_str(), false, [&] {
            kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 8, 4, 1, 4, blocks>>(s, x.p, dy.p, ws.p, dw.p, db.p, n);
          });
          wgr(k2.c_str(), false, [&] {
            kernels::launch_conv_patch_wgrad<G, kernels::ConvPatchWgrad<G, 8, 2, 2, 4, blocks>>(s, x.p, dy.p, ws.p, dw.p, db.p, n);
          });
        });
      }
    }
    if constexpr (wgrad_direct)
      wgr("direct + sum", !wg, [&] { Dev::template backward_weights_with<direct>(ctx, x.p, dy.p, dw.p, db.p, n); });
    if constexpr (kernels::conv_gemm_shaped<G>()) tf32_rows<L, In>(name, n, ctx, w, b, x, y, dy, dx, dw, db);
  }
  CTNN_CUDA_CHECK(cudaStreamDestroy(s));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) g_samples = std::max(1, std::atoi(argv[1]));
  if (argc > 2) g_reps = std::max(1, std::atoi(argv[2]));
  if (argc > 3) g_layer = argv[3];
  if (argc > 4) g_batch = std::atoi(argv[4]);
  print_device();
  g_wgmma = kernels::conv_wgmma_available();
  std::printf("median of %d samples of %d calls; * = the kernel the rule picks; wgmma rows: %s\n", g_samples, g_reps,
              g_wgmma ? "yes (sm_90a device code)" : "no (needs sm_90a device code on a Hopper GPU)");
  std::printf("%-26s %5s  %-8s %-20s %c %9s %8s %8s %7s\n", "layer", "batch", "dir", "kernel", ' ', "us", "GFLOP",
              "TFLOP/s", "peak");
  // LeNet-5 (MNIST).
  bench<Conv<6, 5, Pad<2>>, Shape<1, 28, 28>>("lenet conv1 1->6 5x5 28", {64, 256});
  bench<Conv<16, 5>, Shape<6, 14, 14>>("lenet conv2 6->16 5x5 14", {64, 256});
  // CIFAR-sized layers (3×32×32 input, 3×3 pad 1).
  bench<Conv<32, 3, Pad<1>>, Shape<3, 32, 32>>("cifar 3->32 @32", {64, 256});
  bench<Conv<32, 3, Pad<1>>, Shape<32, 32, 32>>("cifar 32->32 @32", {64, 256});
  bench<Conv<64, 3, Stride<2>, Pad<1>>, Shape<32, 32, 32>>("cifar 32->64 s2 @32", {64, 256});
  bench<Conv<64, 3, Pad<1>>, Shape<32, 16, 16>>("cifar 32->64 @16", {64, 256});
  bench<Conv<64, 3, Pad<1>>, Shape<64, 16, 16>>("cifar 64->64 @16", {64, 256});
  bench<Conv<64, 3, Stride<2>, Pad<1>>, Shape<64, 16, 16>>("cifar 64->64 s2 @16", {64, 256});
  bench<Conv<128, 3, Stride<2>, Pad<1>>, Shape<64, 16, 16>>("cifar 64->128 s2 @16", {64, 256});
  bench<Conv<64, 3, Pad<1>>, Shape<64, 8, 8>>("cifar 64->64 @8", {64, 256});
  return 0;
}
