#pragma once
// Conv on the device: cuda_layer<Conv<...>, In>, which picks for each direction (forward, backward
// data, backward weights) between the direct kernels of conv_direct.cuh (narrow layers) and the
// implicit-GEMM kernels of conv_gemm.cuh (layers with >= 16 input and output channels), at compile
// time from the layer's dimensions. In FP32 the implicit-GEMM family runs stride-1 "same" layers from a
// staged input patch (conv_patch_fp32.cuh; forward and backward data with the GEMM's bits), and the
// forward of 3×3 stride-1 layers at batches that fill the GPU by Winograd's F(2×2, 3×3) (conv_winograd.cuh).
// With ctx.math == Math::tf32 the implicit GEMMs run on the TF32 tensor cores (conv_mma.cuh; the same
// layers from a staged patch, conv_patch.cuh, where its rule picks it; the stride-1 3×3 layers of 32 or
// 64 channels on Hopper's wgmma, conv_wgmma.cuh, where the program has sm_90a device code and ctx the
// weights' TF32 copies, as a CudaNetwork's does, and there the weight gradient of those with 64 output
// channels too, conv_wgmma_wgrad.cuh, and the forward of stride-2 3×3 layers, conv_wgmma.cuh's
// ConvWgmmaFwdS2), and the forward of RGB stems (C <= 4) on conv_stem_mma.cuh's kernel; the other direct
// kernels stay FP32. In a network's TF32 backward the stem's weight gradient can run in the epilogue of
// the patch kernel that computes the next layer's backward data (conv_stem_wgrad_epilogue.cuh,
// backward_data_act_stem_wgrad).
// All of them are deterministic (no float atomics).
//
// Layouts as on the host (layers/conv.hpp): x [batch][C][H][W], y [batch][Out][OH][OW],
// w [Out][C][K][K], b [Out].
#include <cstddef>
#include <stdexcept>
#include <string>

#include "../core/cuda_context.hpp"
#include "../layers/conv.hpp"
#include "conv_direct.cuh"
#include "conv_gemm.cuh"
#include "conv_mma.cuh"
#include "conv_patch.cuh"
#include "conv_patch_fp32.cuh"
#include "conv_patch_wgrad_mma.cuh"
#include "conv_stem_mma.cuh"
#include "conv_wgmma.cuh"
#include "conv_wgmma_wgrad.cuh"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn {

// A Conv kernel family: `automatic` applies the rule below; the other two force one (tests and
// benchmarks compare them through cuda_layer<Conv...>::forward_with<Algo> and the like).
enum class ConvAlgo { automatic, direct, implicit_gemm };

namespace kernels {

// The rule, the same for the three directions: implicit GEMM when both channel counts are at least
// 16 (the GEMM's M is Out, or C for backward data, and a tile has 32 or 64 rows; its k is C·K·K or
// Out·K·K), or when the direct kernel's tiles do not fit in shared memory; the direct kernels
// otherwise. LeNet-5's convolutions (1 → 6 and 6 → 16 channels) stay direct: there a GEMM tile is
// mostly padding, while the direct kernel reuses each staged input value for all output channels.
// The measurements behind the threshold are in docs/conv_kernels.md.
template <class G>
constexpr bool conv_gemm_shaped() {
  return G::C >= 16 && G::Out >= 16;
}
template <class G>
constexpr ConvAlgo conv_forward_rule() {
  return conv_gemm_shaped<G>() || !ConvDirect<G>::fits ? ConvAlgo::implicit_gemm : ConvAlgo::direct;
}
template <class G>
constexpr bool conv_dgrad_direct_fits() {
  return conv_dgrad_by_flip<G>() || ConvDgrad<G>::ob >= 1;
}
template <class G>
constexpr ConvAlgo conv_dgrad_rule() {
  return conv_gemm_shaped<G>() || !conv_dgrad_direct_fits<G>() ? ConvAlgo::implicit_gemm : ConvAlgo::direct;
}
// The weight gradient also takes the implicit-GEMM family wherever the FP32 staged-patch kernel runs
// the layer (conv_patch_fp32.cuh), narrow layers such as an RGB stem included: it was faster than the
// direct kernel there (docs/conv_kernels.md).
template <class G>
constexpr ConvAlgo conv_wgrad_rule() {
  return conv_gemm_shaped<G>() || !ConvWgrad<G>::fits || conv_patch_wgrad_fits<G>() ? ConvAlgo::implicit_gemm
                                                                                     : ConvAlgo::direct;
}

}  // namespace kernels

// ---------------------------------------------------------------------------------------------------
template <int Out, int K, class... Opts, class In>
struct cuda_layer<Conv<Out, K, Opts...>, In> {
  using layer = Conv<Out, K, Opts...>;
  using bound = typename layer::template bind<In>;
  using dims = kernels::ConvDims<bound::C, bound::H, bound::W, Out, K, layer::stride, layer::pad,
                                 layer::dilation>;
  static_assert(dims::OH == bound::OH && dims::OW == bound::OW, "device and host agree on the shape");

  static constexpr ConvAlgo forward_algo = kernels::conv_forward_rule<dims>();
  static constexpr ConvAlgo dgrad_algo = kernels::conv_dgrad_rule<dims>();
  static constexpr ConvAlgo wgrad_algo = kernels::conv_wgrad_rule<dims>();

  // Whether the TF32 forward runs the RGB stem kernel (conv_stem_mma.cuh) where the rule is direct.
  static constexpr bool has_stem_mma = forward_algo == ConvAlgo::direct && kernels::ConvStemMma<dims>::fits;

  // Whether TF32 forward and backward data (stride 1), or the forward alone (stride 2), can run on the
  // wgmma kernels (conv_wgmma.cuh), reading the TF32 copies of the weights that a network keeps in ctx
  // (CudaNetwork makes them: wgmma_jobs).
  static constexpr bool has_wgmma = kernels::conv_wgmma_fits<dims>() || kernels::conv_wgmma_s2_fits<dims>();
  // The two copies of w: forward layout into fwd, backward-data layout into dgrad (M·C·K·K floats each;
  // a stride-2 layer has no backward-data copy: an empty job).
  static void wgmma_jobs(const float* w, float* fwd, float* dgrad, kernels::WgmmaWeightsJob (&jobs)[2]) {
    if constexpr (kernels::conv_wgmma_s2_fits<dims>()) {
      using F = kernels::ConvWgmmaFwdS2<dims>;
      jobs[0] = kernels::wgmma_weights_job<F, kernels::ConvWgmmaS2Rule<dims>>(w, fwd);
      jobs[1] = {w, dgrad, 0, 0, 8, true};
    } else {
      using F = kernels::ConvPatchFwd<dims>;
      using D = kernels::ConvPatchDgrad<dims>;
      jobs[0] = kernels::wgmma_weights_job<F, kernels::ConvWgmmaRule<F>>(w, fwd);
      jobs[1] = kernels::wgmma_weights_job<D, kernels::ConvWgmmaRule<D>>(w, dgrad);
    }
  }

  // Stage-1 partials of the weight-gradient reduction of the given family (for the implicit GEMM:
  // enough for its FP32 and its TF32 kernels, the math being chosen at run time).
  template <ConvAlgo Algo>
  static constexpr std::size_t workspace_floats_for(int max_batch) {
    constexpr ConvAlgo algo = Algo == ConvAlgo::automatic ? wgrad_algo : Algo;
    if constexpr (algo == ConvAlgo::direct) return kernels::ConvWgrad<dims>::workspace_floats(max_batch);
    else
      return kernels::max_of(
          kernels::max_of(kernels::ConvWgradGemm<dims>::workspace_floats(max_batch),
                          kernels::ConvWgradMma<dims>::workspace_floats(max_batch)),
          kernels::max_of(kernels::max_of(kernels::conv_patch_wgrad_workspace_floats<dims>(max_batch),
                                          kernels::conv_patch_wgrad_mma_workspace_floats<dims>(max_batch)),
                          kernels::conv_wgmma_wgrad_workspace_floats<dims>(max_batch)));
  }
  static constexpr std::size_t workspace_floats(int max_batch) {
    return workspace_floats_for<ConvAlgo::automatic>(max_batch);
  }

  // y = Fn(the forward) by the kernel family Algo (automatic: the rule's; benchmarks name one), Fn the
  // element-wise activation that follows the layer applied in the store (every kernel has that
  // epilogue; the same bits as the forward then the activation's kernel; identity_fn: none).
  template <ConvAlgo Algo, class Fn = identity_fn>
  static void forward_with(const CudaContext& ctx, const float* w, const float* b, const float* x,
                           float* y, int batch) {
    kernels::check_batch(batch, "Conv forward");
    constexpr ConvAlgo algo = Algo == ConvAlgo::automatic ? forward_algo : Algo;
    if constexpr (algo == ConvAlgo::direct) {
      if (Algo == ConvAlgo::automatic && ctx.math == Math::tf32 &&
          kernels::launch_conv_stem_mma<dims, Fn>(ctx.stream, w, b, x, y, batch))
        return;
      using Cfg = kernels::ConvDirect<dims>;
      const unsigned grid = kernels::grid_for(std::size_t(batch) * Cfg::tiles, 1);
      kernels::kernel_conv_forward_direct<dims, false, Fn><<<grid, Cfg::threads, 0, ctx.stream>>>(w, b, x, y);
      CTNN_CHECK_LAUNCH();
    } else if (ctx.math == Math::tf32) {
      if (!kernels::launch_conv_wgmma_rule<dims, false, Fn>(ctx, w, b, x, y, batch))
        kernels::launch_conv_tf32_forward<dims, Fn>(ctx.stream, w, b, x, y, batch);
    } else {
      kernels::launch_conv_fp32_forward_act<dims, Fn>(ctx.stream, w, b, x, y, batch);
    }
  }

  static void forward(const CudaContext& ctx, const float* w, const float* b, const float* x, float* y,
                      int batch) {
    forward_with<ConvAlgo::automatic>(ctx, w, b, x, y, batch);
  }

  // The rule's forward with the activation Fn in its store: the network's layer-by-layer forward calls
  // it for a convolution followed by an activation.
  template <class Fn>
  static void forward_act(const CudaContext& ctx, const float* w, const float* b, const float* x, float* y,
                          int batch) {
    forward_with<ConvAlgo::automatic, Fn>(ctx, w, b, x, y, batch);
  }

  // dx from dy and w.
  template <ConvAlgo Algo>
  static void backward_data_with(const CudaContext& ctx, const float* w, const float* dy, float* dx,
                                 int batch) {
    kernels::check_batch(batch, "Conv backward");
    constexpr ConvAlgo algo = Algo == ConvAlgo::automatic ? dgrad_algo : Algo;
    if constexpr (algo == ConvAlgo::implicit_gemm) {
      if (ctx.math == Math::tf32) {
        if (!kernels::launch_conv_wgmma_rule<dims, true>(ctx, w, nullptr, dy, dx, batch))
          kernels::launch_conv_tf32_dgrad<dims>(ctx.stream, w, dy, dx, batch);
      } else kernels::launch_conv_fp32_dgrad<dims>(ctx.stream, w, dy, dx, batch);
    } else if constexpr (kernels::conv_dgrad_by_flip<dims>()) {
      using DG = kernels::ConvDgradDims<dims>;
      using Cfg = kernels::ConvDirectFlipped<DG>;
      const unsigned grid = kernels::grid_for(std::size_t(batch) * Cfg::tiles, 1);
      kernels::kernel_conv_forward_direct<DG, true><<<grid, Cfg::threads, 0, ctx.stream>>>(w, nullptr, dy, dx);
      CTNN_CHECK_LAUNCH();
    } else {
      using Dg = kernels::ConvDgrad<dims>;
      const unsigned grid = kernels::grid_for(std::size_t(batch) * Dg::c_tiles * Dg::r_tiles, 1);
      kernels::kernel_conv_backward_data<dims><<<grid, Dg::threads, 0, ctx.stream>>>(w, dy, dx);
      CTNN_CHECK_LAUNCH();
    }
  }

  // dx = dy back through the layer, times Fn'(x): the backward of the activation Fn below the layer
  // (whose output x, the layer's input, is) folded into the store, where the rule's kernel has that
  // epilogue (the staged-patch kernels); false, having launched nothing, elsewhere. The network's fused
  // backward calls it for an activation followed by a convolution.
  static constexpr bool has_backward_data_act = dgrad_algo == ConvAlgo::implicit_gemm;
  template <class Fn>
  static bool backward_data_act(const CudaContext& ctx, const float* w, const float* x, const float* dy, float* dx,
                                int batch) {
    kernels::check_batch(batch, "Conv backward");
    if constexpr (dgrad_algo != ConvAlgo::implicit_gemm) return false;
    else if (ctx.math == Math::tf32)
      return kernels::launch_conv_wgmma_rule<dims, true, Fn>(ctx, w, x, dy, dx, batch) ||
             kernels::launch_conv_tf32_dgrad_act<dims, Fn>(ctx.stream, w, dy, x, dx, batch);
    else return kernels::launch_conv_fp32_dgrad_act<dims, Fn>(ctx.stream, w, dy, x, dx, batch);
  }

  // The same, where the layer below the activation Fn is the network's RGB stem (layer 0, dims G0, its
  // input x0): the stem's weight gradient (dw0, db0) computed in this backward data's epilogue, through
  // ctx.workspace (stem_wgrad_workspace_floats<G0>(batch) floats), and no dx, which nothing reads then
  // (kernels/conv_stem_wgrad_epilogue.cuh). TF32 only; false, having launched nothing, elsewhere.
  template <class G0>
  static constexpr bool has_stem_wgrad_below =
      dgrad_algo == ConvAlgo::implicit_gemm && kernels::conv_stem_wgrad_fits<dims, G0>();
  template <class G0>
  static constexpr std::size_t stem_wgrad_workspace_floats(int max_batch) {
    return kernels::conv_stem_wgrad_workspace_floats<dims, G0>(max_batch);
  }
  template <class G0, class Fn>
  static bool backward_data_act_stem_wgrad(const CudaContext& ctx, const float* w, const float* x, const float* dy,
                                           const float* x0, float* dw0, float* db0, int batch) {
    if constexpr (!has_stem_wgrad_below<G0>) return false;
    else {
      kernels::check_batch(batch, "Conv backward");
      if (ctx.math != Math::tf32 || !kernels::conv_patch_fp32_aligned(w, dy, x) ||
          !kernels::aligned_to(ctx.workspace, 16))
        return false;
      kernels::check_workspace(ctx, stem_wgrad_workspace_floats<G0>(batch), "Conv backward", batch);
      kernels::launch_conv_dgrad_stem_wgrad<dims, G0, Fn>(ctx.stream, w, x, dy, x0, ctx.workspace, dw0, db0, batch);
      return true;
    }
  }

  // dw and db from x and dy, through ctx.workspace (workspace_floats_for<Algo>(batch) floats).
  template <ConvAlgo Algo>
  static void backward_weights_with(const CudaContext& ctx, const float* x, const float* dy, float* dw,
                                    float* db, int batch) {
    kernels::check_batch(batch, "Conv backward");
    constexpr ConvAlgo algo = Algo == ConvAlgo::automatic ? wgrad_algo : Algo;
    kernels::check_workspace(ctx, workspace_floats_for<algo>(batch), "Conv backward", batch);
    if constexpr (algo == ConvAlgo::implicit_gemm) {
      if (ctx.math == Math::tf32) {
        if (!kernels::launch_conv_wgmma_wgrad_rule<dims>(ctx, x, dy, dw, db, batch))
          kernels::launch_conv_tf32_wgrad<dims>(ctx.stream, x, dy, ctx.workspace, dw, db, batch);
      } else kernels::launch_conv_fp32_wgrad<dims>(ctx.stream, x, dy, ctx.workspace, dw, db, batch);
    } else {
      using Wg = kernels::ConvWgrad<dims>;
      if (Wg::units(batch) > 0x7fffffffLL)
        throw std::invalid_argument("ctnn: Conv backward: batch " + std::to_string(batch) + " is too large");
      const int nb = Wg::partials(batch);
      kernels::kernel_conv_backward_weights<dims>
          <<<unsigned(nb), Wg::threads, 0, ctx.stream>>>(x, dy, ctx.workspace, int(Wg::units(batch)));
      CTNN_CHECK_LAUNCH();
      kernels::sum_partials(ctx.stream, ctx.workspace, nb, Wg::E, Out * dims::CKK, dw, db);
    }
  }

  static void backward(const CudaContext& ctx, const float* w, const float* x, const float* /*y*/,
                       const float* dy, float* dx, float* dw, float* db, int batch) {
    backward_weights_with<ConvAlgo::automatic>(ctx, x, dy, dw, db, batch);
    if (dx) backward_data_with<ConvAlgo::automatic>(ctx, w, dy, dx, batch);
  }
};

}  // namespace ctnn
