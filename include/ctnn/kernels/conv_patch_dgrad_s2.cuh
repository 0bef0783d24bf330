#pragma once
// FP32 backward data of stride-2 convolutions from a staged dy patch (the staging of conv_patch.cuh).
//
// With stride 2 and P = (K − 1) / 2, input pixel (2a + py, 2b + px) of dx receives only the taps whose
// parity matches its own:
//   dx[c][2a + py][2b + px] = Σ_o Σ_{ky ≡ py + P, kx ≡ px + P (mod 2)} w[o][c][ky][kx] ·
//                                                           dy[o][a + (py + P − ky) / 2][b + (px + P − kx) / 2],
// 9 taps over the four parity classes of a 3×3 window (1, 2, 2 and 4). The implicit GEMM
// (conv_gemm.cuh) runs the classes as four problems whose k loops have 1 to 4 taps per channel, and
// gathers dy 4 bytes per (k, column): 22-30% of the FP32 peak on the CIFAR layers. Here a block owns
// BM input channels × TH dy rows of one sample, that is dx rows 2·y0 .. 2·(y0 + TH), and per step of 8
// output channels o stages (conv_patch_load_step) the dy rows those read (TH + P rows from y0 −
// floor(P / 2), zero halo) and w[o][c0 .. c0 + BM][K][K]. A thread owns TM channels (mg + MG·i, so that
// a warp's weight loads fall on distinct banks) × both dx rows of one dy row × the 2·TB dx columns of TB
// dy columns: per o it reads its P + 1 dy row segments once (TB / 4 16-byte loads and P single ones per
// row) and per tap TM weights, which feed TM · TB · 2 FMAs (3×3, TM = 2, TB = 8: 24 loads per 144 FMAs).
//
// Summation order: o increasing, then the taps (ky, kx) increasing, one fmaf each from zero: the unsplit
// implicit GEMM's order (its parity classes list their taps that way), so the two agree to the bit.
#include <cstddef>
#include <stdexcept>

#include "conv_patch.cuh"

namespace ctnn::kernels {

// dy row (or column) offset of tap k for dx parity p: (p + P − k) / 2, where p + P − k is even.
constexpr int conv_s2_offset(int p, int k, int P) { return (p + P - k) / 2; }
constexpr int conv_s2_parity(int k, int P) { return ((k - P) % 2 + 2) % 2; }  // the p whose taps include k

// Which layers: stride 2, no dilation, K odd and at most 5 with P = (K − 1) / 2, H and W even (OH = H / 2,
// OW = W / 2), OW a multiple of 8 (the staging's 16-byte rows) and at most 64, Out a multiple of 8
// (steps of 8 channels) and C of 4 (16-byte weight runs).
template <class G>
constexpr bool conv_patch_dgrad_s2_shape() {
  return G::S == 2 && G::D == 1 && G::K % 2 == 1 && G::K <= 5 && 2 * G::P == G::K - 1 && G::H % 2 == 0 &&
         G::W % 2 == 0 && G::OW % 8 == 0 && G::OW <= 64 && G::Out % 8 == 0 && G::C % 4 == 0;
}

// The staging problem: source dy [batch][Out][OH][OW], a dy row's window P + 1 rows from offset
// −floor(P / 2) (conv_s2_offset over the taps spans floor(P / 2) below to ceil(P / 2) above), weights
// read per o as w[o][c][K][K] (dgrad layout), M = C outputs.
template <class G>
struct ConvPatchDgradS2 {
  static constexpr int M = G::C, SC = G::Out, H = G::OH, W = G::OW, K = G::P + 1, P = G::P / 2, WK = G::K;
  static constexpr bool has_bias = false, dgrad = true;
  static_assert(conv_s2_offset(conv_s2_parity(0, G::P), 0, G::P) - conv_s2_offset(conv_s2_parity(G::K - 1, G::P), G::K - 1, G::P) ==
                    K - 1,
                "the window's dy rows: from tap K − 1 (lowest offset) to tap 0 (highest)");
};

// BM = 32 input channels × TH dy rows; a thread TM × TB (see above): MG = 32 / TM channel groups × TH ·
// OW / TB column groups.
template <class G, int TM_, int TB_, int TH_>
struct ConvPatchS2Tile
    : ConvPatchLayout<ConvPatchDgradS2<G>, 32, TH_, 2, (32 / TM_) * TH_ * (G::OW / TB_), true> {
  static constexpr int TM = TM_, TB = TB_, MG = 32 / TM_, CGR = G::OW / TB_;  // CGR: column groups per dy row
  static constexpr int threads = MG * TH_ * CGR;
  static constexpr int min_blocks = 512 / threads;  // at most 128 registers
  static_assert(32 % TM == 0 && 32 % MG == 0, "a warp holds whole sets of channel groups");
  static_assert(TB % 4 == 0 && G::OW % TB == 0, "a thread's dy columns are whole 16-byte chunks of one row");
  static_assert(threads % 32 == 0 && threads >= 64 && threads <= 256, "2 to 8 warps");
};

// Block (blockIdx.x = sample · row_tiles + row tile, blockIdx.y = BM tile of the input channels). Fn: the
// activation below the layer, whose backward the store applies (conv_patch_store; identity_fn: none).
template <class G, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_dgrad_s2(const float* __restrict__ w,      // [Out][C][K][K]
                           const float* __restrict__ below,  // [batch][C][H][W]: Fn's output (or unused)
                           const float* __restrict__ dy,     // [batch][Out][OH][OW]
                           float* __restrict__ dx)           // [batch][C][H][W]
{
  using Pb = ConvPatchDgradS2<G>;
  constexpr int TM = T::TM, TB = T::TB, MG = T::MG, K = G::K, KK = T::KK, P = G::P;
  constexpr int SK = Pb::K, SP = Pb::P, SL = TB + SK - 1;  // a thread's dy values of one row
  constexpr std::size_t dy_plane = std::size_t(G::OH) * G::OW, dx_plane = std::size_t(G::H) * G::W;

  float* As = conv_mma_smem();               // (stages, CK, OS): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;  // (stages, CK, CS): the dy patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * T::BM;
  const float* dy_n = dy + std::size_t(n) * G::Out * dy_plane;

  conv_patch_zero_halo<Pb, T>(Bs, y0);
  auto load_step = [&](int stage, int step) { conv_patch_load_step<Pb, T>(As, Bs, stage, step, w, dy_n, m0, y0); };

  // This thread: channel group mg, dy row yl (in the tile), first dy column b0.
  const int mg = threadIdx.x % MG, pg = threadIdx.x / MG, yl = pg / T::CGR, b0 = pg % T::CGR * TB;
  const int a_at = mg * KK;                  // w[o][m0 + mg + MG·i][tap] = A_s[a_at + o·OS + i·MG·KK + tap]
  const int b_at = yl * T::RS + b0 + 4 - SP;  // dy column b0 − SP of the window's first row

  float acc[TM][2][2 * TB];  // (channel, dx row parity, dx column 2·(b − b0) + parity)
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int py = 0; py < 2; ++py)
#pragma unroll
      for (int j = 0; j < 2 * TB; ++j) acc[i][py][j] = 0.f;

  cp_async_pipeline<T::stages>(T::steps, load_step, [&](int stage) {
    const float* A = As + stage * T::a_floats + a_at;
    const float* B = Bs + stage * T::b_floats + b_at;
#pragma unroll 1
    for (int o = 0; o < T::CK; ++o) {
      float s[SK][SL];  // dy rows y0 + yl − SP + r, columns b0 − SP + j
#pragma unroll
      for (int r = 0; r < SK; ++r) {
        const float* row = B + o * T::CS + r * T::RS;
#pragma unroll
        for (int q = 0; q < TB / 4; ++q) {  // row + SP is 16-byte aligned: dy columns b0 .. b0 + TB
          const float4 v = *reinterpret_cast<const float4*>(row + SP + 4 * q);
          s[r][SP + 4 * q] = v.x, s[r][SP + 4 * q + 1] = v.y, s[r][SP + 4 * q + 2] = v.z, s[r][SP + 4 * q + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < SL; ++j)
          if (j < SP || j >= SP + TB) s[r][j] = row[j];
      }
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const int py = conv_s2_parity(ky, P), r = conv_s2_offset(py, ky, P) + SP;
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const int px = conv_s2_parity(kx, P), dc = conv_s2_offset(px, kx, P) + SP;
          float a[TM];
#pragma unroll
          for (int i = 0; i < TM; ++i) a[i] = A[o * T::OS + i * MG * KK + ky * K + kx];
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int b = 0; b < TB; ++b) acc[i][py][2 * b + px] = fmaf(a[i], s[r][b + dc], acc[i][py][2 * b + px]);
        }
      }
    }
  });

  const int a = y0 + yl;
  if (a >= G::OH) return;
  const std::size_t at = std::size_t(n) * G::C * dx_plane + std::size_t(2 * a) * G::W + 2 * b0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int c = m0 + mg + MG * i;
    if (c < G::C)
#pragma unroll
      for (int py = 0; py < 2; ++py)
#pragma unroll
        for (int q = 0; q < TB / 2; ++q) {
          const float v[4] = {acc[i][py][4 * q], acc[i][py][4 * q + 1], acc[i][py][4 * q + 2], acc[i][py][4 * q + 3]};
          conv_patch_store<true, Fn>(dx, below, at + c * dx_plane + py * G::W + 4 * q, v);
        }
  }
}

// --- Launch --------------------------------------------------------------------------------------------
// The copies and the stores are 16 bytes wide: weights, dy and dx must be 16-byte aligned.
// Fn, below: the activation below the layer and its output (see the kernel).
template <class G, class T, class Fn = identity_fn>
void launch_conv_patch_dgrad_s2(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                                const float* below = nullptr) {
  if (!conv_patch_fp32_aligned(w, dy, dx))
    throw std::invalid_argument("ctnn: Conv backward (FP32 stride-2 patch kernel): weights, dy and dx must be "
                                "16-byte aligned");
  launch_conv_patch_kernel<ConvPatchDgradS2<G>, T, kernel_conv_patch_dgrad_s2<G, T, Fn>>(stream, w, below, dy, dx, batch);
}

// A tile of about 128 threads: whole warps of dy rows.
template <class G, int TM, int TB>
using ConvPatchS2 = ConvPatchS2Tile<G, TM, TB, conv_patch_rows_for((32 / TM) * (G::OW / TB), 128)>;

// The tiles the rule takes, from conv_bench on an H100 (docs/conv_kernels.md; 128 threads, 32 channels):
//   wide    2 channels × 8 dy columns a thread: the fastest where its blocks fill the GPU three times
//           over (two blocks per SM each time): 32->64 s2 @32, B = 256: 88.8 µs (1 × 8: 94.2, the
//           implicit GEMM 136.5);
//   narrow  1 channel × 8 dy columns: twice the blocks, everywhere else (64->128 s2 @16, B = 256: 87.5
//           against 93.6 wide and 124.0 for the GEMM; B = 64: 29.5 against 33.1 and 39.1).
// 2 × 4 and 4 × 4 a thread were slower on every layer measured.
template <class G>
using ConvPatchS2Wide = ConvPatchS2<G, 2, 8>;
template <class G>
using ConvPatchS2Narrow = ConvPatchS2<G, 1, 8>;

template <class G>
constexpr bool conv_patch_dgrad_s2_fits() {
  if constexpr (!conv_patch_dgrad_s2_shape<G>()) return false;  // the tiles exist only for these
  else return ConvPatchS2Wide<G>::within_budget && ConvPatchS2Narrow<G>::within_budget;
}

template <class G, class Fn = identity_fn>
void launch_conv_patch_dgrad_s2_auto(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                                     const float* below = nullptr) {
  using Wide = ConvPatchS2Wide<G>;
  if ((long long)batch * Wide::row_tiles * ceil_div(G::C, 32) >= 3 * conv_two_waves)
    launch_conv_patch_dgrad_s2<G, Wide, Fn>(stream, w, dy, dx, batch, below);
  else
    launch_conv_patch_dgrad_s2<G, ConvPatchS2Narrow<G>, Fn>(stream, w, dy, dx, batch, below);
}

}  // namespace ctnn::kernels
