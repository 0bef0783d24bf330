#pragma once
// The weight gradient of a network's RGB stem (layer 0: a 3×3 "same" convolution of at most 4 input
// channels) computed in the epilogue of the TF32 stride-2 backward data of the convolution above the
// stem's activation (kernel_conv_patch_dgrad_s2_mma, conv_patch_dgrad_s2.cuh).
//
// That backward data ends with g = dx · Fn'(the stem's output), the gradient at the stem's output, in
// its accumulators: a block holds all 32 of the stem's channels × 8 · 32 of its pixels. The stem's
//   dW0[m][c][ky][kx] = Σ_p g[m][p] · x0[c][p + (ky − 1, kx − 1)],   db0[m] = Σ_p g[m][p]
// over those pixels is a 32 × 27 product with k = the pixels, and the accumulators are already mma
// A fragments: lane (g, t) holds rows g, g + 8 (channels) × columns 2t, 2t + 1 (pixels) of each 16 × 8
// tile, and an A fragment wants rows g, g + 8 × k slots t, t + 4; a product sums over k in any order,
// so k slot t is taken as pixel 2t and slot t + 4 as pixel 2t + 1, the B fragment (x0 at the same
// pixels, shifted by the column's tap) read in that order from the block's x0 patch in shared memory.
// Each block writes its partial row (dW0 in its own order, then db0; the bias summed in FP32) and
// sum_partials adds the rows in order: deterministic. Nothing then reads the stem's output gradient:
// the backward data does not store it, and the stem's own weight-gradient kernel does not run (33.5 MB
// written and read again at batch 256).
#include "conv_mma.cuh"

namespace ctnn::kernels {

// G: the stride-2 layer (its input is the stem's output), G0: the stem.
template <class G, class G0>
struct StemWgradEpilogue {
  static constexpr int M = G0::Out, C0 = G0::C, N = C0 * 9, NT = ceil_div(N, 8);  // n tiles of the 27 columns
  static constexpr int E = M * N + M, split = M * N;  // a block's partial row: dW0, then db0
  // The x0 patch: C0 planes of 2·TH + 2 rows (the block's dx rows and one each side) of W + 2 columns
  // (column −1 to W), zero outside the image.
  template <int TH>
  static constexpr int rows = 2 * TH + 2;
  static constexpr int XR = G::W + 2;
  template <int TH>
  static constexpr int patch_floats = C0 * rows<TH> * XR;
};

template <class G, class G0>
constexpr bool stem_wgrad_epilogue_shape() {
  return G0::S == 1 && G0::K == 3 && G0::P == 1 && G0::D == 1 && G0::C <= 4 && G0::Out == 32 && G0::H == G::H &&
         G0::W == G::W && G::C == 32;
}

// After the backward data's main loop (its shared memory free: the caller's barrier), from the masked
// accumulators acc[class 2·py + px][m tile][n tile] (T: ConvPatchS2Mma's warps). Lane (g, t) of warp
// `warp`: channels mw + 16·i + {g, g + 8}; n tile j = dy row yl[j] of the tile, dy columns xb[j] ..
// xb[j] + 7; x0_n: sample n's stem input; partial: the block's row of E floats. Every thread calls it.
template <class G, class G0, class T>
__device__ __forceinline__ void stem_wgrad_epilogue(const float (&acc)[4][T::MI][T::NJ][4], const float* x0_n,
                                                    float* smem, int y0, int mw, const int (&yl)[T::NJ],
                                                    const int (&xb)[T::NJ], float* partial) {
  using S = StemWgradEpilogue<G, G0>;
  constexpr int MI = T::MI, NJ = T::NJ, NT = S::NT, WN = T::WN, XR = S::XR, PR = S::template rows<T::TH>;
  constexpr int XP = PR * XR, M = S::M, N = S::N;
  float* xs = smem;                                // [C0][PR][XR]
  float* red = xs + S::template patch_floats<T::TH>;  // [WN][M][NT·8], then [WN][M] (the bias)
  float* red_b = red + WN * M * NT * 8;
  static_assert((S::template patch_floats<T::TH> + WN * M * (NT * 8 + 1)) * 4 <= T::smem_bytes,
                "the epilogue's patch and sums fit in the main loop's shared memory");

  for (int e = threadIdx.x; e < S::template patch_floats<T::TH>; e += T::threads) {
    const int c = e / XP, r = e % XP / XR, col = e % XR;
    const int y = 2 * y0 - 1 + r, x = col - 1;
    xs[e] = y >= 0 && y < G::H && x >= 0 && x < G::W ? x0_n[(std::size_t(c) * G::H + y) * G::W + x] : 0.f;
  }
  __syncthreads();

  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  int base[NT];  // this lane's column n = 8·nt + g: x0 plane c, tap (ky, kx)
  bool live[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int n = 8 * nt + g;
    live[nt] = n < N;
    base[nt] = live[nt] ? n / 9 * XP + n % 9 / 3 * XR + n % 3 : 0;
  }
  float d[MI][NT][4] = {};
  float bias[MI][2] = {};
#pragma unroll
  for (int cl = 0; cl < 4; ++cl)
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      // k slot t: dx pixel (2·yl + py, 2·xb + 4t + px), the tile's dy column xb + 2t; slot t + 4: two columns on.
      const int pix = (2 * yl[j] + cl / 2) * XR + 2 * xb[j] + 4 * t + cl % 2;
      unsigned a[MI][4];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const float(&c)[4] = acc[cl][i][j];
        a[i][0] = tf32_round(c[0]), a[i][1] = tf32_round(c[2]), a[i][2] = tf32_round(c[1]), a[i][3] = tf32_round(c[3]);
        bias[i][0] += c[0] + c[1], bias[i][1] += c[2] + c[3];
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const unsigned b[2] = {live[nt] ? tf32_round(xs[base[nt] + pix]) : 0u,
                               live[nt] ? tf32_round(xs[base[nt] + pix + 2]) : 0u};
#pragma unroll
        for (int i = 0; i < MI; ++i) mma_m16n8k8_tf32(d[i][nt], a[i], b);
      }
    }

  // The warps of the same channels (warp % WN) leave their sums in shared memory; then each partial
  // column is the sum of theirs in warp order.
  const int wn = warp % WN;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int m = mw + 16 * i + 8 * h + g;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        float* at = red + (wn * M + m) * NT * 8 + 8 * nt + 2 * t;
        at[0] = d[i][nt][2 * h], at[1] = d[i][nt][2 * h + 1];
      }
      const float b = mma_group_sum(bias[i][h]);
      if (t == 0) red_b[wn * M + m] = b;
    }
  __syncthreads();
  for (int e = threadIdx.x; e < S::E; e += T::threads) {
    float v = 0.f;
    if (e < S::split) {
      const int m = e / N, n = e % N;
#pragma unroll
      for (int k = 0; k < WN; ++k) v += red[(k * M + m) * NT * 8 + n];
    } else {
#pragma unroll
      for (int k = 0; k < WN; ++k) v += red_b[k * M + e - S::split];
    }
    partial[e] = v;
  }
}

}  // namespace ctnn::kernels
