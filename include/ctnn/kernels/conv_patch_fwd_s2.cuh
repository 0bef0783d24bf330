#pragma once
// FP32 forward of stride-2 convolutions from a staged input patch (the staging of conv_patch.cuh).
//
// Output row a of a stride-2 layer reads input rows 2a − P .. 2a − P + K − 1, so TH output rows read the
// 2·TH + K − 2 input rows from 2·y0 − P: the staging of conv_patch.cuh with a window of 2·TH − 1 rows
// (its "TH") plus K − 1. Per step of 8 input channels a block stages those rows (16-byte copies, zero
// halo) and the weights of its BM = 32 output channels. A thread owns TM output channels (mg + MG·i, so a
// warp's weight loads fall on distinct banks) × TN consecutive output columns x0 .. of one output row;
// per input channel and window row it reads the 2·TN + K − 2 input values its columns span once (TN / 2
// 16-byte loads and P single ones) and per tap TM weights, which feed TM·TN FMAs (3×3, TM = 4, TN = 8:
// 17 loads per 96 FMAs).
//
// Summation order: from the bias, k = (c, ky, kx) increasing, one fmaf each: the unsplit implicit GEMM's
// order, so the two agree to the bit (tested). With the channels of a step split between KS groups of
// threads (the rule's tiles: 2 or 4 groups), each group sums its share in that order and the groups'
// sums are added in group order: a different rounding, checked against the host.
#include <cstddef>
#include <stdexcept>
#include <string>

#include "conv_patch.cuh"

namespace ctnn::kernels {

// Which layers: stride 2, no dilation, K odd and at most 5 with P = (K − 1) / 2, H and W even (OH = H / 2,
// OW = W / 2), W a multiple of 8 (16-byte rows) and at most 64, OW a multiple of 4 (a thread's columns
// are 16-byte chunks of one output row), C a multiple of 8 (steps of 8 channels), Out of 4.
template <class G>
constexpr bool conv_patch_fwd_s2_shape() {
  return G::S == 2 && G::D == 1 && G::K % 2 == 1 && G::K <= 5 && 2 * G::P == G::K - 1 && G::H % 2 == 0 &&
         G::W % 8 == 0 && G::W <= 64 && G::OW % 4 == 0 && G::C % 8 == 0 && G::Out % 4 == 0;
}

// The staging problem: source x [batch][C][H][W], K window rows from row 2·y0 − P on.
template <class G>
struct ConvPatchFwdS2Problem {
  static constexpr int M = G::Out, SC = G::C, H = G::H, W = G::W, K = G::K, P = G::P, WK = G::K;
  static constexpr bool has_bias = true, dgrad = false;
};

// BM = 32 output channels × TH output rows of one sample; a thread TM × TN: MG = 32 / TM channel groups ×
// TH · OW / TN column groups, times KS groups of threads that split each step's 8 input channels (KS = 2:
// channels 0-3 and 4-7), whose sums are added through shared memory at the end, in group order. The
// staging layout's window is 2·TH − 1 rows (its TH), so its row_tiles is replaced by the output's.
template <class G, int TM_, int TN_, int TH_, int KS_ = 1, int CU_ = 1>
struct ConvPatchFwdS2Tile
    : ConvPatchLayout<ConvPatchFwdS2Problem<G>, 32, 2 * TH_ - 1, 2, KS_ * (32 / TM_) * TH_ * (G::OW / TN_), true> {
  static constexpr int TM = TM_, TN = TN_, TH = TH_, KS = KS_, MG = 32 / TM_, CGR = G::OW / TN_;  // CGR: column groups a row
  static constexpr int CU = CU_;  // channels unrolled
  static constexpr int group_threads = MG * TH_ * CGR, threads = KS * group_threads;
  static constexpr int row_tiles = ceil_div(G::OH, TH_);
  static constexpr int min_blocks = 512 / threads;  // at most 128 registers
  static constexpr int red_floats = (KS - 1) * TM * TN * group_threads;  // the later groups' sums
  static_assert(32 % TM == 0 && 32 % MG == 0, "a warp holds whole sets of channel groups");
  static_assert(TN % 4 == 0 && G::OW % TN == 0, "a thread's columns are whole 16-byte chunks of one row");
  static_assert(group_threads % 32 == 0 && threads >= 64 && threads <= 256, "2 to 8 warps, groups of whole warps");
  // The stages, or the later groups' sums at the end if those need more.
  static constexpr int smem_bytes = max_of(int(ConvPatchFwdS2Tile::ConvPatchLayout::smem_bytes), red_floats * 4);
  static_assert(8 % KS == 0, "KS divides a step's channels");
};

// Block (blockIdx.x = sample · row_tiles + row tile, blockIdx.y = 32-channel tile of the outputs). Fn: the
// activation that follows the layer, applied in the store (identity_fn: none).
template <class G, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_fwd_s2(const float* __restrict__ w,     // [Out][C][K][K]
                         const float* __restrict__ bias,  // [Out]
                         const float* __restrict__ x,     // [batch][C][H][W]
                         float* __restrict__ y)           // [batch][Out][OH][OW]
{
  wait_for_prior_grids();  // launched dependent (launch.cuh): the launch overlaps the previous kernel's end
  using Pb = ConvPatchFwdS2Problem<G>;
  constexpr int TM = T::TM, TN = T::TN, MG = T::MG, K = G::K, KK = T::KK, P = G::P;
  constexpr int SL = 2 * TN + K - 2;  // a thread's input values of one row: columns 2·x0 − P ..
  constexpr std::size_t in_plane = std::size_t(G::H) * G::W, out_plane = std::size_t(G::OH) * G::OW;

  float* As = conv_mma_smem();               // (stages, BM, AS): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;  // (stages, CK, CS): the patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * T::BM;
  const float* x_n = x + std::size_t(n) * G::C * in_plane;

  conv_patch_zero_halo<Pb, T>(Bs, 2 * y0);
  const ConvPatchCopies<Pb, T> copies(w, x_n, m0, 2 * y0);
  auto load_step = [&](int stage, int step) { copies.load(As, Bs, stage, step); };

  // This thread: input channels kg·CK/KS .. of each step, channel group mg, output row yl (in the tile),
  // first output column x0.
  constexpr int CKG = T::CK / T::KS;  // input channels a group takes of each step
  const int kg = threadIdx.x / T::group_threads, t = threadIdx.x % T::group_threads;
  const int mg = t % MG, pg = t / MG, yl = pg / T::CGR, x0 = pg % T::CGR * TN;
  const int a_at = mg * T::AS;                     // weight (m0 + mg + MG·i, c, tap) = A_s[a_at + i·MG·AS + c·KK + tap]
  const int b_at = 2 * yl * T::RS + 2 * x0 + 4 - P;  // input column 2·x0 − P of the window's first row

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + mg + MG * i;
    const float b0 = kg == 0 && m < G::Out ? bias[m] : 0.f;
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = b0;
  }

  cp_async_pipeline<T::stages>(T::steps, load_step, [&](int stage) {
    const float* A = As + stage * T::a_floats + a_at;
    const float* B = Bs + stage * T::b_floats + b_at;
#pragma unroll T::CU
    for (int c = kg * CKG; c < (kg + 1) * CKG; ++c) {
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const float* row = B + c * T::CS + ky * T::RS;
        float s[max_of(SL, P + 2 * TN)];  // (1×1: room for the last 16-byte load's unused value)
#pragma unroll
        for (int q = 0; q < TN / 2; ++q) {  // row + P is 16-byte aligned: input columns 2·x0 .. 2·x0 + 2·TN
          const float4 v = *reinterpret_cast<const float4*>(row + P + 4 * q);
          s[P + 4 * q] = v.x, s[P + 4 * q + 1] = v.y, s[P + 4 * q + 2] = v.z, s[P + 4 * q + 3] = v.w;
        }
#pragma unroll
        for (int j = 0; j < SL; ++j)
          if (j < P || j >= P + 2 * TN) s[j] = row[j];
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          float a[TM];
#pragma unroll
          for (int i = 0; i < TM; ++i) a[i] = A[i * MG * T::AS + c * KK + ky * K + kx];
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], s[2 * j + kx], acc[i][j]);
        }
      }
    }
  });

  if constexpr (T::KS > 1) conv_patch_add_groups<T>(acc, kg, t);  // the later groups' sums (group 0 stores)
  if (kg > 0) return;
  const int oy = y0 + yl;
  if (oy >= G::OH) return;
  const std::size_t at = std::size_t(n) * G::Out * out_plane + std::size_t(oy) * G::OW + x0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + mg + MG * i;
    if (m < G::Out)
#pragma unroll
      for (int q = 0; q < TN / 4; ++q) {
        const float v[4] = {acc[i][4 * q], acc[i][4 * q + 1], acc[i][4 * q + 2], acc[i][4 * q + 3]};
        conv_patch_store<false, Fn>(y, bias, at + m * out_plane + 4 * q, v);
      }
  }
}

// Output rows of a group of about GT threads, whole warps, at most the image's (rounded to whole warps).
template <class G, int TM, int TN, int KS, int GT>
constexpr int conv_patch_fwd_s2_rows() {
  constexpr int per_row = (32 / TM) * (G::OW / TN);
  int th = conv_patch_rows_for(per_row, GT);
  while (th > G::OH && th % 2 == 0 && (th / 2) * per_row % 32 == 0 && (th / 2) * per_row * KS >= 64) th /= 2;
  return th;
}
template <class G, int TM, int TN, int KS = 1, int GT = 128 / KS, int CU = 1>
using ConvPatchFwdS2 = ConvPatchFwdS2Tile<G, TM, TN, conv_patch_fwd_s2_rows<G, TM, TN, KS, GT>(), KS, CU>;

// The tiles the rule takes (4 channels × 8 columns a thread, groups of 64 threads; 2026-11-27, conv_bench
// on an H100, launched dependent, µs):
//   split 2  2 groups (128 threads) where they give at least two blocks per SM, a group's 4 channels of a
//            step unrolled: 32->64 s2 @32, B = 64: 21.6 (not unrolled 22.5, the implicit GEMM 28.2);
//            B = 256: 84.5 (GEMM 84.2); 64->128 s2 @16, B = 256: 80.4 (GEMM 84.3);
//   split 4  4 groups (256 threads) below: 64->128 s2 @16, B = 64: 20.7 (split 2: 23.8, GEMM 30.2;
//            its 2 channels unrolled: 21.2).
// One group of 128 threads (4 × 8 or 8 × 4) was slower on all of them (25.8-98.0).
template <class G>
using ConvPatchFwdS2Split2 = ConvPatchFwdS2<G, 4, 8, 2, 64, 4>;
template <class G>
using ConvPatchFwdS2Split4 = ConvPatchFwdS2<G, 4, 8, 4, 64>;

template <class G>
constexpr bool conv_patch_fwd_s2_fits() {
  if constexpr (!conv_patch_fwd_s2_shape<G>() || G::OW % 8 != 0) return false;  // the tiles exist only for these
  else return ConvPatchFwdS2Split2<G>::within_budget && ConvPatchFwdS2Split4<G>::within_budget;
}
template <class G>
bool conv_patch_fwd_s2_split4(int batch) {
  return (long long)batch * ConvPatchFwdS2Split2<G>::row_tiles * ceil_div(G::Out, 32) < conv_two_waves;
}

// The copies and the stores are 16 bytes wide: weights, x and y must be 16-byte aligned.
template <class G, class T, class Fn = identity_fn>
void launch_conv_patch_fwd_s2(cudaStream_t stream, const float* w, const float* b, const float* x, float* y,
                              int batch) {
  if (!conv_patch_fp32_aligned(w, x, y))
    throw std::invalid_argument("ctnn: Conv (FP32 stride-2 patch kernel): weights, x and y must be 16-byte aligned");
  launch_conv_patch_kernel<ConvPatchFwdS2Problem<G>, T, kernel_conv_patch_fwd_s2<G, T, Fn>>(stream, w, b, x, y, batch);
}

template <class G, class Fn = identity_fn>
void launch_conv_patch_fwd_s2_auto(cudaStream_t stream, const float* w, const float* b, const float* x, float* y,
                                   int batch) {
  if (conv_patch_fwd_s2_split4<G>(batch)) launch_conv_patch_fwd_s2<G, ConvPatchFwdS2Split4<G>, Fn>(stream, w, b, x, y, batch);
  else launch_conv_patch_fwd_s2<G, ConvPatchFwdS2Split2<G>, Fn>(stream, w, b, x, y, batch);
}

// --- TF32 ------------------------------------------------------------------------------------------------
// The same staging on the tensor cores, as conv_patch.cuh's stride-1 kernel (mma.sync m16n8k8, operands
// rounded with tf32_round as they leave shared memory): a block owns BM output channels × TH output rows
// (about Pixels output pixels, at most the image's rows); its 4 warps are WM × WN, each BM / WM channels
// (MI m tiles of 16) × NJ n tiles of 8 columns of one output row. Per staged step of 8 input channels,
// each tap (ky, kx) is one mma k-step (k = the 8 channels): A(m, c) = w[m][c][tap], B(c, output column
// x) = the patch at window row 2·y + ky, input column 2·x + kx − P. B's lanes read every other column of
// a row, so its loads meet two-way bank conflicts (with 4 channels × 8 even offsets no channel stride
// avoids them). From the bias, channel steps and taps in order, the mma's k slots: the same bits run to
// run, not the FP32 kernels'.
template <class G, int Pixels, int WN>
constexpr int conv_s2_fwd_mma_rows() {
  constexpr int nt = G::OW / 8 > 0 ? G::OW / 8 : 1;  // n tiles a row
  int th = min_of(G::OH, max_of(1, Pixels / G::OW));
  while (th > 1 && th * nt % WN != 0) --th;  // the WN warps of a row of warps share the n tiles equally
  return th * nt % WN == 0 ? th : WN;
}

template <class G, int Pixels = 128, int BM_ = 32, int WM_ = 1>
struct ConvPatchFwdS2Mma : ConvPatchLayout<ConvPatchFwdS2Problem<G>, BM_, 2 * conv_s2_fwd_mma_rows<G, Pixels, 4 / WM_>() - 1,
                                           2, 128, true> {
  static constexpr int WM = WM_, WN = 4 / WM_, warps = 4, min_blocks = 3;
  static constexpr int TH = conv_s2_fwd_mma_rows<G, Pixels, WN>();  // output rows (the layout's TH: its window)
  static constexpr int row_tiles = ceil_div(G::OH, TH);
  static constexpr int MI = BM_ / WM_ / 16;  // m tiles a warp
  static constexpr int NT = G::OW / 8;       // n tiles an output row
  static constexpr int NJ = TH * NT / WN;    // n tiles a warp
  static_assert((BM_ == 32 || BM_ == 64) && (WM_ == 1 || WM_ == 2) && MI >= 1, "warps of 16, 32 or 64 channels");
};

// The tiles the rule takes (2026-11-27, conv_bench on an H100, µs at batch 64 / 256, against the
// gathering kernel conv_mma.cuh's rule ran before):
//   wide    64 channels (2 × 2 warps of 32 channels), steps of 64 pixels, where it gives at least 3/4
//           of a block per SM: 32->64 s2 @32 9.3 / 33.7 (gathering 16.6 / 42.2), 64->128 s2 @16 10.7 /
//           30.3 (19.2 / 46.7), 64->64 s2 @16 at 256 16.0 (27.6);
//   narrow  32 channels (4 warps of 32), steps of 64 pixels, below: 64->64 s2 @16 at 64 8.7 (wide 10.0,
//           its 64 blocks on 132 SMs; gathering 13.0).
// 128-pixel steps were within 0.5 µs of 64 except 32->64 s2 @32 at 64 (11.7 wide, half the blocks); 256
// pixels (a 33-row patch, 104 KB) 2× slower there; 64 channels a warp (4 warps side by side) 0.99-1.27×
// the wide tile's time.
template <class G>
using ConvPatchFwdS2MmaWide = ConvPatchFwdS2Mma<G, 64, 64, 2>;
template <class G>
using ConvPatchFwdS2MmaNarrow = ConvPatchFwdS2Mma<G, 64, 32, 1>;

template <class G>
constexpr bool conv_patch_fwd_s2_mma_fits() {
  if constexpr (!conv_patch_fwd_s2_shape<G>() || G::OW % 8 != 0) return false;  // the tiles exist only for these
  else return ConvPatchFwdS2MmaWide<G>::within_budget && ConvPatchFwdS2MmaNarrow<G>::within_budget;
}
template <class G>
bool conv_patch_fwd_s2_mma_wide(int batch) {
  return 4ll * batch * ConvPatchFwdS2MmaWide<G>::row_tiles * ceil_div(G::Out, 64) >= 3ll * sm_count();
}

template <class G, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_fwd_s2_mma(const float* __restrict__ w,     // [Out][C][K][K]
                             const float* __restrict__ bias,  // [Out]
                             const float* __restrict__ x,     // [batch][C][H][W]
                             float* __restrict__ y)           // [batch][Out][OH][OW]
{
  wait_for_prior_grids();  // launched dependent (launch.cuh): the launch overlaps the previous kernel's end
  using Pb = ConvPatchFwdS2Problem<G>;
  constexpr int MI = T::MI, NJ = T::NJ, K = G::K, KK = T::KK, P = G::P, RS = T::RS, CS = T::CS, AS = T::AS;
  constexpr std::size_t in_plane = std::size_t(G::H) * G::W, out_plane = std::size_t(G::OH) * G::OW;
  static_assert(T::TH * T::NT == T::WN * NJ, "the warps of a row of warps share the block's n tiles equally");

  float* As = conv_mma_smem();               // (stages, BM, AS): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;  // (stages, CK, CS): the patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * T::BM;
  const float* x_n = x + std::size_t(n) * G::C * in_plane;

  conv_patch_zero_halo<Pb, T>(Bs, 2 * y0);
  const ConvPatchCopies<Pb, T> copies(w, x_n, m0, 2 * y0);
  auto load_step = [&](int stage, int step) { copies.load(As, Bs, stage, step); };

  // This lane: mma group g, thread t. The warp's rows mw .. and n tiles (warp % WN)·NJ + j: output row
  // (in the tile), first column.
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, mw = warp / T::WN * (T::BM / T::WM);
  int yl[NJ], xb[NJ];
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int tile = warp % T::WN * NJ + j;
    yl[j] = tile / T::NT, xb[j] = tile % T::NT * 8;
  }
  const int a_at = (mw + g) * AS + t * KK;   // weight (row m0 + mw + g, channel t) of tap 0
  const int b_at = t * CS + 2 * g + 4 - P;   // input column 2·g − P of channel t, window row 0

  float acc[MI][NJ][4];  // (m tile, n tile, fragment)
  mma_tile_from_bias(acc, bias, m0 + mw + g, G::Out);

  cp_async_pipeline<T::stages>(T::steps, load_step, [&](int stage) {
    const float* A = As + stage * T::a_floats + a_at;
    const float* B = Bs + stage * T::b_floats + b_at;
#pragma unroll
    for (int ky = 0; ky < K; ++ky)
#pragma unroll
      for (int kx = 0; kx < K; ++kx) {
        unsigned a[MI][4], b[NJ][2];
        load_a_tf32(a, A + ky * K + kx, AS, KK);  // rows g, g + 8; channels t, t + 4
#pragma unroll
        for (int j = 0; j < NJ; ++j) {  // channels t, t + 4; output column xb + g
          const float* at = B + (2 * yl[j] + ky) * RS + 2 * xb[j] + kx;
          b[j][0] = tf32_round(at[0]);
          b[j][1] = tf32_round(at[4 * CS]);
        }
        mma_tile_tf32(acc, a, b);
      }
  });

  // Lane (g, t) holds output columns xb + 2t, 2t + 1 of n tile j (one row, 8-byte aligned).
  const std::size_t at_n = std::size_t(n) * G::Out * out_plane;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int oy = y0 + yl[j];
    if (oy >= G::OH) continue;
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + mw + 16 * i + 8 * h + g;
        const float v[2] = {acc[i][j][2 * h], acc[i][j][2 * h + 1]};
        if (m < G::Out) conv_patch_store<false, Fn>(y, bias, at_n + m * out_plane + std::size_t(oy) * G::OW + xb[j] + 2 * t, v);
      }
  }
}

// The copies are 16 bytes wide, the stores 8: weights and x 16-byte aligned, y 8-byte.
template <class G, class T, class Fn = identity_fn>
void launch_conv_patch_fwd_s2_mma(cudaStream_t stream, const float* w, const float* b, const float* x, float* y,
                                  int batch) {
  if (!conv_patch_aligned(w, x, y))
    throw std::invalid_argument("ctnn: Conv (TF32 stride-2 patch kernel): weights and x must be 16-byte aligned, "
                                "y 8-byte aligned");
  launch_conv_patch_kernel<ConvPatchFwdS2Problem<G>, T, kernel_conv_patch_fwd_s2_mma<G, T, Fn>>(stream, w, b, x, y, batch);
}

// --- The TF32 rule for the forward ------------------------------------------------------------------------
// Stride-1 "same" layers: conv_patch.cuh's kernel where its rule takes it; stride 2: the kernel above;
// else conv_mma.cuh's gathering kernels. Fn: the activation that follows the layer, in the store.
template <class G, class Fn = identity_fn>
void launch_conv_tf32_forward(cudaStream_t stream, const float* w, const float* b, const float* x, float* y,
                              int batch) {
  if constexpr (conv_patch_fits<G>())
    if (conv_patch_chosen<G>(batch) && conv_patch_aligned(w, x, y))
      return launch_conv_patch_auto<ConvPatchFwd<G>, Fn>(stream, w, b, x, y, batch);
  if constexpr (conv_patch_fwd_s2_mma_fits<G>())
    if (conv_patch_aligned(w, x, y)) {
      if (conv_patch_fwd_s2_mma_wide<G>(batch))
        return launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2MmaWide<G>, Fn>(stream, w, b, x, y, batch);
      return launch_conv_patch_fwd_s2_mma<G, ConvPatchFwdS2MmaNarrow<G>, Fn>(stream, w, b, x, y, batch);
    }
  launch_conv_mma_auto<ConvFwdGemm<G>, Fn>(stream, w, b, x, y, batch);
}

}  // namespace ctnn::kernels
