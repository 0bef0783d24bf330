#pragma once
// A conv group on the device (network/fusion.hpp): Conv, then an element-wise activation Fn
// (identity_fn when none), then a pooling P whose windows tile its input (NoPool when none), run by
// the direct convolution kernels (conv_direct.cuh) with hooks:
//
//   forward          one kernel; a thread computes a whole pooling window of pixels, then bias,
//                    activation and pooling in registers (ConvGroupStore). Training keeps what
//                    backward needs: for max pooling the position of each window's maximum (one byte
//                    per pooled output), for average pooling after an activation the activation's
//                    output; nothing otherwise (the activation's derivative is taken from its output).
//   backward         the weight-gradient kernel with the bias gradient as one more column, and the
//                    input-gradient kernel. After a max pooling the weight gradient sums only each
//                    window's maximum (conv_pooled_wgrad.cuh), its batch reduction a dependent
//                    sum_partials launch; else the dense kernel finishes it in the same kernel
//                    (finish_splits, kernels/reduce.cuh). The input gradient is a GEMM into columns
//                    and col2im where that fits (conv_dgrad_cols.cuh), else the flipped forward or
//                    the gather. They stage the convolution's output gradient through ConvGroupGrad,
//                    which computes it from the gradient at the group's output while loading: the
//                    pooling's backward (the window's gradient to its maximum, or spread over the
//                    window) and the activation's derivative.
//
// Every value is computed as the layers compute it one by one: the convolution's sums in the same
// order (the forward's bits equal cuda_layer<Conv>'s), the activation and pooling with the host
// reference's own functions. A group the direct kernels cannot run (a convolution wide enough for the
// implicit GEMM, windows of more than 256 pixels) reports supported = false and runs as layers.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../core/cuda_context.hpp"
#include "../layers/activation.hpp"
#include "../layers/conv.hpp"
#include "../layers/pool.hpp"
#include "conv.cuh"
#include "conv_dgrad_cols.cuh"
#include "conv_direct.cuh"
#include "conv_pooled_wgrad.cuh"
#include "data.cuh"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn {
namespace kernels {

// The pooling of a conv group: none, or Kind over K × K windows with stride K and no padding.
struct NoPool {
  static constexpr bool pooled = false;
  static constexpr PoolKind kind = PoolKind::max;  // (unused)
  static constexpr int k = 1;
};
template <PoolKind Kind, int K>
struct TilePool {
  static constexpr bool pooled = true;
  static constexpr PoolKind kind = Kind;
  static constexpr int k = K;
};

// The group's integers: G (the convolution, conv_direct.cuh) and the pooled output QH × QW.
template <class G, class Fn, class P>
struct ConvGroupDims {
  static constexpr int PQ = P::k, QH = G::OH / PQ, QW = G::OW / PQ;
  static constexpr bool act = !std::is_same_v<Fn, identity_fn>;
  enum class Keep { nothing, argmax, activation };
  // What a training forward keeps for backward, in the slot of the pooling's input.
  static constexpr Keep keep = !P::pooled                                   ? Keep::nothing
                               : P::kind == PoolKind::max                   ? Keep::argmax
                               : act                                        ? Keep::activation
                                                                            : Keep::nothing;
};

// The forward's epilogue: bias is in acc already; activation, pooling, stores.
template <class G, class Fn, class P>
struct ConvGroupStore {
  using D = ConvGroupDims<G, Fn, P>;
  float* y;     // [batch][Out][QH][QW]: the group's output
  void* keep;   // null (evaluation), or uint8 [batch][Out][QH][QW] (argmax) / float [batch][Out][OH][OW]

  template <int OCPT>
  __device__ void operator()(std::size_t n, int o0, int qy, int qx, const float (&acc)[P::k * P::k][OCPT]) const {
    constexpr int PQ = P::k;
#pragma unroll
    for (int j = 0; j < OCPT; ++j) {
      const int o = o0 + j;
      if (o >= G::Out) continue;
      const std::size_t q = ((n * G::Out + o) * D::QH + qy) * D::QW + qx;
      if constexpr (!P::pooled) {
        y[q] = Fn::apply(acc[0][j]);
      } else if constexpr (P::kind == PoolKind::max) {
        int best = 0;  // the first maximum in row-major order, as the host's pooling
        float top = Fn::apply(acc[0][j]);
#pragma unroll
        for (int p = 1; p < PQ * PQ; ++p) {
          const float v = Fn::apply(acc[p][j]);
          if (v > top) best = p, top = v;
        }
        y[q] = top;
        if (keep) static_cast<std::uint8_t*>(keep)[q] = std::uint8_t(best);
      } else {
        float sum = 0.f;
#pragma unroll
        for (int p = 0; p < PQ * PQ; ++p) {
          const float v = Fn::apply(acc[p][j]);
          sum += v;
          if constexpr (D::keep == D::Keep::activation)
            if (keep)
              static_cast<float*>(keep)[((n * G::Out + o) * G::OH + qy * PQ + p / PQ) * G::OW + qx * PQ + p % PQ] = v;
        }
        y[q] = sum / float(PQ * PQ);
      }
    }
  }
  // RX neighbouring pixels of a row, without pooling (ConvDirect::rx).
  template <int RX, int OCPT>
  __device__ void row(std::size_t n, int o0, int oy, int x0, const float (&acc)[RX][OCPT]) const {
    static_assert(!P::pooled, "rows of pixels are stored only where no pooling follows");
    store_pixel_row<G, Fn>(y, n, o0, oy, x0, acc);
  }
};

// The gradient at the convolution's output, element (n, o, oy, ox), from the gradient dy at the
// group's output: the pooling's and the activation's backward, as the host computes them one by one.
template <class G, class Fn, class P>
struct ConvGroupGrad {
  using D = ConvGroupDims<G, Fn, P>;
  const float* dy;    // [batch][Out][QH][QW]
  const float* y;     // the group's output, same shape (the activation's derivative is taken from it)
  const void* keep;   // what the training forward kept

  // Max-pooling windows that tile the convolution's output: a loader of whole windows (window_at,
  // window_grad), which the weight gradient and the backward data stage by (stage_windows).
  static constexpr int window = P::pooled && P::kind == PoolKind::max && G::OH % P::k == 0 && G::OW % P::k == 0
                                    ? P::k
                                    : 0;
  struct Window {
    int at;          // the position of its maximum in the window, row-major
    float d, top;    // the gradient at its pooled output, and that output (for the activation's derivative)
  };
  __device__ Window window_at(std::size_t n, int o, int qy, int qx) const {
    return window_at(((n * G::Out + o) * D::QH + qy) * D::QW + qx);
  }
  __device__ Window window_at(std::size_t q) const {  // q: the window's index in dy
    return {static_cast<const std::uint8_t*>(keep)[q], dy[q], D::act ? y[q] : 0.f};
  }
  // The gradient at the window's maximum (every other position's is 0): operator()'s value there.
  __device__ static float window_grad(const Window& v) {
    return D::act ? (0.f + v.d) * Fn::derivative(v.top) : 0.f + v.d;
  }

  __device__ float operator()(std::size_t n, int o, int oy, int ox) const {
    constexpr int PQ = P::k;
    if constexpr (!P::pooled) {
      const std::size_t i = ((n * G::Out + o) * G::OH + oy) * G::OW + ox;
      return D::act ? dy[i] * Fn::derivative(y[i]) : dy[i];
    } else {
      const int qy = oy / PQ, qx = ox / PQ;
      if (qy >= D::QH || qx >= D::QW) return 0.f;  // in no window
      if constexpr (P::kind == PoolKind::max) {
        // Three independent loads, then the choice: one memory round trip per element.
        const Window v = window_at(n, o, qy, qx);
        return v.at == (oy - qy * PQ) * PQ + (ox - qx * PQ) ? window_grad(v) : 0.f;
      } else {
        const std::size_t q = ((n * G::Out + o) * D::QH + qy) * D::QW + qx;
        const float g = 0.f + dy[q] / float(PQ * PQ);
        if constexpr (!D::act) return g;
        else return g * Fn::derivative(static_cast<const float*>(keep)[((n * G::Out + o) * G::OH + oy) * G::OW + ox]);
      }
    }
  }
};

// Blocks from conv_blocks on run the Load's own blocks (GatherLoad: the step's gather) instead.
template <class G, int PQ, bool Narrow, class Store, class Load>
__global__ void __launch_bounds__(ConvDirect<G, PQ, false, Narrow>::threads)
kernel_conv_group_forward(const float* __restrict__ w,  // [Out][C][K][K]
                          const float* __restrict__ b,  // [Out]
                          Load x,                       // the input: PlainLoad, or GatherLoad (data.cuh)
                          Store st,                     // ConvGroupStore
                          unsigned conv_blocks)
{
  wait_for_prior_grids();  // (launched dependent: see launch.cuh)
  if (blockIdx.x >= conv_blocks) return x.extra(blockIdx.x - conv_blocks);  // (uniform over the block)
  conv_forward_direct_block<G, false, PQ, decltype(x.bind()), Store, Narrow>(w, b, x.bind(), st);
}

// Backward data, stride 1 (the flipped forward, DG = ConvDgradDims<G>) or any stride (the gather).
template <class DG, class Load>
__global__ void __launch_bounds__(ConvDirectFlipped<DG>::threads)
kernel_conv_group_dgrad_flip(const float* __restrict__ w,  // the layer's [Out][C][K][K]
                             Load ld,                      // ConvGroupGrad
                             float* __restrict__ dx)       // [batch][C][H][W]
{
  wait_for_prior_grids();
  conv_forward_direct_block<DG, true, 1>(w, nullptr, ld, PlainStore<DG>{dx});
}
template <class G, class Load>
__global__ void __launch_bounds__(ConvDgradCols<G>::threads)
kernel_conv_group_dgrad_cols(const float* __restrict__ w, Load ld, float* __restrict__ dx) {
  wait_for_prior_grids();
  conv_dgrad_cols_block<G>(w, ld, dx);
}
template <class G, class Load>
__global__ void __launch_bounds__(ConvDgrad<G>::threads)
kernel_conv_group_dgrad_gather(const float* __restrict__ w, Load ld, float* __restrict__ dx) {
  wait_for_prior_grids();
  conv_backward_data_block<G>(w, ld, dx);
}

// Weight and bias gradients: the stage-1 blocks of conv_direct.cuh, then the sum of their partials
// finished by the blocks themselves (finish_splits, kernels/reduce.cuh).
template <class G, class Load>
__global__ void __launch_bounds__(ConvWgrad<G>::threads, ConvWgrad<G>::min_blocks)
kernel_conv_group_wgrad(const float* __restrict__ x,  // [batch][C][H][W]
                        Load ld,                      // ConvGroupGrad
                        float* __restrict__ partials,  // [gridDim.x][E]
                        float* __restrict__ group_sums,  // [groups][E]
                        unsigned* __restrict__ tickets,  // group_tickets(gridDim.x)
                        int units,
                        float* __restrict__ dw,  // [Out][C·K·K]
                        float* __restrict__ db)  // [Out]
{
  constexpr int E = ConvWgrad<G>::E, W = G::Out * G::CKK;
  wait_for_prior_grids();
  conv_backward_weights_block<G>(PlainLoad<G::C, G::H, G::W>{x}, ld, partials, units);
  finish_splits(
      partials, group_sums, tickets, E, int(blockIdx.x), int(gridDim.x), E, [](int e) { return e; },
      [&](int col, float v) {
        if (col < W) dw[col] = v;
        else db[col - W] = v;
      });
}

// The same after max pooling of PQ × PQ windows: only each window's maximum (conv_pooled_wgrad.cuh).
// It writes the partials only: a sum_partials launch adds them. (Finished in the kernel, the two levels
// of tickets and sums of finish_splits made LeNet-5's conv2 weight gradient 20.7 µs at batch 256
// instead of 7.6 + 3.3; H100, 2026-11-27.)
template <class G, int PQ, class Grad>
__global__ void __launch_bounds__(ConvPooledWgrad<G, PQ>::threads, ConvPooledWgrad<G, PQ>::min_blocks)
kernel_conv_group_wgrad_pooled(const float* __restrict__ x, Grad ld, float* __restrict__ partials, int batch) {
  wait_for_prior_grids();
  conv_pooled_wgrad_block<G, PQ>(x, ld, partials, batch);
}

}  // namespace kernels

// The group Conv (ConvL on input In), activation Fn, pooling P on the device. Enqueue only.
template <class ConvL, class In, class Fn, class P>
struct cuda_conv_group {
  using bound = typename ConvL::template bind<In>;
  using G = kernels::ConvDims<bound::C, bound::H, bound::W, ConvL::out_channels, ConvL::kernel, ConvL::stride,
                              ConvL::pad, ConvL::dilation>;
  using D = kernels::ConvGroupDims<G, Fn, P>;
  using Fwd = kernels::ConvDirect<G, P::k>;
  // At small batches, where even the narrow forward's grid (twice the threads; the same sums, so the
  // same bits) fits the multiprocessors at a block each, the narrow one. LeNet-5's conv2 on an H100:
  // epochs 2% shorter at batch 64, equal at 128, 6-8% longer at 256 and 1,024 (2026-11-27).
  using FwdNarrow = kernels::ConvDirect<G, P::k, false, true>;
  static constexpr bool has_narrow = FwdNarrow::ocpt != Fwd::ocpt && FwdNarrow::fits;
  using Wg = kernels::ConvWgrad<G>;
  using DG = kernels::ConvDgradDims<G>;
  using Store = kernels::ConvGroupStore<G, Fn, P>;
  using Grad = kernels::ConvGroupGrad<G, Fn, P>;
  // After max pooling, the weight gradient of only each window's maximum (pixels in no window have
  // none); CTNN_POOLED_WGRAD=0 turns it off, for measuring.
  static constexpr int max_window = P::pooled && P::kind == PoolKind::max ? P::k : 0;
  using Pw = kernels::ConvPooledWgrad<G, max_window>;
#if defined(CTNN_POOLED_WGRAD) && CTNN_POOLED_WGRAD == 0
  static constexpr bool pooled_wgrad = false;
#else
  static constexpr bool pooled_wgrad = Pw::fits;
#endif
  static_assert(Pw::E == Wg::E, "the two weight-gradient kernels share the partials' layout");
  // Backward data as a GEMM into columns, then col2im (conv_dgrad_cols.cuh), where they fit;
  // CTNN_DGRAD_COLS=0 turns it off, for measuring.
#if defined(CTNN_DGRAD_COLS) && CTNN_DGRAD_COLS == 0
  static constexpr bool dgrad_by_cols = false;
#else
  static constexpr bool dgrad_by_cols = kernels::ConvDgradCols<G>::fits;
#endif
  static constexpr int wgrad_partials(int batch) { return pooled_wgrad ? Pw::partials(batch) : Wg::partials(batch); }

  // The direct kernels run this layer's forward and backward data, its weight gradient fits the direct
  // kernel, and a window's position fits in a byte.
  static constexpr bool supported = kernels::conv_forward_rule<G>() == ConvAlgo::direct &&
                                    kernels::conv_dgrad_rule<G>() == ConvAlgo::direct && Wg::fits && Fwd::fits &&
                                    P::k * P::k <= 256 && D::QH >= 1 && D::QW >= 1;
  // The smallest batch that runs the group fused (docs/fusion.md); CTNN_CONV_FUSION_MIN_BATCH
  // overrides it (for measuring).
#ifdef CTNN_CONV_FUSION_MIN_BATCH
  static constexpr int min_batch = CTNN_CONV_FUSION_MIN_BATCH;
  static constexpr int forward_min_batch = min_batch;
#else
  // Training runs the layers one by one where the layer's own weight gradient is the FP32 staged-patch
  // kernel (an RGB stem): its 2.5× faster weight gradient outweighs the activation's separate kernels
  // (CIFAR networks on an H100: epochs 3-6% faster); inference, which has no weight gradient, runs the
  // group fused (4-10% more images/s).
  static constexpr int min_batch = kernels::conv_patch_wgrad_fits<G>() ? std::numeric_limits<int>::max() : 1;
  static constexpr int forward_min_batch = 1;
#endif
  static constexpr bool keeps = D::keep != D::Keep::nothing;

  // Partials of the weight gradient, and the group sums of finish_splits; its tickets.
  static constexpr std::size_t workspace_floats(int max_batch) {
    const int splits = wgrad_partials(max_batch);
    const int rows = pooled_wgrad ? splits
                                  : splits + kernels::max_over(splits, [](int s) { return kernels::ceil_div(s, kernels::group_for(s)); });
    return std::size_t(rows) * std::size_t(Wg::E);
  }
  static constexpr std::size_t ticket_count(int max_batch) {
    if (pooled_wgrad) return 0;
    return std::size_t(kernels::max_over(wgrad_partials(max_batch), [](int s) { return kernels::group_tickets(s); }));
  }

  // y: the group's output; keep: null in evaluation, else where training keeps what backward needs.
  // The input x is read through a Load: PlainLoad (a tensor), or the dataset's samples (GatherLoad,
  // whose gather runs in blocks of the same launch).
  template <class Load>
  static void forward(const CudaContext& ctx, const float* w, const float* b, const Load& x, float* y, void* keep,
                      int batch) {
    kernels::check_batch(batch, "Conv group forward");
    if constexpr (has_narrow) {
      if (std::size_t(batch) * FwdNarrow::tiles <= kernels::sm_count()) {
        const unsigned conv_blocks = kernels::grid_for(std::size_t(batch) * FwdNarrow::tiles, 1);
        kernels::launch_dependent(kernels::kernel_conv_group_forward<G, P::k, true, Store, Load>,
                                  conv_blocks + x.extra_blocks(FwdNarrow::threads), FwdNarrow::threads, 0, ctx.stream,
                                  w, b, x, Store{y, keep}, conv_blocks);
        return;
      }
    }
    const unsigned conv_blocks = kernels::grid_for(std::size_t(batch) * Fwd::tiles, 1);
    kernels::launch_dependent(kernels::kernel_conv_group_forward<G, P::k, false, Store, Load>,
                              conv_blocks + x.extra_blocks(Fwd::threads), Fwd::threads, 0, ctx.stream, w, b, x,
                              Store{y, keep}, conv_blocks);
  }

  // From dy, the gradient at the group's output, and what forward left (y, keep): dw, db and, unless
  // null, dx.
  static void backward(const CudaContext& ctx, const float* w, const float* x, const float* y, const float* dy,
                       const void* keep, float* dx, float* dw, float* db, int batch) {
    backward_weights(ctx, x, y, dy, keep, dw, db, batch);
    if (dx) backward_data(ctx, w, y, dy, keep, dx, batch);
  }

  // dw and db, through ctx.workspace and ctx.tickets (the network runs this on its second stream,
  // beside backward_data).
  static void backward_weights(const CudaContext& ctx, const float* x, const float* y, const float* dy,
                               const void* keep, float* dw, float* db, int batch) {
    kernels::check_batch(batch, "Conv group backward");
    kernels::check_workspace(ctx, workspace_floats(batch), "Conv group backward", batch);
    if (Wg::units(batch) > 0x7fffffffLL)
      throw std::invalid_argument("ctnn: Conv group backward: batch " + std::to_string(batch) + " is too large");
    const std::size_t tickets = ticket_count(batch);
    if (tickets > 0 && (ctx.tickets == nullptr || ctx.ticket_count < tickets))
      throw std::invalid_argument("ctnn: Conv group backward needs " + std::to_string(tickets) +
                                  " tickets, but the CudaContext provides " + std::to_string(ctx.ticket_count));
    const Grad grad{dy, y, keep};
    const int splits = wgrad_partials(batch);
    if constexpr (pooled_wgrad) {
      kernels::launch_dependent(kernels::kernel_conv_group_wgrad_pooled<G, max_window, Grad>, unsigned(splits),
                                Pw::threads, 0, ctx.stream, x, grad, ctx.workspace, batch);
      kernels::sum_partials(ctx.stream, ctx.workspace, splits, Pw::E, G::Out * G::CKK, dw, db,
                            kernels::Launch::dependent);
    } else {
      kernels::launch_dependent(kernels::kernel_conv_group_wgrad<G, Grad>, unsigned(splits), Wg::threads, 0, ctx.stream,
                                x, grad, ctx.workspace, ctx.workspace + std::size_t(splits) * Wg::E, ctx.tickets,
                                int(Wg::units(batch)), dw, db);
    }
  }

  // dx; no workspace.
  static void backward_data(const CudaContext& ctx, const float* w, const float* y, const float* dy,
                            const void* keep, float* dx, int batch) {
    kernels::check_batch(batch, "Conv group backward");
    const Grad grad{dy, y, keep};
    if constexpr (dgrad_by_cols) {
      using Dc = kernels::ConvDgradCols<G>;
      kernels::launch_dependent(kernels::kernel_conv_group_dgrad_cols<G, Grad>,
                                kernels::grid_for(std::size_t(batch) * Dc::slices, 1), Dc::threads, 0, ctx.stream, w,
                                grad, dx);
    } else if constexpr (kernels::conv_dgrad_by_flip<G>()) {
      using Cfg = kernels::ConvDirectFlipped<DG>;
      const unsigned g = kernels::grid_for(std::size_t(batch) * Cfg::tiles, 1);
      kernels::launch_dependent(kernels::kernel_conv_group_dgrad_flip<DG, Grad>, g, Cfg::threads, 0, ctx.stream, w, grad,
                                dx);
    } else {
      using Dg = kernels::ConvDgrad<G>;
      const unsigned g = kernels::grid_for(std::size_t(batch) * Dg::c_tiles * Dg::r_tiles, 1);
      kernels::launch_dependent(kernels::kernel_conv_group_dgrad_gather<G, Grad>, g, Dg::threads, 0, ctx.stream, w, grad,
                                dx);
    }
  }
};

}  // namespace ctnn
