#pragma once
// The direct convolution kernels, for narrow layers (LeNet-5's sizes) where an implicit-GEMM tile
// would be mostly padding: forward (a tiled direct kernel; with Flip also the backward-data pass of a
// stride-1 convolution), backward data (a gather, no atomics) and backward weights + bias (a
// deterministic two-stage reduction). conv.cuh picks between these and conv_gemm.cuh.
//
// Layouts as on the host (layers/conv.hpp): x [batch][C][H][W], y [batch][Out][OH][OW],
// w [Out][C][K][K], b [Out]. Kernels are templated on ConvDims, a bag of the layer's integers, so two
// networks with the same convolution share them.
#include <cstddef>
#include <cstdint>

#include "../layers/activation.hpp"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn::kernels {

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

// How the direct kernels read the tensor they stage (the input x, or the gradient dy that backward
// reads) and where the forward kernel puts its results. The plain kernels below read and write
// memory; a fused group's kernels (conv_fused.cuh) compute what they read and finish what they write.
// Element (c, y, x) of sample n of a [batch][C][H][W] tensor.
template <int C, int H, int W>
struct PlainLoad {
  const float* p;
  // (As GatherLoad's, data.cuh: nothing to bind, no blocks of its own.)
  __device__ PlainLoad bind() const { return *this; }
  unsigned extra_blocks(int) const { return 0; }
  __device__ void extra(unsigned) const {}
  __device__ float operator()(std::size_t n, int c, int y, int x) const {
    return p[((n * C + c) * H + y) * W + x];
  }
};
// Pixels x0 .. x0 + RX − 1 of row oy, channels o0 .. o0 + OCPT − 1, of sample n of a [batch][Out][OH][OW]
// tensor, through Fn: for RX = 4 on a 16-byte aligned row one 16-byte store a channel (a warp's lanes
// then write whole rows), else one store a pixel.
template <class G, class Fn, int RX, int OCPT>
__device__ __forceinline__ void store_pixel_row(float* y, std::size_t n, int o0, int oy, int x0,
                                                const float (&acc)[RX][OCPT]) {
  float* row = y + ((n * G::Out + o0) * G::OH + oy) * G::OW + x0;
  const bool vector = RX == 4 && G::OHW % 4 == 0 && reinterpret_cast<std::uintptr_t>(row) % 16 == 0;
#pragma unroll
  for (int j = 0; j < OCPT; ++j) {
    if (o0 + j >= G::Out) continue;
    float* p = row + std::size_t(j) * G::OHW;
    if constexpr (RX == 4) {
      if (vector) {
        *reinterpret_cast<float4*>(p) =
            make_float4(Fn::apply(acc[0][j]), Fn::apply(acc[1][j]), Fn::apply(acc[2][j]), Fn::apply(acc[3][j]));
        continue;
      }
    }
#pragma unroll
    for (int r = 0; r < RX; ++r) p[r] = Fn::apply(acc[r][j]);
  }
}

// Output channels o0.. of pixel (oy, ox) of sample n (PQ = 1: one pixel per result), through Fn.
template <class G, class Fn = identity_fn>
struct PlainStore {
  float* p;  // [batch][Out][OH][OW]
  template <int OCPT>
  __device__ void operator()(std::size_t n, int o0, int oy, int ox, const float (&acc)[1][OCPT]) const {
    float* yo = p + (n * G::Out + o0) * G::OHW + oy * G::OW + ox;
#pragma unroll
    for (int j = 0; j < OCPT; ++j)
      if (o0 + j < G::Out) yo[std::size_t(j) * G::OHW] = Fn::apply(acc[0][j]);
  }
  // RX neighbouring pixels of a row (ConvDirect::rx).
  template <int RX, int OCPT>
  __device__ void row(std::size_t n, int o0, int oy, int x0, const float (&acc)[RX][OCPT]) const {
    store_pixel_row<G, Fn>(p, n, o0, oy, x0, acc);
  }
};

// ---------------------------------------------------------------------------------------------------
// Forward, direct. A block computes `rows` output rows of one sample for all output channels. It
// stages the input rows those outputs read (zero-padded, so the inner loop has no bounds checks) and
// all the layer's weights in shared memory. Each thread computes one output pixel for `ocpt` output
// channels: per tap one input value (conflict-free: neighbouring threads read neighbouring columns)
// and `ocpt` weights (one broadcast vector load), then `ocpt` FMAs. With PQ > 1 (a fused pooling of
// PQ × PQ windows) a thread computes a whole window, PQ × PQ pixels, reusing each weight load for
// all of them; rows then count windows, and output rows and columns past the last whole window are
// not computed (no window reads them).
//
// With Flip, the same kernel computes the backward-data pass of a stride-1 convolution: dx is the
// convolution of dy, padded by D·(K−1) − P, with the kernel rotated by 180° and its input and output
// channels swapped. Then G describes that convolution (G::C = the layer's Out, G::Out = the layer's
// C), w is the layer's weight [G::C][G::Out][K][K], and there is no bias.
//
// Narrow halves `ocpt` where it is 4 (twice the threads, each with half the FMAs a tap): the fused
// groups' forward at small batches, where one block a sample leaves multiprocessors idle.
template <class G, int PQ = 1, bool Sliced = false, bool Narrow = false>
struct ConvDirect {
  static constexpr int slice_threads = 128;  // threads per channel slice (below)
  // A forward with few input channels (an RGB stem: 27 taps a pixel, its time in the issue of
  // instructions, not in memory) has a thread compute `rx` neighbouring pixels of a row for 8
  // channels: per input row it loads the rx + K − 1 inputs once, and per tap two float4 weight loads
  // feed 8·rx FMAs (89% of its instructions at rx = 4, K = 3; 67% for one pixel, 4 channels). So does
  // the backward data (Sliced), with rx the widest of 4 and 2 that divides a row: one pixel a thread
  // left it waiting on shared-memory loads (LeNet-5's conv2: 3 loads per 6 FMAs; docs/conv_kernels.md).
#ifdef CTNN_FLIP_RX_MAX  // (for measuring)
  static constexpr int flip_rx_max = CTNN_FLIP_RX_MAX;
#else
  static constexpr int flip_rx_max = 4;
#endif
  static constexpr int widest_rx_dividing_a_row() {
    int r = flip_rx_max;
    while (r > 1 && G::OW % r != 0) --r;
    return r;
  }
  static constexpr int rx = PQ != 1 ? 1
                            : Sliced ? widest_rx_dividing_a_row()
                                     : (G::C <= 4 && G::Out % 8 == 0 && G::OW % 4 == 0 ? 4 : 1);
  static constexpr int ocpt = G::Out <= 8 ? G::Out : rx > 1 ? 8 : Narrow ? 2 : 4;  // output channels per thread
  static constexpr int groups = ceil_div(G::Out, ocpt);  // channel groups per pixel
  static constexpr int oc_padded = groups * ocpt;
  static constexpr int QH = G::OH / PQ, QW = G::OW / PQ / rx;  // pixel blocks (PQ × PQ, or 1 × rx, pixels each)
  // About one (pixel block, channel group) item per thread, balanced over the row tiles.
  static constexpr int rows_wanted = clamp_to(slice_threads / (QW * groups), 1, QH);
  static constexpr int tiles = ceil_div(QH, rows_wanted);
  static constexpr int rows = ceil_div(QH, tiles);
  static constexpr int items = rows * QW * groups;
  static constexpr int in_rows = (rows * PQ - 1) * G::S + G::span;
  static constexpr int in_cols = (QW * PQ * rx - 1) * G::S + G::span;
  static constexpr int in_floats = round_up(G::C * in_rows * in_cols, 4);
  static constexpr int w_floats = G::CKK * oc_padded;
  static constexpr int acc_floats = PQ * PQ * rx * ocpt;  // one item's sums
  // Channel slices (Sliced, the backward-data pass only: the forward's sums keep the implicit GEMM's
  // order, so that both give the same bits): when a block's items leave most of 512 threads idle,
  // `cs` slices of threads each sum an item over a contiguous share of the input channels (a shorter
  // chain of dependent FMAs), and their sums are added in slice order at the end.
  static constexpr int smem_for(int slices) {
    return in_floats + w_floats + oc_padded + (slices > 1 ? slices * items * acc_floats : 0);
  }
  static constexpr int cs = [] {
    if (!Sliced) return 1;
    int s = clamp_to(512 / round_up(items, 32), 1, min_of(G::C, 4));
    s = ceil_div(G::C, ceil_div(G::C, s));  // balanced: every slice has channels
    while (s > 1 && smem_for(s) > smem_limit_floats) --s;
    return s;
  }();
  static constexpr int c_per_slice = ceil_div(G::C, cs);
  static constexpr int threads = slice_threads * cs;
  static constexpr int smem_floats = smem_for(cs);
  static constexpr bool fits = smem_floats <= smem_limit_floats;
};

// The flipped forward that computes backward data (its sums split over channel slices).
template <class DG>
using ConvDirectFlipped = ConvDirect<DG, 1, true>;

// The window of a dy loader that stages by max-pooling windows (ConvGroupGrad::window), or 0.
template <class L>
constexpr int window_of() {
  if constexpr (requires { L::window; }) return L::window;
  else return 0;
}

// Stages the gradient a window loader (ConvGroupGrad::window) computes, by whole max-pooling windows:
// of every one of `channels` channels, the window rows [q0, q0 + nq), each of `per_row` windows. A
// thread takes 4 windows at a time (their three loads each in flight together) and hands each value
// of a window to put(c, y, x, value), (y, x) its pixel in the convolution's output.
template <int T, class Load, class Put>
__device__ __forceinline__ void stage_windows(const Load& ld, std::size_t n, int channels, int q0, int nq, int per_row,
                                              const Put& put) {
  constexpr int PW = Load::window, WB = 4;
  const int windows = channels * nq * per_row;
  for (int w0 = threadIdx.x; w0 < windows; w0 += WB * T) {
    typename Load::Window v[WB] = {};
#pragma unroll
    for (int i = 0; i < WB; ++i) {
      const int wi = w0 + i * T;
      if (wi < windows) v[i] = ld.window_at(n, wi / (nq * per_row), q0 + (wi / per_row) % nq, wi % per_row);
    }
#pragma unroll
    for (int i = 0; i < WB; ++i) {
      const int wi = w0 + i * T;
      if (wi >= windows) break;
      const int c = wi / (nq * per_row), qy = q0 + (wi / per_row) % nq, qx = wi % per_row;
      const float g = Load::window_grad(v[i]);
#pragma unroll
      for (int a = 0; a < PW * PW; ++a) put(c, qy * PW + a / PW, qx * PW + a % PW, v[i].at == a ? g : 0.f);
    }
  }
}

// The body of the direct forward kernels: ld(n, c, iy, ix) reads the input, st(n, o0, qy, qx, acc)
// takes the results of pixel block (qy, qx), acc[py·PQ + px][j] for channel o0 + j.
template <class G, bool Flip, int PQ, class Load, class Store, bool Narrow = false>
__device__ __forceinline__ void conv_forward_direct_block(const float* __restrict__ w,  // see kernel_conv_forward_direct
                                                          const float* __restrict__ b,
                                                          const Load& ld, const Store& st) {
  using Cfg = ConvDirect<G, PQ, Flip, Narrow>;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");
  static_assert(Cfg::fits, "ctnn: the direct convolution's input rows and weights exceed 48 KB of "
                           "shared memory; use ConvAlgo::implicit_gemm for this layer");
  static_assert(PQ >= 1 && Cfg::QH >= 1 && Cfg::QW >= 1, "at least one pixel block");
  static_assert(Cfg::rows >= 1 && Cfg::rows * Cfg::tiles >= Cfg::QH, "row tiles cover the output");
  constexpr int C = G::C, H = G::H, W = G::W, K = G::K, S = G::S, D = G::D, QW = Cfg::QW;
  constexpr int OCPT = Cfg::ocpt, IR = Cfg::in_rows, IC = Cfg::in_cols, CS = Cfg::cs;

  __shared__ __align__(16) float in_s[Cfg::in_floats];   // (C, IR, IC), zero outside the input
  __shared__ __align__(16) float w_s[Cfg::w_floats];     // (groups, C·K·K, OCPT)
  __shared__ __align__(16) float b_s[Cfg::oc_padded];    // (groups·OCPT)
  __shared__ __align__(16) float part_s[CS > 1 ? CS * Cfg::items * Cfg::acc_floats : 1];  // (CS, items, PQ·PQ, OCPT)

  const int tile = int(blockIdx.x % unsigned(Cfg::tiles));
  const std::size_t n = blockIdx.x / unsigned(Cfg::tiles);
  const int qy0 = tile * Cfg::rows;

  // e runs along w's memory order (o, tap = c·K·K + ky·K + kx); channels past Out are zero. The
  // staging loops are unrolled so that each thread has several loads in flight.
#pragma unroll 8
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
  const int iy0 = qy0 * PQ * S - G::P;
  constexpr int PW = window_of<Load>();  // a loader of max-pooling windows (the backward data's dy)
  if constexpr (PW > 0) {
    // The zeros outside the input here, then the input by whole windows (stage_windows), as the
    // weight gradient stages its dy: three loads a window instead of three a value.
#pragma unroll 8
    for (int e = threadIdx.x; e < C * IR * IC; e += Cfg::threads) {
      const int r = (e / IC) % IR, col = e % IC;
      const int iy = iy0 + r, ix = col - G::P;
      if (!(iy >= 0 && iy < H && ix >= 0 && ix < W)) in_s[e] = 0.f;
    }
    const int q0 = max_of(iy0, 0) / PW, nq = ceil_div(min_of(iy0 + IR, H), PW) - q0;  // the window rows the tile meets
    stage_windows<Cfg::threads>(ld, n, C, q0, nq, W / PW, [&](int c, int iy, int ix, float v) {
      const int r = iy - iy0;  // the value's row in the tile
      if (r >= 0 && r < IR) in_s[(c * IR + r) * IC + ix + G::P] = v;
    });
  } else {
#pragma unroll 8
    for (int e = threadIdx.x; e < C * IR * IC; e += Cfg::threads) {
      const int c = e / (IR * IC), r = (e / IC) % IR, col = e % IC;
      const int iy = iy0 + r, ix = col - G::P;
      in_s[e] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? ld(n, c, iy, ix) : 0.f;
    }
  }
  __syncthreads();

  // Item → (channel group g, row ty of the tile, pixel block qx).
  struct Item {
    int g, ty, qx;
  };
  const auto item_at = [](int item) {
    const int p = item % (Cfg::rows * QW);
    return Item{item / (Cfg::rows * QW), p / QW, p % QW};
  };
  // Slice `slice` sums input channels [c_lo, c_hi); slice 0 starts from the bias.
  const int slice = int(threadIdx.x) / Cfg::slice_threads;
  const int c_lo = slice * Cfg::c_per_slice, c_hi = min_of(C, c_lo + Cfg::c_per_slice);
  constexpr int Q = PQ * PQ * Cfg::rx;  // an item's pixels: a PQ × PQ window, or rx of a row
  const auto store = [&](int g, int qy, int qx, const float (&acc)[Q][OCPT]) {
    if constexpr (Cfg::rx > 1) st.template row<Cfg::rx>(n, g * OCPT, qy, qx * Cfg::rx, acc);
    else st(n, g * OCPT, qy, qx, acc);
  };
  for (int item = int(threadIdx.x) % Cfg::slice_threads; item < Cfg::items; item += Cfg::slice_threads) {
    const auto [g, ty, qx] = item_at(item);
    const int qy = qy0 + ty;
    if (qy >= Cfg::QH) continue;  // last tile may be short
    float acc[Q][OCPT];
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      if (slice == 0) load_floats(b_s + g * OCPT, acc[q]);
      else
#pragma unroll
        for (int j = 0; j < OCPT; ++j) acc[q][j] = 0.f;
    }
    if constexpr (Cfg::rx > 1) {  // rx pixels of a row (PQ = 1): see ConvDirect
      constexpr int RX = Cfg::rx, SPAN = (RX - 1) * S + (K - 1) * D + 1;
      const float* in_p = in_s + ty * S * IC + qx * RX * S;
      const float* w_g = w_s + g * G::CKK * OCPT;
#pragma unroll
      for (int ci = 0; ci < Cfg::c_per_slice; ++ci) {
        const int c = c_lo + ci;
        if (CS > 1 && c >= c_hi) break;
#pragma unroll
        for (int ky = 0; ky < K; ++ky) {
          float v[SPAN];
#pragma unroll
          for (int q = 0; q < SPAN; ++q) v[q] = in_p[(c * IR + ky * D) * IC + q];
#pragma unroll
          for (int kx = 0; kx < K; ++kx) {
            float wv[OCPT];
            load_floats(w_g + ((c * K + ky) * K + kx) * OCPT, wv);
#pragma unroll
            for (int r = 0; r < RX; ++r)
#pragma unroll
              for (int j = 0; j < OCPT; ++j) acc[r][j] = fmaf(v[r * S + kx * D], wv[j], acc[r][j]);
          }
        }
      }
    } else {
      const float* in_p = in_s + ty * PQ * S * IC + qx * PQ * S;  // top-left tap of the block's first window
      const float* w_g = w_s + g * G::CKK * OCPT;
      for (int c = c_lo; c < c_hi; ++c) {
#pragma unroll
        for (int ky = 0; ky < K; ++ky) {
#pragma unroll
          for (int kx = 0; kx < K; ++kx) {
            float wv[OCPT];
            load_floats(w_g + ((c * K + ky) * K + kx) * OCPT, wv);
#pragma unroll
            for (int py = 0; py < PQ; ++py)
#pragma unroll
              for (int px = 0; px < PQ; ++px) {
                const float v = in_p[(c * IR + ky * D + py * S) * IC + kx * D + px * S];
#pragma unroll
                for (int j = 0; j < OCPT; ++j) acc[py * PQ + px][j] = fmaf(v, wv[j], acc[py * PQ + px][j]);
              }
          }
        }
      }
    }
    if constexpr (CS == 1) {
      store(g, qy, qx, acc);
    } else {
      float* part = part_s + (slice * Cfg::items + item) * Cfg::acc_floats;
#pragma unroll
      for (int q = 0; q < Q; ++q)
#pragma unroll
        for (int j = 0; j < OCPT; ++j) part[q * OCPT + j] = acc[q][j];
    }
  }
  if constexpr (CS > 1) {  // the slices' sums, in slice order
    __syncthreads();
    for (int item = threadIdx.x; item < Cfg::items; item += Cfg::threads) {
      const auto [g, ty, qx] = item_at(item);
      const int qy = qy0 + ty;
      if (qy >= Cfg::QH) continue;
      float acc[Q][OCPT];
#pragma unroll
      for (int q = 0; q < Q; ++q)
#pragma unroll
        for (int j = 0; j < OCPT; ++j) {
          float v = part_s[item * Cfg::acc_floats + q * OCPT + j];
#pragma unroll
          for (int sl = 1; sl < CS; ++sl) v += part_s[(sl * Cfg::items + item) * Cfg::acc_floats + q * OCPT + j];
          acc[q][j] = v;
        }
      store(g, qy, qx, acc);
    }
  }
}

// Fn: the element-wise activation that follows the layer, applied before the store (identity_fn: none).
template <class G, bool Flip = false, class Fn = identity_fn>
__global__ void __launch_bounds__(ConvDirect<G, 1, Flip>::threads)
kernel_conv_forward_direct(const float* __restrict__ w,  // [Out][C][K][K] ([C][Out][K][K] with Flip)
                           const float* __restrict__ b,  // [Out] (unused with Flip)
                           const float* __restrict__ x,  // [batch][C][H][W]
                           float* __restrict__ y)        // [batch][Out][OH][OW]
{
  conv_forward_direct_block<G, Flip, 1>(w, b, PlainLoad<G::C, G::H, G::W>{x}, PlainStore<G, Fn>{y});
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
    return ConvDirectFlipped<ConvDgradDims<G>>::fits;
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

// The body of the gather kernel; ld(n, o, oy, ox) reads dy.
template <class G, class Load>
__device__ __forceinline__ void conv_backward_data_block(const float* __restrict__ w,  // [Out][C][K][K]
                                                         const Load& ld,
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

  float acc[Cfg::per_thread];
#pragma unroll
  for (int it = 0; it < Cfg::per_thread; ++it) acc[it] = 0.f;

  for (int pass = 0; pass < Cfg::passes; ++pass) {
    const int o0 = pass * OB;
    __syncthreads();  // the previous pass has finished reading w_s and dy_s
#pragma unroll 4
    for (int e = threadIdx.x; e < OB * CT * G::KK; e += Cfg::threads) {
      const int j = e / (CT * G::KK), cc = (e / G::KK) % CT, t = e % G::KK;
      const int o = o0 + j, c = c0 + cc;
      w_s[e] = (o < G::Out && c < C) ? w[(o * C + c) * G::KK + t] : 0.f;
    }
#pragma unroll 4
    for (int e = threadIdx.x; e < OB * Cfg::dy_rows * OW; e += Cfg::threads) {
      const int j = e / (Cfg::dy_rows * OW), r = (e / OW) % Cfg::dy_rows, ox = e % OW;
      const int o = o0 + j, oy = oy_lo + r;
      dy_s[e] = (o < G::Out && oy < OH) ? ld(n, o, oy, ox) : 0.f;
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

template <class G>
__global__ void __launch_bounds__(ConvDgrad<G>::threads)
kernel_conv_backward_data(const float* __restrict__ w,   // [Out][C][K][K]
                          const float* __restrict__ dy,  // [batch][Out][OH][OW]
                          float* __restrict__ dx)        // [batch][C][H][W]
{
  conv_backward_data_block<G>(w, PlainLoad<G::Out, G::OH, G::OW>{dy}, dx);
}

// ---------------------------------------------------------------------------------------------------
// Backward weights and bias, stage 1 of 2. dW[o][c][ky][kx] is the sum over samples and output
// pixels of dy[n][o][oy][ox] · x[n][c][oy·S − P + ky·D][ox·S − P + kx·D], db[o] that of dy[n][o][·][·].
// The positions are cut into work units (one sample × `rows` output rows); block b takes a contiguous
// run of units, stages each unit's input rows (zero-padded) and its dy (read through the loader: a
// fused group computes it there) in shared memory, and writes the sums over its units to partials[b];
// stage 2 (sum_partials, or finish_splits in a fused group) adds the rows of partials in a fixed order.
//
// A thread has a role, (input channel c, kernel row ky, group of `tm` output channels), and a row
// group. For each output row of its group it takes the input row into registers once and then, per
// output pixel, loads `tm` dy values (one vector load, a broadcast to the warp's lanes of the same
// group) for K·tm FMAs into dW[o][c][ky][0..K) of its channels. The threads with c = ky = 0 also sum
// db. At the end the row groups' sums are added in row-group order: every sum has a fixed order.
template <class G>
struct ConvWgrad {
  static constexpr int kcols = G::CKK + 1;  // weight taps, then the bias column
  static constexpr int E = G::Out * kcols;  // floats per partial: dW [Out][C·K·K], then db [Out]
  // Output channels per thread: the most of 8, 4, 2 that keep K·tm accumulators ≤ 32 and leave at
  // least a warp of roles; else 1.
  static constexpr int tm = [] {
    for (int t = 8; t > 1; t /= 2)
      if (t * G::K <= 32 && G::C * G::K * ceil_div(G::Out, t) >= 32) return t;
    return 1;
  }();
  static constexpr int o_groups = ceil_div(G::Out, tm), op = o_groups * tm;  // op: dy_s floats per pixel
  static constexpr int roles = G::C * G::K * o_groups;
  static constexpr int role_threads = round_up(roles, 32);
  // Row groups: about 512 threads, as many as the row groups' sums leave room for in shared memory.
#ifdef CTNN_WGRAD_THREADS  // (for measuring)
  static constexpr int threads_wanted = CTNN_WGRAD_THREADS;
#else
  static constexpr int threads_wanted = 512;
#endif
  static constexpr int rg = clamp_to(min_of(threads_wanted / role_threads, smem_limit_floats / E), 1, G::OH);
  static constexpr int threads = role_threads * rg;
  // Registers for two blocks of 512 per SM. (LeNet-5's two weight gradients spill a few registers
  // with it, none with one block: epochs on an H100 0.3% faster at batch 64, 8-10% slower at 256 and
  // 1,024; 2026-11-27.) CTNN_WGRAD_MIN_BLOCKS overrides it (for measuring).
#ifdef CTNN_WGRAD_MIN_BLOCKS
  static constexpr int min_blocks = CTNN_WGRAD_MIN_BLOCKS;
#else
  static constexpr int min_blocks = max_of(1, 1024 / threads);
#endif
  // Output pixels per register chunk of a row (the inner loop is unrolled over them: ≤ 512 FMAs).
  static constexpr int owc = [] {
    const int c = clamp_to(512 / (tm * G::K), 1, G::OW);
    return ceil_div(G::OW, ceil_div(G::OW, c));
  }();
  static constexpr int chunks = ceil_div(G::OW, owc);
  static constexpr int xc = (owc - 1) * G::S + G::span;           // input columns of a chunk
  static constexpr int xw = (chunks * owc - 1) * G::S + G::span;  // input columns staged
  static constexpr int xs = xw | 1;  // x_s row stride, odd: lanes reading different rows hit different banks
  static constexpr int staged_floats(int r) {  // x_s and dy_s for units of r output rows
    return round_up(G::C * ((r - 1) * G::S + G::span) * xs, 4) + r * G::OW * op;
  }
  // Output rows per unit: about two per row group, balanced over a sample's units, fewer when the
  // staging would not fit.
  static constexpr int rows = [] {
    int r = min_of(G::OH, 2 * rg);
    r = ceil_div(G::OH, ceil_div(G::OH, r));
    while (r > 1 && staged_floats(r) > smem_limit_floats) --r;
    return r;
  }();
  static constexpr int tiles = ceil_div(G::OH, rows);
  static constexpr int xr = (rows - 1) * G::S + G::span;  // input rows of a unit
  static constexpr int x_floats = round_up(G::C * xr * xs, 4);
  static constexpr int red_floats = rg > 1 ? rg * E : 0;  // the row groups' sums (reuses the staging)
  static constexpr int smem_floats = max_of(staged_floats(rows), red_floats);
  static constexpr bool fits = smem_floats <= smem_limit_floats && threads <= 1024;
  // At most this many stage-1 blocks (rows of partials): enough for a few blocks per SM of a 132-SM
  // H100, fewer as partials grow and stage 2 has more to read (at most 2^19 floats of partials).
#ifdef CTNN_WGRAD_MAX_PARTIALS  // (for measuring)
  static constexpr int max_partials = CTNN_WGRAD_MAX_PARTIALS;
#else
  static constexpr int max_partials = clamp_to((1 << 19) / E, 256, 1024);
#endif
  static constexpr long long units(int batch) { return (long long)(batch > 0 ? batch : 0) * tiles; }
  static constexpr int partials(int batch) { return int(min_of<long long>(units(batch), max_partials)); }
  static constexpr std::size_t workspace_floats(int max_batch) {
    return std::size_t(partials(max_batch)) * std::size_t(E);
  }
};

// The sums of a block's RG groups of threads (row groups, window groups) in group order, into the
// block's row of partials `part` (E floats): put(row) writes the calling thread's sums into a row.
// With RG > 1 the groups' rows go through red_s, which reuses the staging's shared memory.
template <int RG, int T, class Put>
__device__ __forceinline__ void store_group_sums(float* red_s, int group, int E, float* part, const Put& put) {
  if constexpr (RG > 1) {
    __syncthreads();  // every thread has finished reading the staging
    put(red_s + group * E);
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += T) {
      float s = red_s[e];
#pragma unroll
      for (int g = 1; g < RG; ++g) s += red_s[g * E + e];
      part[e] = s;
    }
  } else {
    put(part);
  }
}

// The body of the weight-gradient kernel; ld_x(n, c, iy, ix) reads x, ld_dy(n, o, oy, ox) reads dy.
template <class G, class LoadX, class LoadDy>
__device__ __forceinline__ void conv_backward_weights_block(const LoadX& ld_x, const LoadDy& ld_dy,
                                                            float* __restrict__ partials,  // [gridDim.x][E]
                                                            int units)                     // batch · tiles
{
  using Cfg = ConvWgrad<G>;
  constexpr int S = G::S, D = G::D, K = G::K, OW = G::OW, TM = Cfg::tm, OP = Cfg::op, RG = Cfg::rg;
  constexpr int ROWS = Cfg::rows, XR = Cfg::xr, XW = Cfg::xw, XS = Cfg::xs, OWC = Cfg::owc, XC = Cfg::xc;
  constexpr int CKK = G::CKK, E = Cfg::E, T = Cfg::threads;
  // Preconditions
  static_assert(G::valid, "ctnn: invalid convolution geometry");
  static_assert(Cfg::fits, "ctnn: the weight-gradient kernel's tiles exceed 48 KB of shared memory");
  static_assert(Cfg::rows * Cfg::tiles >= G::OH && Cfg::chunks * OWC >= OW, "launch shape");

  __shared__ __align__(16) float smem[Cfg::smem_floats];
  float* x_s = smem;                    // (C, XR, XS): input rows of one unit
  float* dy_s = smem + Cfg::x_floats;  // (rows·OW, OP): dy of one unit
  float* red_s = smem;                  // (RG, E): the row groups' sums, after the last unit

  const int role = int(threadIdx.x) % Cfg::role_threads, rgi = int(threadIdx.x) / Cfg::role_threads;
  const bool active = role < Cfg::roles;
  const int og = role % Cfg::o_groups, ky = (role / Cfg::o_groups) % K, c = role / (Cfg::o_groups * K);
  const bool sums_bias = active && c == 0 && ky == 0;

  float acc[TM][K], bias[TM];
#pragma unroll
  for (int t = 0; t < TM; ++t) {
    bias[t] = 0.f;
#pragma unroll
    for (int kx = 0; kx < K; ++kx) acc[t][kx] = 0.f;
  }
  if constexpr (OP > G::Out)  // the padding channels of dy_s stay zero
    for (int e = threadIdx.x; e < ROWS * OW * (OP - G::Out); e += T)
      dy_s[(e / (OP - G::Out)) * OP + G::Out + e % (OP - G::Out)] = 0.f;

  const int nb = int(gridDim.x), blk = int(blockIdx.x);
  const int u_begin = int((long long)blk * units / nb), u_end = int((long long)(blk + 1) * units / nb);
  for (int u = u_begin; u < u_end; ++u) {
    const std::size_t n = std::size_t(u / Cfg::tiles);
    const int oy0 = (u % Cfg::tiles) * ROWS, nrows = min_of(ROWS, G::OH - oy0);
    __syncthreads();  // the previous unit has finished reading x_s and dy_s
    // A loader of max-pooling windows (ConvGroupGrad::window): dy by whole windows (stage_windows),
    // three loads a window (where its maximum is, its gradient, the pooled output) for its PQ × PQ
    // values, instead of three per value through ld_dy. (LeNet-5's weight gradients spent most of
    // their time in the staging's loads and index arithmetic: Nsight Compute, 2026-11-27.)
    constexpr int PQ = window_of<LoadDy>();
    if constexpr (PQ > 0) {
      const int q0 = oy0 / PQ, nq = ceil_div(oy0 + nrows, PQ) - q0;  // the window rows the unit's rows meet
      stage_windows<T>(ld_dy, n, G::Out, q0, nq, OW / PQ, [&](int o, int oy, int ox, float v) {
        const int r = oy - oy0;  // the value's row in the unit
        if (r >= 0 && r < nrows) dy_s[(r * OW + ox) * OP + o] = v;
      });
    }
    // x's rows and dy's (unless staged by windows) in one pass, 8 elements a thread at a time: their
    // loads are in flight together.
    constexpr int NX = G::C * XR * XW, N = NX + (PQ > 0 ? 0 : G::Out * ROWS * OW);
    for (int e0 = threadIdx.x; e0 < N; e0 += 8 * T) {
      float v[8];
      int to[8];  // where v[i] goes in smem (x_s or dy_s), or −1
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const int e = e0 + i * T;
        v[i] = 0.f, to[i] = -1;
        if (e < NX) {
          const int cc = e / (XR * XW), r = (e / XW) % XR, j = e % XW;
          const int iy = oy0 * S - G::P + r, ix = j - G::P;
          if (iy >= 0 && iy < G::H && ix >= 0 && ix < G::W) v[i] = ld_x(n, cc, iy, ix);
          to[i] = (cc * XR + r) * XS + j;
        } else if (e < N) {
          const int o = (e - NX) / (ROWS * OW), p = (e - NX) % (ROWS * OW);
          if (p < nrows * OW) v[i] = ld_dy(n, o, oy0 + p / OW, p % OW);
          to[i] = Cfg::x_floats + p * OP + o;
        }
      }
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (to[i] >= 0) smem[to[i]] = v[i];
    }
    __syncthreads();
    if (active)
      for (int r = rgi; r < nrows; r += RG) {
        const float* xrow = x_s + (c * XR + r * S + ky * D) * XS;
        const float* drow = dy_s + r * OW * OP + og * TM;
#pragma unroll 1
        for (int ch = 0; ch < Cfg::chunks; ++ch) {
          float xv[XC];
#pragma unroll
          for (int j = 0; j < XC; ++j) xv[j] = xrow[ch * OWC * S + j];
#pragma unroll
          for (int j = 0; j < OWC; ++j) {
            if (Cfg::chunks > 1 && ch * OWC + j >= OW) break;
            float d[TM];
            load_floats(drow + (ch * OWC + j) * OP, d);
#pragma unroll
            for (int t = 0; t < TM; ++t) {
#pragma unroll
              for (int kx = 0; kx < K; ++kx) acc[t][kx] = fmaf(d[t], xv[j * S + kx * D], acc[t][kx]);
              if (sums_bias) bias[t] += d[t];
            }
          }
        }
      }
  }

  // The sum over the row groups, in their order, into this block's row of partials.
  float* part = partials + std::size_t(blk) * E;
  const auto put = [&](float* row) {
    if (!active) return;
#pragma unroll
    for (int t = 0; t < TM; ++t) {
      const int o = og * TM + t;
      if (o >= G::Out) continue;
#pragma unroll
      for (int kx = 0; kx < K; ++kx) row[o * CKK + (c * K + ky) * K + kx] = acc[t][kx];
      if (sums_bias) row[G::Out * CKK + o] = bias[t];
    }
  };
  store_group_sums<RG, T>(red_s, rgi, E, part, put);
}

template <class G>
__global__ void __launch_bounds__(ConvWgrad<G>::threads, ConvWgrad<G>::min_blocks)
kernel_conv_backward_weights(const float* __restrict__ x,   // [batch][C][H][W]
                             const float* __restrict__ dy,  // [batch][Out][OH][OW]
                             float* __restrict__ partials,  // [gridDim.x][E]
                             int units)                     // batch · tiles
{
  conv_backward_weights_block<G>(PlainLoad<G::C, G::H, G::W>{x}, PlainLoad<G::Out, G::OH, G::OW>{dy}, partials,
                                 units);
}

}  // namespace ctnn::kernels
