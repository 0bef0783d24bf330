#pragma once
// Conv on the device: forward (a direct tiled kernel and an implicit GEMM), backward data (a gather,
// no atomics) and backward weights + bias (a deterministic two-stage reduction).
//
// Layouts as on the host (layers/conv.hpp): x [batch][C][H][W], y [batch][Out][OH][OW],
// w [Out][C][K][K], b [Out]. Kernels are templated on ConvDims, a bag of the layer's integers, so two
// networks with the same convolution share them.
#include <cstddef>
#include <stdexcept>
#include <string>

#include "../core/cuda_context.hpp"
#include "../layers/conv.hpp"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn {

// Forward strategy of a Conv: `automatic` applies conv_forward_rule below; the other two force one
// kernel (benchmarks compare them through cuda_layer<Conv...>::forward_with<Algo>).
enum class ConvAlgo { automatic, direct, implicit_gemm };

namespace kernels {

template <int C_, int H_, int W_, int Out_, int K_, int S_, int P_, int D_>
struct ConvDims {
  static constexpr int C = C_, H = H_, W = W_, Out = Out_, K = K_, S = S_, P = P_, D = D_;
  static constexpr int KK = K * K, CKK = C * KK;        // taps per output channel
  static constexpr int span = D * (K - 1) + 1;           // extent of a dilated window
  static constexpr int OH = (H + 2 * P - span) / S + 1, OW = (W + 2 * P - span) / S + 1;
  static constexpr int OHW = OH * OW;
  static constexpr std::size_t in_size = std::size_t(C) * H * W, out_size = std::size_t(Out) * OHW;
  static constexpr bool valid = C > 0 && H > 0 && W > 0 && Out > 0 && K > 0 && S > 0 && P >= 0 &&
                                D > 0 && span <= H + 2 * P && span <= W + 2 * P;
};

// ---------------------------------------------------------------------------------------------------
// Forward, direct. A block computes `rows` output rows of one sample for all output channels. It
// stages the input rows those outputs read (zero-padded, so the inner loop has no bounds checks) and
// all the layer's weights in shared memory. Each thread computes one output pixel for `ocpt` output
// channels: per tap one input value (conflict-free: neighbouring threads read neighbouring columns)
// and `ocpt` weights (one broadcast vector load), then `ocpt` FMAs.
//
// With Flip, the same kernel computes the backward-data pass of a stride-1 convolution: dx is the
// convolution of dy, padded by D·(K−1) − P, with the kernel rotated by 180° and its input and output
// channels swapped. Then G describes that convolution (G::C = the layer's Out, G::Out = the layer's
// C), w is the layer's weight [G::C][G::Out][K][K], and there is no bias.
template <class G>
struct ConvDirect {
  static constexpr int threads = 128;
  static constexpr int ocpt = G::Out <= 8 ? G::Out : 4;  // output channels per thread
  static constexpr int groups = ceil_div(G::Out, ocpt);  // channel groups per pixel
  static constexpr int oc_padded = groups * ocpt;
  // About one (pixel, channel group) item per thread, balanced over the row tiles.
  static constexpr int rows_wanted = clamp_to(threads / (G::OW * groups), 1, G::OH);
  static constexpr int tiles = ceil_div(G::OH, rows_wanted);
  static constexpr int rows = ceil_div(G::OH, tiles);
  static constexpr int items = rows * G::OW * groups;
  static constexpr int in_rows = (rows - 1) * G::S + G::span;
  static constexpr int in_cols = (G::OW - 1) * G::S + G::span;
  static constexpr int in_floats = round_up(G::C * in_rows * in_cols, 4);
  static constexpr int w_floats = G::CKK * oc_padded;
  static constexpr int smem_floats = in_floats + w_floats + oc_padded;
  static constexpr bool fits = smem_floats <= smem_limit_floats;
};

template <class G, bool Flip = false>
__global__ void __launch_bounds__(ConvDirect<G>::threads)
kernel_conv_forward_direct(const float* __restrict__ w,  // [Out][C][K][K] ([C][Out][K][K] with Flip)
                           const float* __restrict__ b,  // [Out] (unused with Flip)
                           const float* __restrict__ x,  // [batch][C][H][W]
                           float* __restrict__ y)        // [batch][Out][OH][OW]
{
  using Cfg = ConvDirect<G>;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");
  static_assert(Cfg::fits, "ctnn: the direct convolution's input rows and weights exceed 48 KB of "
                           "shared memory; use ConvAlgo::implicit_gemm for this layer");
  static_assert(Cfg::rows >= 1 && Cfg::rows * Cfg::tiles >= G::OH, "row tiles cover the output");
  constexpr int C = G::C, H = G::H, W = G::W, K = G::K, S = G::S, D = G::D, OW = G::OW;
  constexpr int OCPT = Cfg::ocpt, IR = Cfg::in_rows, IC = Cfg::in_cols;

  __shared__ __align__(16) float in_s[Cfg::in_floats];   // (C, IR, IC), zero outside the input
  __shared__ __align__(16) float w_s[Cfg::w_floats];     // (groups, C·K·K, OCPT)
  __shared__ __align__(16) float b_s[Cfg::oc_padded];    // (groups·OCPT)

  const int tile = int(blockIdx.x % unsigned(Cfg::tiles));
  const std::size_t n = blockIdx.x / unsigned(Cfg::tiles);
  const int oy0 = tile * Cfg::rows;

  // e runs along w's memory order (o, tap = c·K·K + ky·K + kx); channels past Out are zero.
  for (int e = threadIdx.x; e < Cfg::oc_padded * G::CKK; e += Cfg::threads) {
    const int o = e / G::CKK, t = e % G::CKK;
    float v = 0.f;
    if (o < G::Out) {
      if constexpr (Flip) v = w[((t / G::KK) * G::Out + o) * G::KK + (G::KK - 1 - t % G::KK)];
      else v = w[e];
    }
    w_s[((o / OCPT) * G::CKK + t) * OCPT + o % OCPT] = v;
  }
  for (int e = threadIdx.x; e < Cfg::oc_padded; e += Cfg::threads)
    b_s[e] = !Flip && e < G::Out ? b[e] : 0.f;
  const float* xn = x + n * G::in_size;
  const int iy0 = oy0 * S - G::P;
  for (int e = threadIdx.x; e < C * IR * IC; e += Cfg::threads) {
    const int c = e / (IR * IC), r = (e / IC) % IR, col = e % IC;
    const int iy = iy0 + r, ix = col - G::P;
    in_s[e] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? xn[(c * H + iy) * W + ix] : 0.f;
  }
  __syncthreads();

  for (int item = threadIdx.x; item < Cfg::items; item += Cfg::threads) {
    const int g = item / (Cfg::rows * OW), p = item % (Cfg::rows * OW);
    const int ty = p / OW, ox = p % OW, oy = oy0 + ty;
    if (oy >= G::OH) continue;  // last tile may be short; no barrier follows
    float acc[OCPT];
    load_shared(b_s + g * OCPT, acc);
    const float* in_p = in_s + ty * S * IC + ox * S;  // top-left tap of this pixel's window
    const float* w_g = w_s + g * G::CKK * OCPT;
    for (int c = 0; c < C; ++c) {
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const float v = in_p[(c * IR + ky * D) * IC + kx * D];
          float wv[OCPT];
          load_shared(w_g + ((c * K + ky) * K + kx) * OCPT, wv);
#pragma unroll
          for (int j = 0; j < OCPT; ++j) acc[j] = fmaf(v, wv[j], acc[j]);
        }
      }
    }
    float* yo = y + (n * G::Out + g * OCPT) * G::OHW + oy * OW + ox;
#pragma unroll
    for (int j = 0; j < OCPT; ++j)
      if (g * OCPT + j < G::Out) yo[std::size_t(j) * G::OHW] = acc[j];
  }
}

// ---------------------------------------------------------------------------------------------------
// Forward, implicit GEMM. Y (Out × batch·OH·OW) = Wm (Out × C·K·K) · Xcol (C·K·K × batch·OH·OW), where
// Xcol is never stored: each k tile of it is gathered from x straight into shared memory. A block
// owns a BM × BN tile of Y; its 8 × 16 threads each hold TM × TN accumulators. Columns run over the
// whole batch, so the grid is large even for small images.
template <class G>
struct ConvGemm {
  static constexpr int threads = 128;  // 8 thread rows × 16 thread columns
  static constexpr int BM = clamp_to(pow2_at_least(G::Out), 8, 64), TM = BM / 8;
  static constexpr int BN = 64, TN = BN / 16;
  static constexpr int BK = 16;
  static constexpr int m_tiles = ceil_div(G::Out, BM);
  static constexpr int k_tiles = ceil_div(G::CKK, BK);
};

template <class G>
__global__ void __launch_bounds__(ConvGemm<G>::threads)
kernel_conv_forward_gemm(const float* __restrict__ w,  // [Out][C·K·K]
                         const float* __restrict__ b,  // [Out]
                         const float* __restrict__ x,  // [batch][C][H][W]
                         float* __restrict__ y,        // [batch][Out][OH][OW]
                         int columns)                  // batch·OH·OW
{
  using Cfg = ConvGemm<G>;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, TM = Cfg::TM, TN = Cfg::TN;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");
  static_assert(Cfg::threads == (BM / TM) * (BN / TN), "one thread per TM × TN accumulator tile");
  static_assert(Cfg::threads % BN == 0 && BK % (Cfg::threads / BN) == 0, "x tile load divides evenly");
  static_assert(BM / TM == 8 && BN / TN == 16, "thread grid is 8 × 16");

  __shared__ __align__(16) float w_s[BK][BM];  // (BK, BM): weight tile, transposed
  __shared__ __align__(16) float x_s[BK][BN];  // (BK, BN): gathered input columns

  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int q0 = blockIdx.x * BN, m0 = blockIdx.y * BM;

  // The one column this thread gathers in every k tile, decoded once.
  const int lq = threadIdx.x % BN, lk = threadIdx.x / BN;
  const int q = q0 + lq;
  const bool q_ok = q < columns;
  const int qn = q_ok ? q / G::OHW : 0, pix = q_ok ? q % G::OHW : 0;
  const int iy_base = (pix / G::OW) * G::S - G::P, ix_base = (pix % G::OW) * G::S - G::P;
  const float* xn = x + std::size_t(qn) * G::in_size;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int o = m0 + ty * TM + i;
    const float bias = o < G::Out ? b[o] : 0.f;
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = bias;
  }

  for (int kt = 0; kt < Cfg::k_tiles; ++kt) {
    const int k0 = kt * BK;
    for (int e = threadIdx.x; e < BM * BK; e += Cfg::threads) {
      const int m = e / BK, kk = e % BK, o = m0 + m, k = k0 + kk;
      w_s[kk][m] = (o < G::Out && k < G::CKK) ? w[o * G::CKK + k] : 0.f;
    }
#pragma unroll
    for (int kk = lk; kk < BK; kk += Cfg::threads / BN) {
      const int k = k0 + kk;
      float v = 0.f;
      if (q_ok && k < G::CKK) {
        const int c = k / G::KK, r = k % G::KK;
        const int iy = iy_base + (r / G::K) * G::D, ix = ix_base + (r % G::K) * G::D;
        if (iy >= 0 && iy < G::H && ix >= 0 && ix < G::W) v = xn[(c * G::H + iy) * G::W + ix];
      }
      x_s[kk][lq] = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], bv[TN];
      load_shared(&w_s[kk][ty * TM], a);
#pragma unroll
      for (int j = 0; j < TN; ++j) bv[j] = x_s[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
    }
    __syncthreads();  // the next tile overwrites w_s and x_s
  }

#pragma unroll
  for (int j = 0; j < TN; ++j) {
    const int qc = q0 + tx + 16 * j;  // strided so that a half-warp stores 16 consecutive pixels
    if (qc >= columns) continue;
    const std::size_t n = std::size_t(qc / G::OHW);
    const int p = qc % G::OHW;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int o = m0 + ty * TM + i;
      if (o < G::Out) y[(n * G::Out + o) * G::OHW + p] = acc[i][j];
    }
  }
}

// The forward strategy for a layer. Direct when its weights and input rows fit in shared memory and
// the layer is not GEMM-shaped: with fewer than 32 output channels or fewer than 64 taps per channel
// (LeNet-5's conv1: Out 6, C·K·K 25; conv2: Out 16, C·K·K 150) an implicit-GEMM tile is mostly
// padding (conv1 fills 6 of 8 rows and 25 of 32 k) and pays im2col index arithmetic per element per
// k tile, while the direct kernel reads every input value once per block from shared memory and
// reuses it for all its output channels. Wider layers (Out >= 32 and C·K·K >= 64) reuse each loaded
// value TM·TN times in registers, which the direct kernel cannot. Both orders of summation are the
// same (bias, then taps in (c, ky, kx) order), so the rule changes speed only (the tests see the same
// bits from both). Measured on an H100, µs per call at batch 64 / 256 / 1024 (CUDA-graph replay):
//   conv1  direct 3.2 / 6.2 / 18.4    implicit GEMM 6.3 / 18.1 / 63.8
//   conv2  direct 5.5 / 13.1 / 44.4   implicit GEMM 23.2 / 25.5 / 61.3
template <class G>
constexpr ConvAlgo conv_forward_rule() {
  if (!ConvDirect<G>::fits) return ConvAlgo::implicit_gemm;
  return (G::Out >= 32 && G::CKK >= 64) ? ConvAlgo::implicit_gemm : ConvAlgo::direct;
}

// ---------------------------------------------------------------------------------------------------
// Backward data: dx[n][c][iy][ix] = Σ w[o][c][ky][kx] · dy[n][o][oy][ox] over the (o, ky, kx) with
// oy·S − P + ky·D = iy and ox·S − P + kx·D = ix.
//
// Stride 1 (with P <= D·(K−1), so that the padding below is not negative): every (o, ky, kx) term
// exists once dy is zero-padded, and dx is a forward convolution of dy, with padding D·(K−1) − P and
// the kernel flipped (kernel_conv_forward_direct with Flip; each thread one input element, gathering
// over o and the taps, for several input channels at once). Other strides: the gather kernel below.
template <class G>
using ConvDgradDims = ConvDims<G::Out, G::OH, G::OW, G::C, G::K, 1, G::D * (G::K - 1) - G::P, G::D>;

template <class G>
constexpr bool conv_dgrad_by_flip() {
  if constexpr (G::S == 1 && G::P <= G::D * (G::K - 1)) {
    static_assert(ConvDgradDims<G>::OH == G::H && ConvDgradDims<G>::OW == G::W, "dx has the input's shape");
    return ConvDirect<ConvDgradDims<G>>::fits;
  } else {
    return false;
  }
}

// The gather kernel: each thread gathers for `per_thread` input elements; a block covers `rows` input
// rows of `ct` channels of one sample and stages, `ob` output channels at a time, their weights and
// the dy rows its windows reach in shared memory; the divisibility checks skip the taps that fall
// between strided outputs.
template <class G>
struct ConvDgrad {
  static constexpr int threads = 128;
  static constexpr int target = 256;  // input elements per block
  static constexpr int ct = clamp_to(target / G::W, 1, G::C);  // input channels per block
  static constexpr int c_tiles = ceil_div(G::C, ct);
  static constexpr int rows_wanted = clamp_to(target / (ct * G::W), 1, G::H);
  static constexpr int r_tiles = ceil_div(G::H, rows_wanted);
  static constexpr int rows = ceil_div(G::H, r_tiles);
  static constexpr int elems = ct * rows * G::W;
  static constexpr int per_thread = ceil_div(elems, threads);
  // Output rows that input rows [iy0, iy0 + rows) receive gradient from: at most this many.
  static constexpr int dy_rows = min_of((rows - 1 + (G::K - 1) * G::D) / G::S + 1, G::OH);
  static constexpr int per_o = ct * G::KK + dy_rows * G::OW;  // shared floats per output channel
  static constexpr int ob = min_of(G::Out, (smem_limit_floats * 2 / 3) / per_o);
  static constexpr int passes = ob > 0 ? ceil_div(G::Out, ob) : 0;
  static constexpr int w_floats = round_up(max_of(ob, 1) * ct * G::KK, 4);
  static constexpr int dy_floats = max_of(ob, 1) * dy_rows * G::OW;
};

template <class G>
__global__ void __launch_bounds__(ConvDgrad<G>::threads)
kernel_conv_backward_data(const float* __restrict__ w,   // [Out][C][K][K]
                          const float* __restrict__ dy,  // [batch][Out][OH][OW]
                          float* __restrict__ dx)        // [batch][C][H][W]
{
  using Cfg = ConvDgrad<G>;
  constexpr int C = G::C, H = G::H, W = G::W, K = G::K, S = G::S, P = G::P, D = G::D;
  constexpr int OH = G::OH, OW = G::OW, CT = Cfg::ct, ROWS = Cfg::rows, OB = Cfg::ob;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");
  static_assert(OB >= 1, "ctnn: one output channel's weights and dy rows exceed the shared-memory "
                         "budget of the backward-data kernel");
  static_assert(Cfg::per_thread * Cfg::threads >= Cfg::elems, "threads cover the block's elements");

  __shared__ __align__(16) float w_s[Cfg::w_floats];    // (OB, CT, K, K)
  __shared__ __align__(16) float dy_s[Cfg::dy_floats];  // (OB, dy_rows, OW), zero past OH

  const unsigned blk = blockIdx.x;
  const int rt = int(blk % unsigned(Cfg::r_tiles));
  const int cti = int((blk / unsigned(Cfg::r_tiles)) % unsigned(Cfg::c_tiles));
  const std::size_t n = blk / unsigned(Cfg::r_tiles * Cfg::c_tiles);
  const int c0 = cti * CT, iy0 = rt * ROWS;
  const int a = iy0 + P - (K - 1) * D;  // lowest oy·S that reaches row iy0
  const int oy_lo = a <= 0 ? 0 : ceil_div(a, S);
  const float* dyn = dy + n * G::out_size;

  float acc[Cfg::per_thread];
#pragma unroll
  for (int it = 0; it < Cfg::per_thread; ++it) acc[it] = 0.f;

  for (int pass = 0; pass < Cfg::passes; ++pass) {
    const int o0 = pass * OB;
    __syncthreads();  // the previous pass has finished reading w_s and dy_s
    for (int e = threadIdx.x; e < OB * CT * G::KK; e += Cfg::threads) {
      const int j = e / (CT * G::KK), cc = (e / G::KK) % CT, t = e % G::KK;
      const int o = o0 + j, c = c0 + cc;
      w_s[e] = (o < G::Out && c < C) ? w[(o * C + c) * G::KK + t] : 0.f;
    }
    for (int e = threadIdx.x; e < OB * Cfg::dy_rows * OW; e += Cfg::threads) {
      const int j = e / (Cfg::dy_rows * OW), r = (e / OW) % Cfg::dy_rows, ox = e % OW;
      const int o = o0 + j, oy = oy_lo + r;
      dy_s[e] = (o < G::Out && oy < OH) ? dyn[(o * OH + oy) * OW + ox] : 0.f;
    }
    __syncthreads();

#pragma unroll
    for (int it = 0; it < Cfg::per_thread; ++it) {
      const int item = threadIdx.x + it * Cfg::threads;
      if (item >= Cfg::elems) continue;
      const int cc = item / (ROWS * W), iy = iy0 + (item / W) % ROWS, ix = item % W;
      if (c0 + cc >= C || iy >= H) continue;
      float g = acc[it];
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const int ty = iy + P - ky * D;  // = oy·S when tap ky of output row oy reads row iy
        if (ty < 0) break;               // decreases with ky
        if (S > 1 && ty % S != 0) continue;
        const int oy = ty / S;
        if (oy >= OH) continue;
        const float* dy_row = dy_s + (oy - oy_lo) * OW;
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const int tx = ix + P - kx * D;
          if (tx < 0) break;
          if (S > 1 && tx % S != 0) continue;
          const int ox = tx / S;
          if (ox >= OW) continue;
          const float* w_tap = w_s + (cc * K + ky) * K + kx;
#pragma unroll
          for (int j = 0; j < OB; ++j)
            g = fmaf(w_tap[j * CT * G::KK], dy_row[j * Cfg::dy_rows * OW + ox], g);
        }
      }
      acc[it] = g;
    }
  }

  float* dxn = dx + n * G::in_size;
#pragma unroll
  for (int it = 0; it < Cfg::per_thread; ++it) {
    const int item = threadIdx.x + it * Cfg::threads;
    if (item >= Cfg::elems) continue;
    const int cc = item / (ROWS * W), iy = iy0 + (item / W) % ROWS, ix = item % W;
    if (c0 + cc < C && iy < H) dxn[((c0 + cc) * H + iy) * W + ix] = acc[it];
  }
}

// ---------------------------------------------------------------------------------------------------
// Backward weights and bias, stage 1 of 2. dW (Out × C·K·K) = dY (Out × R) · Xcolᵀ (R × C·K·K) over
// the R = batch·OH·OW output positions, with db as one more column of Xcol that is all ones
// (k = C·K·K). The positions are cut into work units (one sample × `rows` output rows); block b takes
// a contiguous run of units and writes its partial sums to partials[b]; stage 2 (sum_partials) adds
// the rows of partials in a fixed order. A block covers `ktile` columns k and `mt` channels o; thread
// (rg, mg, k) accumulates `tm` channels for one k over every rg-th position of each unit, and the rg
// groups are combined in a fixed order at the end.
namespace detail {
template <class Cfg, class G>
constexpr int wgrad_smem_floats(int rows) {
  const int xr = (rows - 1) * G::S + G::span, xw = (G::OW - 1) * G::S + G::span;
  return round_up(Cfg::cx * xr * xw, 4) + round_up(rows * G::OW * Cfg::mt, 4) + Cfg::red_floats;
}
// Output rows per unit: about 256 positions, balanced over the tiles, shrunk until shared memory fits.
template <class Cfg, class G>
constexpr int wgrad_rows() {
  int r = clamp_to(ceil_div(256, G::OW), 1, G::OH);
  r = ceil_div(G::OH, ceil_div(G::OH, r));
  while (r > 1 && wgrad_smem_floats<Cfg, G>(r) > smem_limit_floats) --r;
  return r;
}
}  // namespace detail

template <class G>
struct ConvWgradShape {
  static constexpr int kcols = G::CKK + 1;  // weight taps, then the bias column
  static constexpr int E = G::Out * kcols;  // floats per partial: dW [Out][C·K·K], then db [Out]
  static constexpr int ktile = min_of(round_up(kcols, 32), 256);
  static constexpr int k_tiles = ceil_div(kcols, ktile);
  static constexpr int tm = G::Out <= 8 ? G::Out : 8;  // channels per thread
  static constexpr int m_groups = ceil_div(G::Out, tm);
  static constexpr int mg_block = clamp_to(256 / ktile, 1, m_groups);
  static constexpr int m_tiles = ceil_div(m_groups, mg_block);
  static constexpr int mt = mg_block * tm;  // channels per block
  static constexpr int rg = max_of(1, 256 / (ktile * mg_block));
  static constexpr int threads = rg * mg_block * ktile;
  static constexpr int cx = min_of(G::C, (ktile - 1) / G::KK + 2);  // input channels a k tile reads
  static constexpr int red_floats = rg > 1 ? rg * mt * ktile : 0;
};

template <class G>
struct ConvWgrad : ConvWgradShape<G> {
  using Base = ConvWgradShape<G>;
  static constexpr int rows = detail::wgrad_rows<Base, G>();
  static constexpr int tiles = ceil_div(G::OH, rows);
  static constexpr int xr = (rows - 1) * G::S + G::span, xw = (G::OW - 1) * G::S + G::span;
  static constexpr int x_floats = round_up(Base::cx * xr * xw, 4);
  static constexpr int dy_floats = round_up(rows * G::OW * Base::mt, 4);
  static constexpr bool fits = detail::wgrad_smem_floats<Base, G>(rows) <= smem_limit_floats;
  // At most this many stage-1 blocks (rows of partials). Enough for several blocks per SM of a
  // 132-SM H100, so that the load latency of one block's units hides behind the others': up to 1024
  // when a partial is small (LeNet-5's conv1: 156 floats), fewer as partials grow and stage 2 has more
  // to read (at most 2^18 floats of partials), never below 256.
  static constexpr int max_partials = clamp_to((1 << 18) / Base::E, 256, 1024);
  static constexpr long long units(int batch) { return (long long)(batch > 0 ? batch : 0) * tiles; }
  static constexpr int partials(int batch) { return int(min_of<long long>(units(batch), max_partials)); }
  static constexpr std::size_t workspace_floats(int max_batch) {
    return std::size_t(partials(max_batch)) * std::size_t(Base::E);
  }
};

template <class G>
__global__ void __launch_bounds__(ConvWgrad<G>::threads)
kernel_conv_backward_weights(const float* __restrict__ x,   // [batch][C][H][W]
                             const float* __restrict__ dy,  // [batch][Out][OH][OW]
                             float* __restrict__ partials,  // [gridDim.x][E]
                             int units)                     // batch · tiles
{
  using Cfg = ConvWgrad<G>;
  constexpr int S = G::S, D = G::D, OW = G::OW, TM = Cfg::tm, MT = Cfg::mt, RG = Cfg::rg;
  constexpr int KT = Cfg::ktile, XR = Cfg::xr, XW = Cfg::xw, CKK = G::CKK;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");
  static_assert(Cfg::fits, "ctnn: the weight-gradient kernel's tiles exceed 48 KB of shared memory");
  static_assert(KT % 32 == 0, "each warp holds one (rg, mg) pair, so dy_s reads are broadcasts");
  static_assert(Cfg::threads <= 1024 && Cfg::rows * Cfg::tiles >= G::OH, "launch shape");

  __shared__ __align__(16) float x_s[Cfg::x_floats];    // (cx, XR, XW): input rows of one unit
  __shared__ __align__(16) float dy_s[Cfg::dy_floats];  // (rows·OW, MT): dy of one unit
  __shared__ float red_s[RG > 1 ? Cfg::red_floats : 1];  // (RG, MT, KT): per-group sums

  const int nb = int(gridDim.x), blk = int(blockIdx.x);
  const int k0 = int(blockIdx.y) * KT, o0 = int(blockIdx.z) * MT, c_lo = k0 / G::KK;
  const int kl = threadIdx.x % KT, mg = (threadIdx.x / KT) % Cfg::mg_block;
  const int rgi = threadIdx.x / (KT * Cfg::mg_block);
  const int k = k0 + kl;
  const bool is_w = k < CKK, is_bias = k == CKK;
  int koff = 0;  // offset of tap k in x_s, relative to a position's window origin
  if (is_w) {
    const int c = k / G::KK, r = k % G::KK;
    koff = ((c - c_lo) * XR + (r / G::K) * D) * XW + (r % G::K) * D;
  }

  float acc[TM];
#pragma unroll
  for (int i = 0; i < TM; ++i) acc[i] = 0.f;

  const int u_begin = int((long long)blk * units / nb), u_end = int((long long)(blk + 1) * units / nb);
  for (int u = u_begin; u < u_end; ++u) {
    const std::size_t n = std::size_t(u / Cfg::tiles);
    const int oy0 = (u % Cfg::tiles) * Cfg::rows;
    const int pixels = min_of(Cfg::rows, G::OH - oy0) * OW;
    __syncthreads();  // the previous unit has finished reading x_s and dy_s
    const float* xn = x + n * G::in_size;
    for (int e = threadIdx.x; e < Cfg::cx * XR * XW; e += Cfg::threads) {
      const int c = c_lo + e / (XR * XW), iy = oy0 * S - G::P + (e / XW) % XR, ix = e % XW - G::P;
      x_s[e] = (c < G::C && iy >= 0 && iy < G::H && ix >= 0 && ix < G::W)
                   ? xn[(c * G::H + iy) * G::W + ix]
                   : 0.f;
    }
    const float* dyn = dy + n * G::out_size + oy0 * OW;
    for (int e = threadIdx.x; e < MT * Cfg::rows * OW; e += Cfg::threads) {
      const int i = e / (Cfg::rows * OW), p = e % (Cfg::rows * OW), o = o0 + i;
      dy_s[p * MT + i] = (o < G::Out && p < pixels) ? dyn[std::size_t(o) * G::OHW + p] : 0.f;
    }
    __syncthreads();
    for (int p = rgi; p < pixels; p += RG) {
      const float v = is_bias ? 1.f : x_s[koff + (p / OW) * S * XW + (p % OW) * S];
      float d[TM];
      load_shared(dy_s + p * MT + mg * TM, d);
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i] = fmaf(v, d[i], acc[i]);
    }
  }

  if constexpr (RG > 1) {
#pragma unroll
    for (int i = 0; i < TM; ++i) red_s[(rgi * MT + mg * TM + i) * KT + kl] = acc[i];
    __syncthreads();
    if (rgi == 0)
      for (int g = 1; g < RG; ++g)
#pragma unroll
        for (int i = 0; i < TM; ++i) acc[i] += red_s[(g * MT + mg * TM + i) * KT + kl];
  }
  if (rgi == 0 && (is_w || is_bias)) {
    float* part = partials + std::size_t(blk) * Cfg::E;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int o = o0 + mg * TM + i;
      if (o < G::Out) part[is_w ? o * CKK + k : G::Out * CKK + o] = acc[i];
    }
  }
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

  // Stage-1 partials of the weight-gradient reduction.
  static constexpr std::size_t workspace_floats(int max_batch) {
    return kernels::ConvWgrad<dims>::workspace_floats(max_batch);
  }

  template <ConvAlgo Algo>
  static void forward_with(const CudaContext& ctx, const float* w, const float* b, const float* x,
                           float* y, int batch) {
    kernels::check_batch(batch, "Conv forward");
    constexpr ConvAlgo algo = Algo == ConvAlgo::automatic ? forward_algo : Algo;
    if constexpr (algo == ConvAlgo::direct) {
      using Cfg = kernels::ConvDirect<dims>;
      const unsigned grid = kernels::grid_for(std::size_t(batch) * Cfg::tiles, 1);
      kernels::kernel_conv_forward_direct<dims><<<grid, Cfg::threads, 0, ctx.stream>>>(w, b, x, y);
    } else {
      using Cfg = kernels::ConvGemm<dims>;
      const std::size_t columns = std::size_t(batch) * dims::OHW;
      if (columns > std::size_t(1) << 30)
        throw std::invalid_argument("ctnn: Conv forward: batch " + std::to_string(batch) +
                                    " is too large for the implicit-GEMM kernel");
      const dim3 grid(kernels::grid_for(columns, Cfg::BN), Cfg::m_tiles);
      kernels::kernel_conv_forward_gemm<dims>
          <<<grid, Cfg::threads, 0, ctx.stream>>>(w, b, x, y, int(columns));
    }
    CTNN_CHECK_LAUNCH();
  }

  static void forward(const CudaContext& ctx, const float* w, const float* b, const float* x, float* y,
                      int batch) {
    forward_with<ConvAlgo::automatic>(ctx, w, b, x, y, batch);
  }

  static void backward(const CudaContext& ctx, const float* w, const float* x, const float* /*y*/,
                       const float* dy, float* dx, float* dw, float* db, int batch) {
    kernels::check_batch(batch, "Conv backward");
    using Wg = kernels::ConvWgrad<dims>;
    if (Wg::units(batch) > 0x7fffffffLL)
      throw std::invalid_argument("ctnn: Conv backward: batch " + std::to_string(batch) + " is too large");
    const int nb = Wg::partials(batch);
    kernels::check_workspace(ctx, std::size_t(nb) * Wg::E, "Conv backward", batch);
    const dim3 grid(unsigned(nb), Wg::k_tiles, Wg::m_tiles);
    kernels::kernel_conv_backward_weights<dims>
        <<<grid, Wg::threads, 0, ctx.stream>>>(x, dy, ctx.workspace, int(Wg::units(batch)));
    CTNN_CHECK_LAUNCH();
    kernels::sum_partials(ctx.stream, ctx.workspace, nb, Wg::E, Out * dims::CKK, dw, db);
    if (dx) {
      if constexpr (kernels::conv_dgrad_by_flip<dims>()) {
        using DG = kernels::ConvDgradDims<dims>;
        using Cfg = kernels::ConvDirect<DG>;
        const unsigned grid = kernels::grid_for(std::size_t(batch) * Cfg::tiles, 1);
        kernels::kernel_conv_forward_direct<DG, true>
            <<<grid, Cfg::threads, 0, ctx.stream>>>(w, nullptr, dy, dx);
      } else {
        using Dg = kernels::ConvDgrad<dims>;
        const unsigned grid = kernels::grid_for(std::size_t(batch) * Dg::c_tiles * Dg::r_tiles, 1);
        kernels::kernel_conv_backward_data<dims><<<grid, Dg::threads, 0, ctx.stream>>>(w, dy, dx);
      }
      CTNN_CHECK_LAUNCH();
    }
  }
};

}  // namespace ctnn
