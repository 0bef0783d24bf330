#pragma once
// FP32 convolution from an input patch staged in shared memory (the problems and the staging of
// conv_patch.cuh), on the FP32 cores: the forward and backward data of stride-1, "same" convolutions,
// and the weight gradient of those and of stride-2 ones (below).
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
// The tiles whose KS > 1 thread groups split each step's channels (few blocks: batch 64) add the
// groups' sums at the end, in group order: other bits, checked against the host.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "../layers/activation.hpp"
#include "conv_gemm.cuh"
#include "conv_patch.cuh"
#include "conv_patch_dgrad_s2.cuh"
#include "conv_patch_fwd_s2.cuh"
#include "conv_winograd.cuh"
#include "reduce.cuh"

namespace ctnn::kernels {

// --- Tile ----------------------------------------------------------------------------------------------
// BM output channels × TH output rows of one sample; a thread TM × TN, so MG = BM / TM channel groups ×
// TH · W / TN column groups of threads; times KS groups that split each step's 8 reduced channels (as in
// conv_patch_fwd_s2.cuh: KS = 2 doubles a block's warps where the blocks are few).
template <class Pb, int TM, int TN, int BM, int TH>
constexpr int conv_patch_fp32_threads() {
  return (BM / TM) * TH * (Pb::W / TN);
}
template <class Pb, int BM_, int TH_, int Stages_ = 2, int TM_ = 8, int TN_ = 8, int KS_ = 1>
struct ConvPatchF32Tile
    : ConvPatchLayout<Pb, BM_, TH_, Stages_, KS_ * conv_patch_fp32_threads<Pb, TM_, TN_, BM_, TH_>(), true> {
  static constexpr int TM = TM_, TN = TN_, KS = KS_, MG = BM_ / TM_, PGR = Pb::W / TN_;  // PGR: column groups per row
  static constexpr int group_threads = conv_patch_fp32_threads<Pb, TM_, TN_, BM_, TH_>(), threads = KS * group_threads;
  static constexpr int min_blocks = 512 / threads;  // at most 128 registers (168 measured 4% slower)
  static constexpr int red_floats = (KS - 1) * TM * TN * group_threads;  // the later groups' sums
  static_assert(BM_ % TM == 0 && 32 % MG == 0, "a warp holds whole sets of channel groups");
  static_assert(TN % 4 == 0 && Pb::W % TN == 0, "a thread's columns are whole 16-byte chunks of one row");
  static_assert(group_threads % 32 == 0 && threads >= 64 && threads <= 256, "2 to 8 warps, groups of whole warps");
  // The stages, or the later groups' sums at the end if those need more.
  static constexpr int smem_bytes = max_of(int(ConvPatchF32Tile::ConvPatchLayout::smem_bytes), red_floats * 4);
  static_assert(8 % KS == 0, "KS divides a step's channels");
};

// --- The kernel ----------------------------------------------------------------------------------------
// Block (blockIdx.x = sample · row_tiles + row tile, blockIdx.y = BM tile of the output channels). Fn:
// the activation of the store (conv_patch_store, conv_patch.cuh): forward, the one that follows the
// layer; backward data, the one below it, whose output `aux` holds (identity_fn: none).
template <class Pb, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_fp32(const float* __restrict__ w,    // [Out][C][K][K]
                       const float* __restrict__ aux,  // bias [M] (forward); Fn's output, as out (backward data)
                       const float* __restrict__ src,  // [batch][SC][H][W]
                       float* __restrict__ out)        // [batch][M][H][W]
{
  wait_for_prior_grids();  // launched dependent (launch.cuh): its launch overlaps the previous kernel's end
  constexpr int TM = T::TM, TN = T::TN, MG = T::MG, K = Pb::K, KK = T::KK, P = Pb::P, W = Pb::W;
  constexpr int SL = TN + K - 1;  // a thread's input values of one row
  constexpr std::size_t plane = std::size_t(Pb::H) * W;

  float* As = conv_mma_smem();               // (stages, a_floats): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;  // (stages, CK, CS): the patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * T::BM;
  const float* src_n = src + std::size_t(n) * Pb::SC * plane;

  conv_patch_zero_halo<Pb, T>(Bs, y0);
  const ConvPatchCopies<Pb, T> copies(w, src_n, m0, y0);
  auto load_step = [&](int stage, int step) { copies.load(As, Bs, stage, step); };

  // This thread: reduced channels kg·CK/KS .. of each step, channel group mg, output row yl (in the tile),
  // first column x0.
  constexpr int CKG = T::CK / T::KS;
  const int kg = threadIdx.x / T::group_threads, t = threadIdx.x % T::group_threads;
  const int mg = t % MG, pg = t / MG, yl = pg / T::PGR, x0 = pg % T::PGR * TN;
  // Weight of (channel m0 + mg + MG·i, reduced channel c, tap) = A_s[a_at + i·i_step + c·c_step + tap·tap_step].
  constexpr int m_step = Pb::dgrad ? KK : T::AS, c_step = Pb::dgrad ? T::OS : KK, tap_step = Pb::dgrad ? -1 : 1;
  constexpr int i_step = MG * m_step;
  const int a_at = mg * m_step + (Pb::dgrad ? KK - 1 : 0);
  const int b_at = yl * T::RS + x0 + 4 - P;  // input column x0 − P of the window's first row

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + mg + MG * i;
    const float b0 = Pb::has_bias && kg == 0 && m < Pb::M ? aux[m] : 0.f;
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = b0;
  }

  cp_async_pipeline<T::stages>(T::steps, load_step, [&](int stage) {
    const float* A = As + stage * T::a_floats + a_at;
    const float* B = Bs + stage * T::b_floats + b_at;
#pragma unroll 1
    for (int c = kg * CKG; c < (kg + 1) * CKG; ++c) {
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

  if constexpr (T::KS > 1) conv_patch_add_groups<T>(acc, kg, t);  // the later groups' sums (group 0 stores)
  if (kg > 0) return;
  const int y = y0 + yl;
  if (y >= Pb::H) return;
  const std::size_t at_row = std::size_t(n) * Pb::M * plane + y * W + x0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + mg + MG * i;
    if (m < Pb::M)
#pragma unroll
      for (int q = 0; q < TN / 4; ++q) {
        const float v[4] = {acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]};
        conv_patch_store<Pb::dgrad, Fn>(out, aux, at_row + m * plane + 4 * q, v);
      }
  }
}

// --- Launch --------------------------------------------------------------------------------------------
// The copies and the stores are 16 bytes wide: weights, source and output must be 16-byte aligned
// (conv_patch_fp32_aligned, conv_patch.cuh).

template <class Pb, class T, class Fn = identity_fn>
void launch_conv_patch_fp32(cudaStream_t stream, const float* w, const float* aux, const float* src, float* out,
                            int batch) {
  if (!conv_patch_fp32_aligned(w, src, out))
    throw std::invalid_argument("ctnn: Conv (FP32 patch kernel): weights, source and output must be 16-byte aligned");
  launch_conv_patch_kernel<Pb, T, kernel_conv_patch_fp32<Pb, T, Fn>>(stream, w, aux, src, out, batch);
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
  return conv_patch_rows_for((32 / 8) * (Pb::W / TN), threads);
}
template <class Pb>
using ConvPatchF32Wide = ConvPatchF32Tile<Pb, 32, conv_patch_fp32_rows<Pb, 8>(128), 2>;
template <class Pb>
using ConvPatchF32Narrow = ConvPatchF32Tile<Pb, 32, conv_patch_fp32_rows<Pb, 4>(128), 2, 8, 4>;
// The narrow and wide tiles with the channels of a step split between 2 groups (256 threads). The rule
// takes the narrow one where the narrow tile gives fewer than two blocks per SM (32->64 @16, B = 64,
// backward data: 19.3 against 21.7 µs; 2026-11-27, H100); the wide one is measured only (conv_bench).
template <class Pb>
using ConvPatchF32NarrowSplit = ConvPatchF32Tile<Pb, 32, conv_patch_fp32_rows<Pb, 4>(128), 2, 8, 4, 2>;
template <class Pb>
using ConvPatchF32WideSplit = ConvPatchF32Tile<Pb, 32, conv_patch_fp32_rows<Pb, 8>(128), 2, 8, 8, 2>;

// conv_patch_fits's layers at least 16 columns wide (narrower images leave the tiles' threads idle:
// 64->64 @8 ran 3× slower than the implicit GEMM). Strided layers have kernels of their own
// (conv_patch_fwd_s2.cuh, conv_patch_dgrad_s2.cuh).
template <class G>
constexpr bool conv_patch_fp32_fits() {
  if constexpr (!conv_patch_fits<G>() || G::W < 16) return false;  // the tiles exist only for these
  else
    return ConvPatchF32Wide<ConvPatchFwd<G>>::within_budget && ConvPatchF32Wide<ConvPatchDgrad<G>>::within_budget &&
           ConvPatchF32NarrowSplit<ConvPatchFwd<G>>::within_budget &&
           ConvPatchF32NarrowSplit<ConvPatchDgrad<G>>::within_budget;
}

// The rule's tile: 0 wide, 1 narrow, 2 narrow split.
template <class Pb>
int conv_patch_fp32_tile(int batch) {
  const long long m_tiles = ceil_div(Pb::M, 32);
  if ((long long)batch * ConvPatchF32Wide<Pb>::row_tiles * m_tiles >= conv_two_waves) return 0;
  return (long long)batch * ConvPatchF32Narrow<Pb>::row_tiles * m_tiles >= conv_two_waves ? 1 : 2;
}

template <class Pb, class Fn = identity_fn>
void launch_conv_patch_fp32_auto(cudaStream_t stream, const float* w, const float* aux, const float* src,
                                 float* out, int batch) {
  switch (conv_patch_fp32_tile<Pb>(batch)) {
    case 0: return launch_conv_patch_fp32<Pb, ConvPatchF32Wide<Pb>, Fn>(stream, w, aux, src, out, batch);
    case 1: return launch_conv_patch_fp32<Pb, ConvPatchF32Narrow<Pb>, Fn>(stream, w, aux, src, out, batch);
    default: return launch_conv_patch_fp32<Pb, ConvPatchF32NarrowSplit<Pb>, Fn>(stream, w, aux, src, out, batch);
  }
}

// --- The FP32 rule for the implicit-GEMM family ---------------------------------------------------------
// The forward of 3×3, stride-1, padding-1 layers on enough blocks: the Winograd kernel (4 × 4 output
// tiles where they fill the GPU, else 2 × 2; an output only 8-byte aligned takes 2 × 2). Otherwise the
// patch kernel where it fits (and the pointers are aligned; for backward data also the stride-2 one of
// conv_patch_dgrad_s2.cuh; for the forward the stride-2 one of conv_patch_fwd_s2.cuh), else
// conv_gemm.cuh's. The patch kernels of one thread group sum in the unsplit GEMM's order, so that choice
// changes speed (and, where the GEMM would split k, the last bits) only; the split tiles (thread groups
// over the channels, taken at small batches) and Winograd's sums differ from theirs by rounding.

// The forward with the activation Fn that follows the layer in the store of the rule's kernel: the
// Winograd kernel (conv_winograd.cuh) first where it fits and wins, which rounds differently.
template <class G, class Fn>
void launch_conv_fp32_forward_act(cudaStream_t stream, const float* w, const float* b, const float* x, float* y,
                                  int batch) {
  if (launch_conv_winograd_rule<G, Fn, false>(stream, w, b, x, y, batch)) return;
  if constexpr (conv_patch_fp32_fits<G>())
    if (conv_patch_fp32_aligned(w, x, y)) return launch_conv_patch_fp32_auto<ConvPatchFwd<G>, Fn>(stream, w, b, x, y, batch);
  if constexpr (conv_patch_fwd_s2_fits<G>())
    if (conv_patch_fp32_aligned(w, x, y)) return launch_conv_patch_fwd_s2_auto<G, Fn>(stream, w, b, x, y, batch);
  launch_conv_gemm_auto<ConvFwdGemm<G>, Fn>(stream, w, b, x, y, batch);
}

// Backward data with the backward of the activation Fn below the layer folded into its store (below:
// that activation's output, the layer's input), where the rule takes the Winograd kernel (3×3
// stride-1 layers on enough blocks, as the forward: its rounding differs from the others') or a patch
// kernel; false, having launched nothing, where it takes the GEMM (its caller then runs the
// activation's backward).
template <class G, class Fn>
bool launch_conv_fp32_dgrad_act(cudaStream_t stream, const float* w, const float* dy, const float* below, float* dx,
                                int batch) {
  if (!conv_patch_fp32_aligned(w, dy, dx) || !aligned_to(below, 16)) return false;
  if constexpr (conv_winograd_dgrad_fits<G>())
    if (launch_conv_winograd_rule<ConvWinogradDgradDims<G>, Fn, true>(stream, w, below, dy, dx, batch)) return true;
  if constexpr (conv_patch_fp32_fits<G>()) {
    launch_conv_patch_fp32_auto<ConvPatchDgrad<G>, Fn>(stream, w, below, dy, dx, batch);
    return true;
  } else if constexpr (conv_patch_dgrad_s2_fits<G>()) {
    launch_conv_patch_dgrad_s2_auto<G, Fn>(stream, w, dy, dx, batch, below);
    return true;
  } else {
    return false;
  }
}

// Backward data: the patch kernels as above (no activation: below unused), else the GEMM.
template <class G>
void launch_conv_fp32_dgrad(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch) {
  if (!launch_conv_fp32_dgrad_act<G, identity_fn>(stream, w, dy, nullptr, dx, batch))
    launch_conv_dgrad_gemm_auto<G>(stream, w, dy, dx, batch);
}

// --- Backward weights ----------------------------------------------------------------------------------
// dW[m][c][ky][kx] = Σ over samples and output pixels of dy[n][m][y][x] · x[n][c][S·y + ky − P][S·x + kx − P]
// and db[m] = Σ dy[n][m][y][x], for stride-1 and stride-2 layers with P = (K − 1) / 2 and any channel
// counts (conv_patch_wgrad_shape). A block owns BM = 4·TM output channels × 8 input channels (all their
// taps; past C zeros) and a contiguous range of steps; a step is TH whole output rows of one sample, for
// which it stages (cp.async, 16 bytes each)
//   dy    the BM channels' TH rows (a contiguous run each), DS = TH·OW + 4 floats apart;
//   x     the 8 channels' S·(TH − 1) + K input rows, zero halo as in conv_patch.cuh (rows outside the
//         image zero-filled by the copy), channels XS floats apart with XS/4 odd: the 8 channels a quarter
//         warp reads sit on 8 distinct bank quads.
// Lane (c = lane % 8, mg = lane / 8) of every warp holds the TM channels m0 + TM·mg + i × the K·K taps of
// input channel c0 + c; the 4 warps take turns over the step's TN-column row segments. Per segment a
// thread reads its channel's K input rows (S·(TN − 1) + K values each) once, then per output channel the
// TN dy values, which feed K·K·TN FMAs (3×3, stride 1, TM = 4, TN = 8: 20 loads per 288 FMAs). At the
// end the 4 warps' sums are added in warp order and written as the block's partial (dW, and its share of
// db: ConvWgradBias), which sum_partials adds in split order: deterministic.
// TM = 4, TN = 8 measured fastest on an H100 (docs/conv_kernels.md): TM = 8 needs more than 128
// registers (3 blocks per SM) and was 1.2-1.5× slower. TN = 4 was faster at stride 2 and on 16-column
// rows while the first channel tile's blocks summed db in the FMA loop; since db is summed apart
// (ConvWgradBias), 8 is as fast or faster everywhere (2026-11-27: 32->64 s2 @32 23.2 against 23.8 µs
// at B = 64, 73 against 77 at 256; the others within 1%).
// Which layers: stride 1 or 2, no dilation, K = 1 or 3 with P = (K − 1) / 2 (5×5 would hold 100 sums and
// 60+ inputs a thread: spills), W a multiple of 8 and at most 64, OW a multiple of 8 (a thread's columns
// lie in one row), H and W multiples of the stride; any channel counts (a partial 8-channel tile is
// zero-filled).
template <class G>
constexpr bool conv_patch_wgrad_shape() {
  return (G::S == 1 || G::S == 2) && G::D == 1 && (G::K == 1 || G::K == 3) && 2 * G::P == G::K - 1 &&
         G::W % 8 == 0 && G::W <= 64 && G::OW % 8 == 0 && G::H % G::S == 0 && G::W % G::S == 0;
}

// MH = 2 (the rule's): two such halves of 4 warps in a block, for 2·BM output channels that share the
// staged x (half the x copies per FMA), and half the blocks. Against one half (2026-11-27, H100, µs):
// 32->32 @32 B = 256 116.8 vs 131.6, 32->64 s2 @32 B = 256 74.3 vs 78.7, 64->128 s2 @16 B = 64 25.7
// vs 26.1; within 2% elsewhere.
// CK_ = 4 (layers of at most 4 input channels: RGB stems): lanes (c = lane % 4, mg = lane / 4), 32·TM
// output channels a half, so no lane idles on the 5 zero channels of an 8-channel tile; TargetBlocks_:
// the splits' block count (ConvWgradSplits).
template <class G, int TN_ = 8, int TM_ = 4, int MH_ = (TM_ == 4 ? 2 : 1), int CK_ = 8, int TargetBlocks_ = 512 / MH_>
struct ConvPatchWgrad {
  static constexpr int TM = TM_, MH = MH_, CK = CK_, MGS = 32 / CK_;  // MGS: channel groups (mg) of a warp
  static constexpr int BM = MGS * TM * MH, warps = 4 * MH, threads = 32 * warps, TN = TN_;
  static constexpr int min_blocks = (TM == 4 ? 4 : 3) / MH;  // at most 128 registers (TM = 8: 168)
  static constexpr int K = G::K, KK = K * K, P = G::P, S = G::S, W = G::W, H = G::H, OW = G::OW, OH = G::OH;
  static constexpr int PGR = OW / TN;  // row segments per output row
  // Output rows a step: about 4 segments per warp of a half, dividing OH.
  static constexpr int TH = [] {
    for (int th = max_of(1, 4 * 4 / PGR); th > 1; --th)
      if (OH % th == 0) return th;
    return 1;
  }();
  static constexpr int SEGS = TH * PGR, PR = S * (TH - 1) + K, RS = W + 8;
  static constexpr int SL = S * (TN - 1) + K;  // a thread's input values of one row
  static constexpr int DS = TH * OW + 4, XS = PR * RS + (PR * RS / 4 % 2 == 0 ? 4 : 0);
  static constexpr int d_floats = BM * DS, x_floats = CK * XS, stages = 2;
  static constexpr int red_floats = warps * 32 * TM * KK;  // the warps' sums at the end
  static constexpr int smem_bytes = max_of(stages * (d_floats + x_floats), red_floats) * 4;
  using Splits = ConvWgradSplits<G, BM, CK * KK, TH * OW, TargetBlocks_>;  // a split's "k step" is one step: TH·OW pixels
  static_assert(TN % 4 == 0 && OW % TN == 0 && OH % TH == 0, "whole 16-byte chunks; steps of whole samples");
  static constexpr bool fits = conv_patch_wgrad_shape<G>() && smem_bytes <= 100 * 1024;
};

// The staging of the weight-gradient kernels (this one and conv_patch_wgrad_mma.cuh's), for a tile T
// with its fields (BM, CK, TH, PR, RS, DS, XS, d_floats, x_floats, stages, threads).
// The x patch's left and right halo columns, in every stage: never written by the copies.
template <class T>
__device__ __forceinline__ void conv_patch_wgrad_zero_halo(float* Xs) {
  for (int line = threadIdx.x; line < T::stages * T::CK * T::PR; line += T::threads) {
    float* row = Xs + (line / (T::CK * T::PR)) * T::x_floats + (line / T::PR % T::CK) * T::XS + (line % T::PR) * T::RS;
    *reinterpret_cast<float4*>(row) = make_float4(0.f, 0.f, 0.f, 0.f);
    *reinterpret_cast<float4*>(row + 4 + T::W) = make_float4(0.f, 0.f, 0.f, 0.f);
  }
}
// The copies of step `step` (TH output rows of one sample) into one stage: D (BM × DS) the dy rows of
// output channels m0 ..; X (CK × XS) the input rows of channels c0 .. (zeros outside the image and past
// C). As ConvPatchCopies (conv_patch.cuh): each thread's copies lie at compile-time strides from its
// first, whose offsets it works out once; a step forms the sample's base pointers (64-bit) and tests
// which of the thread's input rows lie in the image.
template <class G, class T>
class ConvWgradCopies {
  static constexpr int OW = T::OW, W = T::W, W4 = W / 4, row_tiles = T::OH / T::TH, NT = T::threads;
  static constexpr int plane = T::H * W, out_plane = T::OH * OW;
  using DG = CopyGrid<T::BM, T::TH * OW / 4, NT>;  // dy: BM output channels of TH·OW pixels
  using XG = CopyGrid<T::CK, T::PR * W4, NT>;      // x: CK channels of PR input rows
  static_assert((long long)G::C * plane < (1ll << 31) && (long long)G::Out * out_plane < (1ll << 31), "32-bit offsets");

  const float* x_;
  const float* dy_;
  int d_src_, d_dst_, d_r0_, d_q0_, d_limit_;  // d_limit_: output channels from m0 on
  int x_src_, x_r0_, x_q0_, x_limit_, x_dst_[XG::quad_passes], x_row_[XG::quad_passes];

 public:
  __device__ ConvWgradCopies(const float* x, const float* dy, int c0, int m0) : x_(x), dy_(dy) {
    d_r0_ = DG::first_row(), d_q0_ = DG::first_quad();
    d_src_ = (m0 + d_r0_) * out_plane + 4 * d_q0_, d_dst_ = d_r0_ * T::DS + 4 * d_q0_, d_limit_ = G::Out - m0;
    x_r0_ = XG::first_row(), x_q0_ = XG::first_quad(), x_limit_ = G::C - c0;
    x_src_ = (c0 + x_r0_) * plane - T::P * W + 4 * x_q0_;
#pragma unroll
    for (int i = 0; i < XG::quad_passes; ++i) {
      const int u = x_q0_ + i * NT;
      x_row_[i] = u / W4, x_dst_[i] = x_r0_ * T::XS + x_row_[i] * T::RS + 4 + 4 * (u % W4);
    }
  }

  __device__ __forceinline__ void load(float* D, float* X, int step) const {
    const int n = step / row_tiles, oy0 = step % row_tiles * T::TH;
    const float* dy_n = dy_ + (std::size_t(n) * G::Out * out_plane + oy0 * OW + d_src_);
    DG::for_each(d_r0_, d_q0_, [&](int, int r, int q) {
      const bool ok = G::Out % T::BM == 0 || d_r0_ + r < d_limit_;
      cp_async_f32x4(D + d_dst_ + r * T::DS + 4 * q, ok ? dy_n + r * out_plane + 4 * q : dy_, ok);
    });
    const float* x_n = x_ + (std::size_t(n) * G::C * plane + T::S * oy0 * W + x_src_);
    XG::for_each(x_r0_, x_q0_, [&](int i, int r, int q) {
      const int y = T::S * oy0 - T::P + x_row_[i];
      const bool ok = y >= 0 && y < T::H && (G::C % T::CK == 0 || x_r0_ + r < x_limit_);
      cp_async_f32x4(X + x_dst_[i] + r * T::XS, ok ? x_n + r * plane + 4 * q : x_, ok);
    });
  }
};

// The bias gradient db[m] = Σ dy[n][m][y][x] of the patch weight-gradient kernels, from their staged dy
// (BM rows of TH·OW pixels a step). Every block of a split stages the same dy rows for its channel tile
// cy, so each sums only the rows mm ≡ cy (mod c_tiles): a warp a row (rows cy + c_tiles·(warp + warps·r)),
// its lanes over the pixels. That is a few loads and adds a step for every block; summed in the FMA loop
// by the first channel tile's blocks alone (as before), it made those blocks 11% longer than the rest,
// and with one wave of blocks the kernel lasts as long as its slowest block. Order: a lane's pixels in
// step order, then the lanes added by a fixed shuffle tree: deterministic.
template <class G, class T>
struct ConvWgradBias {
  static constexpr int c_tiles = ceil_div(G::C, T::CK), warps = T::threads / 32;
  static constexpr int rows = ceil_div(ceil_div(T::BM, c_tiles), warps);  // rows a warp sums
  static constexpr int px = T::TH * T::OW;                                 // pixels a row of a stage
  __device__ static int row(int r) { return int(blockIdx.y) + c_tiles * (int(threadIdx.x) / 32 + warps * r); }
  // Adds stage D's pixels of this warp's rows into sums.
  __device__ static void add(const float* D, float (&sums)[rows]) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int r = 0; r < rows; ++r)
      if (row(r) < T::BM)
#pragma unroll
        for (int q = 0; q < ceil_div(px, 32); ++q)
          if (px % 32 == 0 || lane + 32 * q < px) sums[r] += D[row(r) * T::DS + lane + 32 * q];
  }
  // Writes the rows' totals into the block's partial (db after dW).
  __device__ static void store(float (&sums)[rows], float* part, int m0) {
#pragma unroll
    for (int r = 0; r < rows; ++r) {
#pragma unroll
      for (int o = 16; o > 0; o /= 2) sums[r] += __shfl_xor_sync(0xffffffffu, sums[r], o);
      if (threadIdx.x % 32 == 0 && row(r) < T::BM && m0 + row(r) < G::Out) part[G::Out * G::CKK + m0 + row(r)] = sums[r];
    }
  }
};

template <class G, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_wgrad(const float* __restrict__ x,   // [batch][C][H][W]
                        const float* __restrict__ dy,  // [batch][Out][OH][OW]
                        float* __restrict__ partials,  // [splits][E]
                        int per_split, int steps) {
  wait_for_prior_grids();  // launched dependent (launch.cuh): its launch overlaps the previous kernel's end
  constexpr int TM = T::TM, TN = T::TN, K = T::K, KK = T::KK, P = T::P, S = T::S, SL = T::SL;
  constexpr int OW = T::OW;
  float* Ds = conv_mma_smem();               // (stages, d_floats)
  float* Xs = Ds + T::stages * T::d_floats;  // (stages, x_floats)
  const int c0 = blockIdx.y * T::CK, m0 = blockIdx.z * T::BM;
  const int first = blockIdx.x * per_split, count = min_of(per_split, steps - first);

  conv_patch_wgrad_zero_halo<T>(Xs);
  const ConvWgradCopies<G, T> copies(x, dy, c0, m0);
  auto load_step = [&](int stage, int t) { copies.load(Ds + stage * T::d_floats, Xs + stage * T::x_floats, first + t); };

  // Warp wi of half h (channels m0 + 4·TM·h ..), lane (c, mg).
  const int warp = threadIdx.x / 32, h = warp / 4, wi = warp % 4, lane = threadIdx.x % 32, c = lane % T::CK,
            mg = lane / T::CK;
  using Bias = ConvWgradBias<G, T>;
  float acc[TM][KK], bsum[Bias::rows];
#pragma unroll
  for (int r = 0; r < Bias::rows; ++r) bsum[r] = 0.f;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int k = 0; k < KK; ++k) acc[i][k] = 0.f;

  cp_async_pipeline<T::stages>(count, load_step, [&](int stage) {
    const float* X = Xs + stage * T::x_floats + c * T::XS + 4 - P;  // input column −P of row 0
    Bias::add(Ds + stage * T::d_floats, bsum);
    const float* D = Ds + stage * T::d_floats + (T::MGS * h + mg) * TM * T::DS;
#pragma unroll
    for (int s0 = 0; s0 < T::SEGS; s0 += 4) {
      const int seg = s0 + wi;
      if (T::SEGS % 4 != 0 && seg >= T::SEGS) break;
      const int yl = seg / T::PGR, x0 = seg % T::PGR * TN;
      // input columns S·x0 − P + j of the window's rows (1×1 at stride 2: room for the last 16-byte
      // load's unused value, P + S·TN > SL)
      float xs[K][max_of(SL, P + S * TN)];
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const float* row = X + (S * yl + ky) * T::RS + S * x0;
#pragma unroll
        for (int q = 0; q < S * TN / 4; ++q) {  // row + P is 16-byte aligned: input columns S·x0 ..
          const float4 v = *reinterpret_cast<const float4*>(row + P + 4 * q);
          xs[ky][P + 4 * q] = v.x, xs[ky][P + 4 * q + 1] = v.y, xs[ky][P + 4 * q + 2] = v.z, xs[ky][P + 4 * q + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < SL; ++j)
          if (j < P || j >= P + S * TN) xs[ky][j] = row[j];
      }
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        float d[TN];
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {
          const float4 v = *reinterpret_cast<const float4*>(D + i * T::DS + yl * OW + x0 + 4 * q);
          d[4 * q] = v.x, d[4 * q + 1] = v.y, d[4 * q + 2] = v.z, d[4 * q + 3] = v.w;
        }
#pragma unroll
        for (int ky = 0; ky < K; ++ky)
#pragma unroll
          for (int kx = 0; kx < K; ++kx)
#pragma unroll
            for (int j = 0; j < TN; ++j)
              acc[i][ky * K + kx] = fmaf(d[j], xs[ky][S * j + kx], acc[i][ky * K + kx]);
      }
    }
  });

  // The sums of a half's 4 warps, added in warp order (the staging is free: the pipeline waited for every
  // copy, and the barrier below orders everyone's last reads before these stores).
  constexpr int LS = TM * KK;  // floats per lane
  __syncthreads();
  float* red = conv_mma_smem() + (warp * 32 + lane) * LS;
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int k = 0; k < KK; ++k) red[i * KK + k] = acc[i][k];
  __syncthreads();
  const float* sums = conv_mma_smem();
  float* part = partials + std::size_t(blockIdx.x) * T::Splits::E;
  Bias::store(bsum, part, m0);
  constexpr int run = T::CK * KK;  // a channel m's taps of channels c0 .. c0 + 8: contiguous in dW
  const int valid_run = min_of(run, (G::C - c0) * KK);
  for (int e = threadIdx.x; e < T::BM * run; e += T::threads) {
    const int mm = e / run, r = e % run, mh = mm % (T::MGS * TM);
    const int at = (mm / (T::MGS * TM)) * 4 * 32 * LS + (r / KK + T::CK * (mh / TM)) * LS + (mh % TM) * KK + r % KK;
    if (m0 + mm >= G::Out) break;
    if (r >= valid_run) continue;
    float v = sums[at];
#pragma unroll
    for (int w = 1; w < 4; ++w) v += sums[w * 32 * LS + at];
    part[std::size_t(m0 + mm) * G::CKK + c0 * KK + r] = v;
  }
}

// The rule's tile: two halves of 4 warps; where C <= 4 (RGB stems) lanes of 4 input channels, 2 output
// channels a thread, about 256 blocks (2026-11-28, conv_bench, H100, 3->32 @32 with the sum: 12.3 ->
// 8.8 µs at B = 64, 33.6 -> 21.5 at 256; one half with 4 channels a thread 9.6 / 23.7; 128 or 512
// blocks 9.3-11.0 / 23.4-24.0). The 8-channel tile left 5 of every 8 lanes on zeros there.
template <class G>
using ConvPatchWgradRule = std::conditional_t<(G::C <= 4), ConvPatchWgrad<G, 8, 2, 2, 4, 256>, ConvPatchWgrad<G>>;

template <class G>
constexpr bool conv_patch_wgrad_fits() {
  if constexpr (!conv_patch_wgrad_shape<G>()) return false;  // the tile exists only for these
  else return ConvPatchWgradRule<G>::fits;
}
template <class G>
constexpr std::size_t conv_patch_wgrad_workspace_floats(int max_batch) {
  if constexpr (!conv_patch_wgrad_fits<G>()) return 0;
  else return ConvPatchWgradRule<G>::Splits::workspace_floats(max_batch);
}

// x and dy are copied 16 bytes at a time.
inline bool conv_patch_wgrad_aligned(const float* x, const float* dy) {
  return reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(dy) % 16 == 0;
}

// Stage 1 of a patch weight-gradient kernel (this one, conv_patch_wgrad_mma.cuh's, conv_wgmma_wgrad.cuh's)
// with tile T into `partials` (T::Splits::workspace_floats(batch) floats), then stage 2 into dw and db
// (Map: where a partial's column goes in dw, sum_partials); both launched dependent (both start with
// wait_for_prior_grids).
template <class G, class T, auto Kernel, class Map = SameColumn>
void launch_conv_patch_wgrad_kernel(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                                    float* db, int batch) {
  static_assert(T::fits, "see the tile");
  if (!conv_patch_wgrad_aligned(x, dy))
    throw std::invalid_argument("ctnn: Conv backward (patch weight gradient): x and dy must be 16-byte aligned");
  const long long steps = T::Splits::steps(batch);
  if (steps > 0x7fffffffLL)
    throw std::invalid_argument("ctnn: Conv backward: batch " + std::to_string(batch) + " is too large");
  if (batch <= 0) return;
  const int splits = T::Splits::splits(batch);
  request_dynamic_smem<Kernel, T::smem_bytes>();
  const dim3 grid(unsigned(splits), ceil_div(G::C, T::CK), ceil_div(G::Out, T::BM));
  launch_kernel(Kernel, grid, T::threads, T::smem_bytes, stream, 1, Launch::dependent, x, dy, partials,
                int(T::Splits::per_split(batch)), int(steps));
  sum_partials<Map>(stream, partials, splits, T::Splits::E, G::Out * G::CKK, dw, db, Launch::dependent);
}

template <class G, class T = ConvPatchWgradRule<G>>
void launch_conv_patch_wgrad(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                             float* db, int batch) {
  launch_conv_patch_wgrad_kernel<G, T, kernel_conv_patch_wgrad<G, T>>(stream, x, dy, partials, dw, db, batch);
}

template <class G>
void launch_conv_fp32_wgrad(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                            float* db, int batch) {
  if constexpr (conv_patch_wgrad_fits<G>())
    if (conv_patch_wgrad_aligned(x, dy)) return launch_conv_patch_wgrad<G>(stream, x, dy, partials, dw, db, batch);
  launch_conv_wgrad_gemm<G>(stream, x, dy, partials, dw, db, batch);
}

}  // namespace ctnn::kernels
