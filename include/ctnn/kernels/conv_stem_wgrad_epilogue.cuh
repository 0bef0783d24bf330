#pragma once
// The weight gradient of a network's RGB stem (layer 0: a 3×3 "same" convolution of at most 4 input
// channels and 32 outputs) computed in the epilogue of the TF32 backward data of the convolution above the
// stem's activation: the stride-2 patch kernel (kernel_conv_patch_dgrad_s2_mma, conv_patch_dgrad_s2.cuh:
// strided's 32→64) or the stride-1 one (kernel_conv_patch, conv_patch.cuh: vgg's 32→32).
//
// That backward data ends with g = dx · Fn'(the stem's output), the gradient at the stem's output, in its
// accumulators: a block holds all 32 of the stem's channels × its tile of pixels. The stem's
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
#include <stdexcept>
#include <string>

#include "conv_mma.cuh"
#include "launch.cuh"
#include "reduce.cuh"

namespace ctnn::kernels {

// G0: the stem. A block's x0 patch: C0 planes of Rows + 2 rows (the block's rows and one each side) of
// W + 2 columns (column −1 to W), zero outside the image.
template <class G0>
struct StemWgradEpilogue {
  static constexpr int M = G0::Out, C0 = G0::C, N = C0 * 9, NT = ceil_div(N, 8);  // n tiles of the 27 columns
  static constexpr int E = M * N + M, split = M * N;  // a block's partial row: dW0, then db0
  static constexpr int XR = G0::W + 2;
  template <int Rows>
  static constexpr int patch_floats = C0 * (Rows + 2) * XR;
  // Its shared memory: the patch, then WN warps' sums of the M × 8·NT columns and of the bias.
  template <int Rows, int WN>
  static constexpr int smem_bytes = (patch_floats<Rows> + WN * M * (NT * 8 + 1)) * 4;
};

// The layers whose backward data can take it: the stem's output is the layer's input (same size; the
// layer's M = C = the stem's 32 channels, all in one block).
template <class G, class G0>
constexpr bool stem_wgrad_epilogue_shape() {
  return G0::S == 1 && G0::K == 3 && G0::P == 1 && G0::D == 1 && G0::C <= 4 && G0::Out == 32 && G0::H == G::H &&
         G0::W == G::W && G::C == 32;
}

// After the backward data's main loop (its shared memory free: the caller's barrier), from its masked
// accumulators. The block covers image rows row0 .. row0 + Rows − 1 of sample n (x0_n: its stem input);
// T: the kernel's tile (MI m tiles of 16 channels a warp from channel mw; WN warps share each channel
// range). The lane's KT k tiles: frag(kt, i) the 16 × 8 accumulator tile of m tile i; its k slot t is
// the pixel at x0-patch offset at(kt) (row · XR + column, tap (0, 0)), slot t + 4 at at(kt) + Second.
// partial: the block's row of E floats. Every thread calls it.
template <class G0, class T, int Rows, int KT, int Second, class Frag, class At>
__device__ __forceinline__ void stem_wgrad_epilogue(Frag&& frag, At&& at, const float* x0_n, float* smem, int row0,
                                                    int mw, float* partial) {
  using S = StemWgradEpilogue<G0>;
  constexpr int MI = T::MI, NT = S::NT, WN = T::WN, XR = S::XR, XP = (Rows + 2) * XR, M = S::M, N = S::N;
  constexpr int patch = S::template patch_floats<Rows>;
  float* xs = smem;           // [C0][Rows + 2][XR]
  float* red = xs + patch;    // [WN][M][NT·8]
  float* red_b = red + WN * M * NT * 8;  // [WN][M]
  static_assert(S::template smem_bytes<Rows, WN> <= T::smem_bytes,
                "the epilogue's patch and sums fit in the main loop's shared memory");

  for (int e = threadIdx.x; e < patch; e += T::threads) {
    const int c = e / XP, r = e % XP / XR, col = e % XR;
    const int y = row0 - 1 + r, x = col - 1;
    xs[e] = y >= 0 && y < G0::H && x >= 0 && x < G0::W ? x0_n[(std::size_t(c) * G0::H + y) * G0::W + x] : 0.f;
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
  for (int kt = 0; kt < KT; ++kt) {
    const int pix = at(kt);
    unsigned a[MI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const float(&c)[4] = frag(kt, i);  // rows g, g + 8 × pixels 2t, 2t + 1: the A fragment's k slots t, t + 4
      a[i][0] = tf32_round(c[0]), a[i][1] = tf32_round(c[2]), a[i][2] = tf32_round(c[1]), a[i][3] = tf32_round(c[3]);
      bias[i][0] += c[0] + c[1], bias[i][1] += c[2] + c[3];
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const unsigned b[2] = {live[nt] ? tf32_round(xs[base[nt] + pix]) : 0u,
                             live[nt] ? tf32_round(xs[base[nt] + pix + Second]) : 0u};
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
        float* to = red + (wn * M + m) * NT * 8 + 8 * nt + 2 * t;
        to[0] = d[i][nt][2 * h], to[1] = d[i][nt][2 * h + 1];
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

// The launch of a backward-data kernel with this epilogue (Kernel, a block a partial row; its tile's Threads
// and SmemBytes; Tiles row tiles a sample), then sum_partials of the rows into dw0 and db0, both dependent.
template <class G0, auto Kernel, int Threads, int SmemBytes, int Tiles>
void launch_with_stem_wgrad(cudaStream_t stream, const float* w, const float* below, const float* dy, const float* x0,
                            float* partials, float* dw0, float* db0, int batch) {
  using S = StemWgradEpilogue<G0>;
  const long long rows = (long long)batch * Tiles;
  if (rows > 0x7fffffffLL) throw std::invalid_argument("ctnn: Conv: batch " + std::to_string(batch) + " is too large");
  if (batch <= 0) return;
  request_dynamic_smem<Kernel, SmemBytes>();
  launch_kernel(Kernel, dim3(unsigned(rows)), Threads, SmemBytes, stream, 1, Launch::dependent, w, below, dy, x0, partials);
  sum_partials(stream, partials, int(rows), S::E, S::split, dw0, db0, Launch::dependent);
}

}  // namespace ctnn::kernels
