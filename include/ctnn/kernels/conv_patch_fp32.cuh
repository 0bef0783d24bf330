#pragma once
// FP32 convolution from an input patch staged in shared memory: the forward of stride-1, "same"
// convolutions and their backward data (the problems and the staging of conv_patch.cuh), on the FP32
// cores.
//
// The implicit GEMM (conv_gemm.cuh) copies each input value once per tap and column, 4 bytes at a time,
// and those copies' instructions, not its FMAs, set its pace (35-45% of the FP32 peak). Here a block
// stages, per step of 8 reduced channels, the whole input rows its outputs read (16-byte copies, once
// per block) and the weights of those channels. A thread owns TM output channels (m0 + mg + MG·i: rows
// MG apart, so that the weight loads of a warp's MG channel groups fall on distinct banks) × TN
// consecutive output columns of one output row. Per reduced channel c and window row ky it reads the
// TN + K − 1 input values of its row once (TN/4 16-byte loads, K − 1 single ones) and slides along them:
// per tap kx, TM weights (one load each) feed TM·TN FMAs. For 3×3 and 8 × 8: 28 loads per 192 FMAs.
//
// Summation order: from the bias, k = (c, ky, kx) of the weights increasing, one fmaf per term: the
// implicit GEMM's order, so both directions equal conv_gemm.cuh's to the bit (the forward also the
// direct kernels'). Backward data reads the flipped window, so it walks the patch's window backwards.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "conv_gemm.cuh"
#include "conv_patch.cuh"

namespace ctnn::kernels {

// --- Tile ----------------------------------------------------------------------------------------------
// BM output channels × TH output rows of one sample; a thread TM × TN, so MG = BM / TM channel groups ×
// TH · W / TN column groups of threads.
template <class Pb, int TM, int TN, int BM, int TH>
constexpr int conv_patch_fp32_threads() {
  return (BM / TM) * TH * (Pb::W / TN);
}
template <class Pb, int BM_, int TH_, int Stages_ = 2, int TM_ = 8, int TN_ = 8, int MinBlocks_ = 0>
struct ConvPatchF32Tile
    : ConvPatchLayout<Pb, BM_, TH_, Stages_, conv_patch_fp32_threads<Pb, TM_, TN_, BM_, TH_>(), true> {
  static constexpr int TM = TM_, TN = TN_, MG = BM_ / TM_, PGR = Pb::W / TN_;  // PGR: column groups per row
  static constexpr int threads = conv_patch_fp32_threads<Pb, TM_, TN_, BM_, TH_>();
  static constexpr int min_blocks = MinBlocks_ > 0 ? MinBlocks_ : 512 / threads;  // default: at most 128 registers
  static_assert(BM_ % TM == 0 && 32 % MG == 0, "a warp holds whole sets of channel groups");
  static_assert(TN % 4 == 0 && Pb::W % TN == 0, "a thread's columns are whole 16-byte chunks of one row");
  static_assert(threads % 32 == 0 && threads >= 64 && threads <= 256, "2 to 8 warps");
};

// --- The kernel ----------------------------------------------------------------------------------------
// Block (blockIdx.x = sample · row_tiles + row tile, blockIdx.y = BM tile of the output channels).
template <class Pb, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_fp32(const float* __restrict__ w,     // [Out][C][K][K]
                       const float* __restrict__ bias,  // [M] (unused without Pb::has_bias)
                       const float* __restrict__ src,   // [batch][SC][H][W]
                       float* __restrict__ out)         // [batch][M][H][W]
{
  constexpr int TM = T::TM, TN = T::TN, MG = T::MG, K = Pb::K, KK = T::KK, P = Pb::P, W = Pb::W, H = Pb::H;
  constexpr int SL = TN + K - 1;  // a thread's input values of one row
  constexpr std::size_t plane = std::size_t(H) * W;

  float* As = conv_mma_smem();               // (stages, a_floats): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;  // (stages, CK, CS): the patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * T::BM;
  const float* src_n = src + std::size_t(n) * Pb::SC * plane;

  conv_patch_zero_halo<Pb, T>(Bs, y0);
  auto load_step = [&](int stage, int step) { conv_patch_load_step<Pb, T>(As, Bs, stage, step, w, src_n, m0, y0); };

  // This thread: channel group mg, output row yl (in the tile), first column x0.
  const int mg = threadIdx.x % MG, pg = threadIdx.x / MG, yl = pg / T::PGR, x0 = pg % T::PGR * TN;
  // Weight of (channel m0 + mg + MG·i, reduced channel c, tap) = A_s[a_at + i·i_step + c·c_step + tap·tap_step].
  constexpr int m_step = Pb::dgrad ? KK : T::AS, c_step = Pb::dgrad ? T::OS : KK, tap_step = Pb::dgrad ? -1 : 1;
  constexpr int i_step = MG * m_step;
  const int a_at = mg * m_step + (Pb::dgrad ? KK - 1 : 0);
  const int b_at = yl * T::RS + x0 + 4 - P;  // input column x0 − P of the window's first row

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + mg + MG * i;
    const float b0 = Pb::has_bias && m < Pb::M ? bias[m] : 0.f;
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = b0;
  }

  cp_async_pipeline<T::stages>(T::steps, load_step, [&](int stage) {
    const float* A = As + stage * T::a_floats + a_at;
    const float* B = Bs + stage * T::b_floats + b_at;
#pragma unroll 1
    for (int c = 0; c < T::CK; ++c) {
#pragma unroll
      for (int r = 0; r < K; ++r) {
        const int ky = Pb::dgrad ? K - 1 - r : r;  // window row (see the order note above)
        const float* row = B + c * T::CS + ky * T::RS;
        float s[SL];
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {  // row + P is 16-byte aligned: the image columns x0 .. x0 + TN
          const float4 v = *reinterpret_cast<const float4*>(row + P + 4 * q);
          s[P + 4 * q] = v.x, s[P + 4 * q + 1] = v.y, s[P + 4 * q + 2] = v.z, s[P + 4 * q + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < SL; ++j)
          if (j < P || j >= P + TN) s[j] = row[j];
#pragma unroll
        for (int t = 0; t < K; ++t) {
          const int kx = Pb::dgrad ? K - 1 - t : t;
          float a[TM];
#pragma unroll
          for (int i = 0; i < TM; ++i) a[i] = A[i * i_step + c * c_step + (ky * K + kx) * tap_step];
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], s[j + kx], acc[i][j]);
        }
      }
    }
  });

  const int y = y0 + yl;
  if (y >= H) return;
  float* out_row = out + std::size_t(n) * Pb::M * plane + y * W + x0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + mg + MG * i;
    if (m < Pb::M)
#pragma unroll
      for (int q = 0; q < TN / 4; ++q)
        *reinterpret_cast<float4*>(out_row + m * plane + 4 * q) =
            make_float4(acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]);
  }
}

// --- Launch --------------------------------------------------------------------------------------------
// The copies and the stores are 16 bytes wide: weights, source and output must be 16-byte aligned.
inline bool conv_patch_fp32_aligned(const float* w, const float* src, const float* out) {
  return conv_patch_aligned(w, src, out) && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
}

template <class Pb, class T>
void launch_conv_patch_fp32(cudaStream_t stream, const float* w, const float* bias, const float* src, float* out,
                            int batch) {
  if (!conv_patch_fp32_aligned(w, src, out))
    throw std::invalid_argument("ctnn: Conv (FP32 patch kernel): weights, source and output must be 16-byte aligned");
  launch_conv_patch_kernel<T, kernel_conv_patch_fp32<Pb, T>>(Pb::M, stream, w, bias, src, out, batch);
}

// The tiles the rule takes (32 output channels a block, 128 threads), from conv_bench on an H100
// (docs/conv_kernels.md):
//   wide    8 × 8 a thread, 256 outputs per channel a block: the fastest where it gives two blocks per
//           SM (32->32 @32, B = 256: 130 µs, the implicit GEMM 195);
//   narrow  8 × 4 a thread, half the rows: twice the blocks, for the launches the wide tile leaves
//           under two blocks per SM (32->32 @32, B = 64: 35 against 44 µs).
// Images narrower than 16 columns (fewer than 64 threads' worth of columns) stay on the implicit GEMM
// (64->64 @8: 70 against 22 µs).
// Output rows of a tile of about `threads` threads (BM = 32): whole warps, at least one row.
template <class Pb, int TN>
constexpr int conv_patch_fp32_rows(int threads) {
  constexpr int per_row = (32 / 8) * (Pb::W / TN);
  for (int th = max_of(1, threads / per_row); th >= 1; --th)
    if (th * per_row % 32 == 0) return th;
  for (int th = 2;; ++th)
    if (th * per_row % 32 == 0) return th;
}
template <class Pb>
using ConvPatchF32Wide = ConvPatchF32Tile<Pb, 32, conv_patch_fp32_rows<Pb, 8>(128), 2>;
template <class Pb>
using ConvPatchF32Narrow = ConvPatchF32Tile<Pb, 32, conv_patch_fp32_rows<Pb, 4>(128), 2, 8, 4>;

template <class G>
constexpr bool conv_patch_fp32_fits() {
  if constexpr (!conv_patch_fits<G>() || G::W < 16) return false;  // the tiles exist only for these
  else
    return ConvPatchF32Wide<ConvPatchFwd<G>>::within_budget && ConvPatchF32Wide<ConvPatchDgrad<G>>::within_budget;
}

template <class Pb>
bool conv_patch_fp32_wide(int batch) {
  return (long long)batch * ConvPatchF32Wide<Pb>::row_tiles * ceil_div(Pb::M, 32) >= conv_two_waves;
}

template <class Pb>
void launch_conv_patch_fp32_auto(cudaStream_t stream, const float* w, const float* bias, const float* src,
                                 float* out, int batch) {
  if (conv_patch_fp32_wide<Pb>(batch)) launch_conv_patch_fp32<Pb, ConvPatchF32Wide<Pb>>(stream, w, bias, src, out, batch);
  else launch_conv_patch_fp32<Pb, ConvPatchF32Narrow<Pb>>(stream, w, bias, src, out, batch);
}

// --- The FP32 rule for the implicit-GEMM family ---------------------------------------------------------
// The patch kernel where it fits (and the pointers are aligned), else conv_gemm.cuh's. Both sum in the
// same order (the unsplit GEMM's), so the choice changes speed only.
template <class G>
void launch_conv_fp32_forward(cudaStream_t stream, const float* w, const float* b, const float* x, float* y,
                              int batch) {
  if constexpr (conv_patch_fp32_fits<G>())
    if (conv_patch_fp32_aligned(w, x, y)) return launch_conv_patch_fp32_auto<ConvPatchFwd<G>>(stream, w, b, x, y, batch);
  launch_conv_gemm_auto<ConvFwdGemm<G>>(stream, w, b, x, y, batch);
}

template <class G>
void launch_conv_fp32_dgrad(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch) {
  if constexpr (conv_patch_fp32_fits<G>())
    if (conv_patch_fp32_aligned(w, dy, dx))
      return launch_conv_patch_fp32_auto<ConvPatchDgrad<G>>(stream, w, nullptr, dy, dx, batch);
  launch_conv_dgrad_gemm_auto<G>(stream, w, dy, dx, batch);
}

}  // namespace ctnn::kernels
