#pragma once
// Backward data of a small convolution as a GEMM into columns, then col2im, in shared memory:
//
//   cols[c, ky, kx][oy, ox] = Σ_o W[o][c][ky][kx] · dy[o][oy][ox]        (M = C·K·K, N = OH·OW, K = Out)
//   dx[c][iy][ix]           = Σ over the taps with iy = oy·S − P + ky·D, ix = ox·S − P + kx·D of cols
//
// The flipped forward (conv_direct.cuh) computes the same sums as a convolution of dy zero-padded by
// D·(K − 1) − P: at LeNet-5's conv2 (dy 10 × 10, dx 14 × 14) half its FMAs multiply that padding,
// and its staging and index arithmetic took half its instructions. Here every FMA is a term of the
// result, and a thread's 4 × 4 tile of cols takes two 16-byte loads per 16 FMAs.
//
// A block takes one sample and a slice of `cpb` input channels: it stages the layer's weights of those
// channels ([Out][cpb·K·K], rows padded to 4 with zeros), the sample's dy through the group's loader
// (the pooling's and the activation's backward), computes its rows of cols, then dx of its channels.
// Every sum has a fixed order: cols over o, dx over (ky, kx), both increasing.
#include <cstddef>

#include "conv_direct.cuh"
#include "launch.cuh"

namespace ctnn::kernels {

template <class G>
struct ConvDgradCols {
  static constexpr int KK = G::K * G::K, N = G::OHW, NP = round_up(N, 4);
  static constexpr int smem_for(int cpb) {
    const int mp = round_up(cpb * KK, 4);
    return G::Out * mp + G::Out * NP + mp * NP;  // weights, dy, cols
  }
  // Channels per block: the most that fit in 48 KB, then balanced over the slices. CTNN_DGRAD_COLS_SLICES
  // sets the number of slices (for measuring).
  static constexpr int slices = [] {
#ifdef CTNN_DGRAD_COLS_SLICES
    return clamp_to(CTNN_DGRAD_COLS_SLICES, 1, G::C);
#else
    int s = 1;
    while (s < G::C && smem_for(ceil_div(G::C, s)) > smem_limit_floats) ++s;
    return s;
#endif
  }();
  static constexpr int cpb = ceil_div(G::C, slices);
  static constexpr int M = cpb * KK, MP = round_up(M, 4);
  static constexpr int tiles = (MP / 4) * (NP / 4);  // 4 × 4 tiles of cols
  static constexpr int threads = clamp_to(round_up(tiles, 32), 64, 256);
  static constexpr int smem_floats = smem_for(cpb);
  static constexpr bool fits = smem_floats <= smem_limit_floats;
};

// Block b: sample b / slices, channels [(b % slices)·cpb, +cpb). ld(n, o, oy, ox) gives dy at the
// convolution's output (a window loader, ConvGroupGrad::window, stages by whole windows).
template <class G, class Load>
__device__ __forceinline__ void conv_dgrad_cols_block(const float* __restrict__ w,  // [Out][C][K][K]
                                                      const Load& ld,
                                                      float* __restrict__ dx)  // [batch][C][H][W]
{
  using Cfg = ConvDgradCols<G>;
  constexpr int K = G::K, KK = Cfg::KK, N = Cfg::N, NP = Cfg::NP, MP = Cfg::MP, CPB = Cfg::cpb;
  constexpr int T = Cfg::threads, Out = G::Out, OW = G::OW;
  static_assert(Cfg::fits, "ctnn: the backward data's columns exceed 48 KB of shared memory");

  __shared__ __align__(16) float smem[Cfg::smem_floats];
  float* w_s = smem;                   // [Out][MP]
  float* dy_s = smem + Out * MP;       // [Out][NP]
  float* cols = dy_s + Out * NP;       // [MP][NP]

  const std::size_t n = blockIdx.x / Cfg::slices;
  const int c0 = int(blockIdx.x % Cfg::slices) * CPB, cn = min_of(CPB, G::C - c0);

  // The weights of channels c0.. (zero rows past them), WB a thread at a time, and dy (zero columns
  // past N). Where one pass of WB takes all the weights, their loads are in flight while dy is staged.
  constexpr int WB = min_of(ceil_div(Out * MP, T), 8);
  constexpr bool one_pass = Out * MP <= WB * T;
  float wv[WB];
  const auto load_w = [&](int e0) {
#pragma unroll
    for (int i = 0; i < WB; ++i) {
      const int e = e0 + i * T, o = e / MP, r = e % MP;
      wv[i] = e < Out * MP && r < cn * KK ? w[std::size_t(o) * G::CKK + c0 * KK + r] : 0.f;
    }
  };
  const auto store_w = [&](int e0) {
#pragma unroll
    for (int i = 0; i < WB; ++i)
      if (e0 + i * T < Out * MP) w_s[e0 + i * T] = wv[i];
  };
  if constexpr (one_pass) {
    load_w(int(threadIdx.x));
  } else {
    for (int e0 = threadIdx.x; e0 < Out * MP; e0 += WB * T) load_w(e0), store_w(e0);
  }
  if constexpr (NP > N)
    for (int e = threadIdx.x; e < Out * (NP - N); e += T) dy_s[(e / (NP - N)) * NP + N + e % (NP - N)] = 0.f;
  if constexpr (window_of<Load>() > 0) {
    constexpr int PQ = window_of<Load>();
    stage_windows<T>(ld, n, Out, 0, G::OH / PQ, OW / PQ,
                     [&](int o, int oy, int ox, float v) { dy_s[o * NP + oy * OW + ox] = v; });
  } else {
    for (int e = threadIdx.x; e < Out * N; e += T) dy_s[(e / N) * NP + e % N] = ld(n, e / N, (e % N) / OW, e % OW);
  }
  if constexpr (one_pass) store_w(int(threadIdx.x));
  __syncthreads();

  // cols, a 4 × 4 tile a thread at a time: rows r0.., columns p0.. (neighbouring threads, neighbouring
  // columns: conflict-free 16-byte loads of dy and stores of cols; the weights a broadcast).
  for (int t = threadIdx.x; t < Cfg::tiles; t += T) {
    const int r0 = (t / (NP / 4)) * 4, p0 = (t % (NP / 4)) * 4;
    float acc[4][4] = {};
#pragma unroll 4
    for (int o = 0; o < Out; ++o) {
      const float4 a = *reinterpret_cast<const float4*>(w_s + o * MP + r0);
      const float4 b = *reinterpret_cast<const float4*>(dy_s + o * NP + p0);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      *reinterpret_cast<float4*>(cols + (r0 + i) * NP + p0) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
  }
  __syncthreads();

  // dx of the block's channels: a thread takes a pixel and finds the taps that reach it once for its
  // channels, (ky, kx) increasing. (The rows of channels past cn are zero: their weights were.)
  constexpr int HW = G::H * G::W;
  float* dxn = dx + (n * G::C + c0) * HW;
  for (int e = threadIdx.x; e < HW; e += T) {
    const int iy = e / G::W, ix = e % G::W;
    float s[CPB] = {};
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
      const int ty = iy + G::P - ky * G::D, oy = ty / G::S;
      if (ty < 0 || ty % G::S != 0 || oy >= G::OH) continue;
#pragma unroll
      for (int kx = 0; kx < K; ++kx) {
        const int tx = ix + G::P - kx * G::D, ox = tx / G::S;
        if (tx < 0 || tx % G::S != 0 || ox >= OW) continue;
        const float* col = cols + (ky * K + kx) * NP + oy * OW + ox;
#pragma unroll
        for (int cl = 0; cl < CPB; ++cl) s[cl] += col[cl * KK * NP];
      }
    }
#pragma unroll
    for (int cl = 0; cl < CPB; ++cl)
      if (cl < cn) dxn[cl * HW + e] = s[cl];
  }
}

}  // namespace ctnn::kernels
