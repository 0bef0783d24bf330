#pragma once
// Backward data of stride-2 convolutions from a staged dy patch (the staging of conv_patch.cuh): FP32
// (below) and TF32 (the end of the file, with the TF32 rule for backward data).
//
// With stride 2 and P = (K − 1) / 2, input pixel (2a + py, 2b + px) of dx receives only the taps whose
// parity matches its own:
//   dx[c][2a + py][2b + px] = Σ_o Σ_{ky ≡ py + P, kx ≡ px + P (mod 2)} w[o][c][ky][kx] ·
//                                                           dy[o][a + (py + P − ky) / 2][b + (px + P − kx) / 2],
// 9 taps over the four parity classes of a 3×3 window (1, 2, 2 and 4). The implicit GEMM
// (conv_gemm.cuh) runs the classes as four problems whose k loops have 1 to 4 taps per channel, and
// gathers dy 4 bytes per (k, column): 22-30% of the FP32 peak on the CIFAR layers. Here a block owns
// BM input channels × TH dy rows of one sample, that is dx rows 2·y0 .. 2·(y0 + TH), and per step of CK
// output channels o (8; 16 for the row split tile below) stages (ConvPatchCopies) the dy rows those read (TH + P rows from y0 −
// floor(P / 2), zero halo) and w[o][c0 .. c0 + BM][K][K]. A thread owns TM neighbouring channels (TM·mg
// + i: their TM·K·K weights of a step are one contiguous run, TM·K·K floats from the next thread's, so
// a warp's loads fall on distinct banks) × both dx rows of one dy row × the 2·TB dx columns of TB dy
// columns: per o it reads its P + 1 dy row segments once (TB / 4 16-byte loads and P single ones per
// row) and per row of taps its TM·K weights, in 8-byte loads where TM·K·K is even (conv_s2_load_taps),
// which feed TM · TB · 2 FMAs a tap (3×3, TM = 2, TB = 8: 18 loads per 144 FMAs; 24 with single
// loads, 2026-11-27: 24.4 → 23.9 µs at 32->64 s2 @32, B = 64, H100).
//
// Summation order: o increasing, then the taps (ky, kx) increasing, one fmaf each from zero: the unsplit
// implicit GEMM's order (its parity classes list their taps that way), so the two agree to the bit. The
// split tiles (2 thread groups over each step's channels, added in group order) round differently.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "conv_patch.cuh"
#include "conv_stem_wgrad_epilogue.cuh"

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
// KS groups of threads split each step's 8 output channels (conv_patch_add_groups adds their sums).
template <class G, int TM_, int TB_, int TH_, int KS_ = 1, int CU_ = 1, int CK_ = 8>
struct ConvPatchS2Tile
    : ConvPatchLayout<ConvPatchDgradS2<G>, 32, TH_, 2, KS_ * (32 / TM_) * TH_ * (G::OW / TB_), true, CK_> {
  static constexpr int TM = TM_, TB = TB_, KS = KS_, MG = 32 / TM_, CGR = G::OW / TB_;  // CGR: column groups per dy row
  static constexpr int CU = CU_;  // channels unrolled
  static constexpr int group_threads = MG * TH_ * CGR, threads = KS * group_threads;
  static constexpr int min_blocks = 512 / threads;  // at most 128 registers
  static constexpr int red_floats = (KS - 1) * TM * 4 * TB * group_threads;  // the later groups' sums
  static_assert(32 % TM == 0 && 32 % MG == 0, "a warp holds whole sets of channel groups");
  static_assert(TB % 4 == 0 && G::OW % TB == 0, "a thread's dy columns are whole 16-byte chunks of one row");
  static_assert(group_threads % 32 == 0 && threads >= 64 && threads <= 256, "2 to 8 warps, groups of whole warps");
  // The stages, or the later groups' sums at the end if those need more.
  static constexpr int smem_bytes = max_of(int(ConvPatchS2Tile::ConvPatchLayout::smem_bytes), red_floats * 4);
  static_assert(CK_ % KS == 0, "KS divides a step's channels");
};

// v = base[off .. off + K). Paired: base is 8-byte aligned (the thread's TM·K·K weights of a step, TM·K·K
// even), so the run is read in 8-byte loads where they fall (off is a constant once the loops unroll).
template <bool Paired, int K>
__device__ __forceinline__ void conv_s2_load_taps(const float* base, int off, float (&v)[K]) {
  int j = 0;
  if (Paired && off % 2 == 1) v[j] = base[off + j], ++j;
#pragma unroll
  for (; Paired && j + 1 < K; j += 2) {
    const float2 p = *reinterpret_cast<const float2*>(base + off + j);
    v[j] = p.x, v[j + 1] = p.y;
  }
#pragma unroll
  for (; j < K; ++j) v[j] = base[off + j];
}

// Block (blockIdx.x = sample · row_tiles + row tile, blockIdx.y = BM tile of the input channels). Fn: the
// activation below the layer, whose backward the store applies (conv_patch_store; identity_fn: none).
template <class G, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_dgrad_s2(const float* __restrict__ w,      // [Out][C][K][K]
                           const float* __restrict__ below,  // [batch][C][H][W]: Fn's output (or unused)
                           const float* __restrict__ dy,     // [batch][Out][OH][OW]
                           float* __restrict__ dx)           // [batch][C][H][W]
{
  wait_for_prior_grids();  // launched dependent (launch.cuh): its launch overlaps the previous kernel's end
  using Pb = ConvPatchDgradS2<G>;
  constexpr int TM = T::TM, TB = T::TB, MG = T::MG, K = G::K, KK = T::KK, P = G::P;
  constexpr int SK = Pb::K, SP = Pb::P, SL = TB + SK - 1;  // a thread's dy values of one row
  // A thread's TB columns are the whole dy row: its halo columns are the zero padding, neither read nor
  // multiplied (the sums, from +0, never hold −0, so skipping a product of a finite weight and +0
  // changes no bit).
  constexpr bool whole_rows = T::CGR == 1;
  constexpr std::size_t dy_plane = std::size_t(G::OH) * G::OW, dx_plane = std::size_t(G::H) * G::W;

  float* As = conv_mma_smem();               // (stages, CK, OS): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;  // (stages, CK, CS): the dy patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * T::BM;
  const float* dy_n = dy + std::size_t(n) * G::Out * dy_plane;

  conv_patch_zero_halo<Pb, T>(Bs, y0);
  const ConvPatchCopies<Pb, T> copies(w, dy_n, m0, y0);
  auto load_step = [&](int stage, int step) { copies.load(As, Bs, stage, step); };

  // This thread: output channels kg·CK/KS .. of each step, channel group mg, dy row yl (in the tile),
  // first dy column b0.
  constexpr int CKG = T::CK / T::KS;
  const int kg = threadIdx.x / T::group_threads, t = threadIdx.x % T::group_threads;
  const int mg = t % MG, pg = t / MG, yl = pg / T::CGR, b0 = pg % T::CGR * TB;
  const int a_at = mg * TM * KK;  // w[o][m0 + TM·mg + i][tap] = A_s[a_at + o·OS + i·KK + tap]
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
#pragma unroll T::CU
    for (int o = kg * CKG; o < (kg + 1) * CKG; ++o) {
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
          if (!whole_rows && (j < SP || j >= SP + TB)) s[r][j] = row[j];
      }
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const int py = conv_s2_parity(ky, P), r = conv_s2_offset(py, ky, P) + SP;
        float a[TM][K];  // the taps of row ky of the thread's channels
#pragma unroll
        for (int i = 0; i < TM; ++i) conv_s2_load_taps<(TM * KK) % 2 == 0>(A + o * T::OS, i * KK + ky * K, a[i]);
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const int px = conv_s2_parity(kx, P), dc = conv_s2_offset(px, kx, P) + SP;
#pragma unroll
          for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int b = 0; b < TB; ++b)
              if (!whole_rows || (b + dc >= SP && b + dc < SP + TB))
                acc[i][py][2 * b + px] = fmaf(a[i][kx], s[r][b + dc], acc[i][py][2 * b + px]);
        }
      }
    }
  });

  // The later groups' sums (group 0 stores), acc seen as TM rows of both dx rows' 2·TB columns.
  if constexpr (T::KS > 1) conv_patch_add_groups<T>(reinterpret_cast<float(&)[TM][4 * TB]>(acc), kg, t);
  if (kg > 0) return;
  const int a = y0 + yl;
  if (a >= G::OH) return;
  const std::size_t at = std::size_t(n) * G::C * dx_plane + std::size_t(2 * a) * G::W + 2 * b0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int c = m0 + TM * mg + i;
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
// The copies and the stores are 16 bytes wide: weights, dy and dx must be 16-byte aligned. below: the
// output of the activation below the layer (see the kernel). Kernel: this FP32 one, or the TF32 one at
// the end of the file (`what` names it in the error).
template <class G, class T, auto Kernel>
void launch_conv_patch_dgrad_s2_kernel(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                                       const float* below, const char* what) {
  if (!conv_patch_fp32_aligned(w, dy, dx))
    throw std::invalid_argument(std::string("ctnn: Conv backward (") + what +
                                " stride-2 patch kernel): weights, dy and dx must be 16-byte aligned");
  launch_conv_patch_kernel<ConvPatchDgradS2<G>, T, Kernel>(stream, w, below, dy, dx, batch);
}
template <class G, class T, class Fn = identity_fn>
void launch_conv_patch_dgrad_s2(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                                const float* below = nullptr) {
  launch_conv_patch_dgrad_s2_kernel<G, T, kernel_conv_patch_dgrad_s2<G, T, Fn>>(stream, w, dy, dx, batch, below, "FP32");
}

// A tile of about 128 threads (a group of them, with KS groups): whole warps of dy rows.
template <class G, int TM, int TB, int KS = 1, int CU = 1, int CK = 8>
using ConvPatchS2 = ConvPatchS2Tile<G, TM, TB, conv_patch_rows_for((32 / TM) * (G::OW / TB), 128), KS, CU, CK>;

// The tiles the rule takes, from conv_bench on an H100 (docs/conv_kernels.md; 128 threads, 32 channels):
//   wide    2 channels × 8 dy columns a thread: the fastest where its blocks fill the GPU three times
//           over (two blocks per SM each time): 32->64 s2 @32, B = 256: 88.8 µs (1 × 8: 94.2, the
//           implicit GEMM 136.5);
//   narrow  1 channel × 8 dy columns: twice the blocks, everywhere else (64->128 s2 @16, B = 256: 87.5
//           against 93.6 wide and 124.0 for the GEMM; B = 64: 29.5 against 33.1 and 39.1).
// 2 × 4 and 4 × 4 a thread were slower on every layer measured. Where even the narrow tile leaves
// fewer than three blocks per SM (batch 64), the tiles whose 2 groups of threads split each step's 8
// output channels (256 threads) (2026-11-27, conv_bench, H100, the kernels launched dependent):
//   wide split    where the narrow tile gives more than 264 blocks (32->64 s2 @32, B = 64: 24.5 µs
//                 against 25.4 narrow);
//   narrow split  below (64->128 s2 @16, B = 64: 23.9 against 26.7 narrow);
// both with a group's 4 output channels of a step unrolled by 2 (0.4-0.8 µs faster).
//   row split     instead of both where a thread's dy columns can be a whole row (OW = 8 or 16: 1 × OW a
//                 thread), whose halo columns are padding it neither reads nor multiplies (whole_rows
//                 in the kernel), in steps of 16 output channels where Out % 16 == 0 (half the
//                 barriers), unrolled by 4 (OW = 8) or 2 (2026-11-28, conv_bench, H200, B = 64, two runs:
//                 32->64 s2 @32 22.4 µs against 23.3 wide split, 64->128 s2 @16 20.7-20.8 against
//                 22.1-22.2 narrow split, which already had whole rows; steps of 16 alone: 21.2-21.3).
template <class G>
using ConvPatchS2Wide = ConvPatchS2<G, 2, 8>;
template <class G>
using ConvPatchS2Narrow = ConvPatchS2<G, 1, 8>;
template <class G>
using ConvPatchS2WideSplit = ConvPatchS2<G, 2, 8, 2, 2>;
template <class G>
using ConvPatchS2NarrowSplit = ConvPatchS2<G, 1, 8, 2, 2>;
template <class G>
constexpr bool conv_s2_row_tile() { return G::OW == 8 || G::OW == 16; }  // (64 accumulators at most)
template <class G>
using ConvPatchS2RowSplit = ConvPatchS2<G, 1, G::OW, 2, G::OW == 8 ? 4 : 2, G::Out % 16 == 0 ? 16 : 8>;

template <class G>
constexpr bool conv_patch_dgrad_s2_fits() {
  if constexpr (!conv_patch_dgrad_s2_shape<G>()) return false;  // the tiles exist only for these
  else if constexpr (conv_s2_row_tile<G>() && !ConvPatchS2RowSplit<G>::within_budget) return false;
  else
    return ConvPatchS2Wide<G>::within_budget && ConvPatchS2Narrow<G>::within_budget &&
           ConvPatchS2WideSplit<G>::within_budget && ConvPatchS2NarrowSplit<G>::within_budget;
}

// The rule's tile (see above).
enum class ConvS2Tile { wide, narrow, wide_split, narrow_split, row_split };
template <class G>
ConvS2Tile conv_patch_dgrad_s2_tile(int batch) {
  const long long c_tiles = ceil_div(G::C, 32);
  const long long wide = batch * ConvPatchS2Wide<G>::row_tiles * c_tiles;
  const long long narrow = batch * ConvPatchS2Narrow<G>::row_tiles * c_tiles;
  if (wide >= 3 * conv_two_waves) return ConvS2Tile::wide;
  if (narrow >= 3 * conv_two_waves) return ConvS2Tile::narrow;
  if (conv_s2_row_tile<G>()) return ConvS2Tile::row_split;
  return narrow > conv_two_waves ? ConvS2Tile::wide_split : ConvS2Tile::narrow_split;
}

template <class G, class Fn = identity_fn>
void launch_conv_patch_dgrad_s2_auto(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                                     const float* below = nullptr) {
  switch (conv_patch_dgrad_s2_tile<G>(batch)) {
    case ConvS2Tile::wide: return launch_conv_patch_dgrad_s2<G, ConvPatchS2Wide<G>, Fn>(stream, w, dy, dx, batch, below);
    case ConvS2Tile::narrow: return launch_conv_patch_dgrad_s2<G, ConvPatchS2Narrow<G>, Fn>(stream, w, dy, dx, batch, below);
    case ConvS2Tile::wide_split:
      return launch_conv_patch_dgrad_s2<G, ConvPatchS2WideSplit<G>, Fn>(stream, w, dy, dx, batch, below);
    case ConvS2Tile::narrow_split:
      return launch_conv_patch_dgrad_s2<G, ConvPatchS2NarrowSplit<G>, Fn>(stream, w, dy, dx, batch, below);
    case ConvS2Tile::row_split:
      if constexpr (conv_s2_row_tile<G>())
        return launch_conv_patch_dgrad_s2<G, ConvPatchS2RowSplit<G>, Fn>(stream, w, dy, dx, batch, below);
      break;
  }
}

// --- TF32 ------------------------------------------------------------------------------------------------
// The same problem and staging on the tensor cores (mma.sync m16n8k8, operands rounded with tf32_round
// as they leave shared memory). A block owns BM = 32 input channels × 64 dy pixels (TH = 64 / OW dy
// rows); its 4 warps are WM × WN (the rule's: 2 × 2), each 32 / WM channels (MI m tiles) × NJ n tiles of
// 8 columns of one dy row, for all four parity classes (4 · MI · NJ fragments: 64 accumulators). Per
// staged step of 8 output channels (one mma k-step):
//   B: the dy fragments of each window offset (dr, dc), SK × SK of them (3×3: 4), shared by the taps
//      that read that offset (each offset serves one tap of each class that has it);
//   A: per tap the weights w[o][c][tap] of the warp's 32 / WM channels, then MI · NJ mma into the tap's
//      class.
// The results of the classes px = 0, 1 interleave into 16-byte rows of dx (conv_patch_store, with the
// backward of an activation below folded in where asked). Summation order fixed by the tile (steps of
// o, taps in order, the mma's k slots): the same bits run to run, not the FP32 kernels'.
template <class G>
constexpr int conv_s2_mma_rows() { return G::OW <= 64 && 64 % G::OW == 0 ? 64 / G::OW : 1; }

// 2 × 2 warps (16 channels × 32 pixels each) read half the weight fragments of 1 × 4 (32 × 16), and the
// per-tap weights are most of a step's loads (2026-11-27, conv_bench, H100, µs at batch 64 / 256):
// 32->64 s2 @32 10.0 / 34.3 against 12.2 / 36.6, 64->64 s2 @16 7.1 / 16.9 against 8.0 / 19.9, 64->128 s2
// @16 10.7 / 27.0 against 12.0 / 31.2.
template <class G, int WM_ = 2>
struct ConvPatchS2Mma : ConvPatchLayout<ConvPatchDgradS2<G>, 32, conv_s2_mma_rows<G>(), 2, 128, true> {
  static constexpr int WM = WM_, WN = 4 / WM_, MI = 2 / WM_, NJ = 8 / WN, warps = 4, min_blocks = 3;
  static constexpr int NT = G::OW / 8;  // n tiles per dy row
  static_assert(64 % G::OW == 0, "a block's 64 dy pixels are whole rows");
};

template <class G>
constexpr bool conv_patch_dgrad_s2_mma_fits() {
  if constexpr (!conv_patch_dgrad_s2_shape<G>() || 64 % G::OW != 0) return false;
  else return ConvPatchS2Mma<G>::within_budget;
}

// The kernel's body. G0 void: dx as above. G0 the stem below Fn (conv_stem_wgrad_epilogue.cuh): no dx,
// the stem's partial weight gradient of the block's pixels into partials[blockIdx.x] instead, from x0.
template <class G, class T, class Fn, class G0>
__device__ __forceinline__ void conv_patch_dgrad_s2_mma_body(const float* __restrict__ w, const float* __restrict__ below,
                                                              const float* __restrict__ dy, float* __restrict__ dx,
                                                              const float* __restrict__ x0, float* __restrict__ partials) {
  wait_for_prior_grids();  // launched dependent (launch.cuh): its launch overlaps the previous kernel's end
  using Pb = ConvPatchDgradS2<G>;
  constexpr int MI = T::MI, NJ = T::NJ, K = G::K, KK = T::KK, P = G::P, SK = Pb::K, SP = Pb::P;
  constexpr int RS = T::RS, CS = T::CS, OS = T::OS;
  constexpr std::size_t dy_plane = std::size_t(G::OH) * G::OW, dx_plane = std::size_t(G::H) * G::W;

  float* As = conv_mma_smem();               // (stages, CK, OS): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;  // (stages, CK, CS): the dy patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * T::BM;
  const float* dy_n = dy + std::size_t(n) * G::Out * dy_plane;

  conv_patch_zero_halo<Pb, T>(Bs, y0);
  const ConvPatchCopies<Pb, T> copies(w, dy_n, m0, y0);
  auto load_step = [&](int stage, int step) { copies.load(As, Bs, stage, step); };

  // This lane: mma group g, thread t. The warp's channels mw .. and n tiles (warp % WN)·NJ + j: dy row
  // (in the tile), first column (the same placement as the stride-2 forward's TF32 kernel).
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, mw = warp / T::WN * (32 / T::WM);
  int yl[NJ], xb[NJ];
#pragma unroll
  for (int j = 0; j < NJ; ++j) {
    const int tile = warp % T::WN * NJ + j;
    yl[j] = tile / T::NT, xb[j] = tile % T::NT * 8;
  }
  const int a_at = t * OS + (mw + g) * KK;  // weight (row m0 + mw + g, o = t) of tap 0
  const int b_at = t * CS + g + 4 - SP;  // dy column g − SP of channel o = t, row 0

  float acc[4][MI][NJ][4];  // (parity class 2·py + px, m tile, n tile, fragment)
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int j = 0; j < NJ; ++j) acc[k][i][j][0] = acc[k][i][j][1] = acc[k][i][j][2] = acc[k][i][j][3] = 0.f;

  cp_async_pipeline<T::stages>(T::steps, load_step, [&](int stage) {
    const float* A = As + stage * T::a_floats + a_at;
    const float* B = Bs + stage * T::b_floats + b_at;
    unsigned b[SK][SK][NJ][2];  // window offset (r, c): dy row yl + r − SP, column xb + g + c − SP
#pragma unroll
    for (int r = 0; r < SK; ++r)
#pragma unroll
      for (int c = 0; c < SK; ++c)
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          const float* at = B + (yl[j] + r) * RS + xb[j] + c;
          b[r][c][j][0] = tf32_round(at[0]);
          b[r][c][j][1] = tf32_round(at[4 * CS]);
        }
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
      const int py = conv_s2_parity(ky, P), r = conv_s2_offset(py, ky, P) + SP;
#pragma unroll
      for (int kx = 0; kx < K; ++kx) {
        const int px = conv_s2_parity(kx, P), c = conv_s2_offset(px, kx, P) + SP;
        unsigned a[MI][4];
        load_a_tf32(a, A + ky * K + kx, KK, OS);  // rows g, g + 8; o = t, t + 4
        mma_tile_tf32(acc[2 * py + px], a, b[r][c]);
      }
    }
  });

  // Lane (g, t) holds dy columns xb + 2t, 2t + 1 of each class: dx columns 2·xb + 4t .. 4t + 3 of dx row
  // 2a + py, as (px = 0, 2t), (1, 2t), (0, 2t + 1), (1, 2t + 1).
  const std::size_t at_n = std::size_t(n) * G::C * dx_plane;
  if constexpr (!std::is_void_v<G0>) {
    static_assert(G::OH % T::TH == 0 && T::BM == G::C, "whole tiles of all the stem's channels");
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int py = 0; py < 2; ++py) {  // g = dx · Fn'(the stem's output), in place
            const int c = mw + 16 * i + 8 * h + g;
            const float4 y = *reinterpret_cast<const float4*>(
                below + at_n + c * dx_plane + std::size_t(2 * (y0 + yl[j]) + py) * G::W + 2 * xb[j] + 4 * t);
            acc[2 * py][i][j][2 * h] *= Fn::derivative(y.x), acc[2 * py + 1][i][j][2 * h] *= Fn::derivative(y.y);
            acc[2 * py][i][j][2 * h + 1] *= Fn::derivative(y.z), acc[2 * py + 1][i][j][2 * h + 1] *= Fn::derivative(y.w);
          }
    __syncthreads();  // (the main loop's last reads of shared memory)
    // k tile 4·... (class cl, n tile j): k slot t is dx pixel (2·yl + py, 2·xb + 4t + px), slot t + 4 two
    // columns on (the tile's dy columns 2t, 2t + 1).
    stem_wgrad_epilogue<G0, T, 2 * T::TH, 4 * NJ, 2>(
        [&](int kt, int i) -> const float(&)[4] { return acc[kt / NJ][i][kt % NJ]; },
        [&](int kt) {
          const int cl = kt / NJ, j = kt % NJ;
          return (2 * yl[j] + cl / 2) * StemWgradEpilogue<G0>::XR + 2 * xb[j] + 4 * t + cl % 2;
        },
        x0 + std::size_t(n) * G0::C * dx_plane, As, 2 * y0, mw,
        partials + std::size_t(blockIdx.x) * StemWgradEpilogue<G0>::E);
  } else {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int a = y0 + yl[j];
      if (a >= G::OH) continue;
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int c = m0 + mw + 16 * i + 8 * h + g;
          if (c >= G::C) continue;
#pragma unroll
          for (int py = 0; py < 2; ++py) {
            const float v[4] = {acc[2 * py][i][j][2 * h], acc[2 * py + 1][i][j][2 * h], acc[2 * py][i][j][2 * h + 1],
                                acc[2 * py + 1][i][j][2 * h + 1]};
            conv_patch_store<true, Fn>(dx, below, at_n + c * dx_plane + std::size_t(2 * a + py) * G::W + 2 * xb[j] + 4 * t, v);
          }
        }
    }
  }
}

template <class G, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_dgrad_s2_mma(const float* __restrict__ w,      // [Out][C][K][K]
                               const float* __restrict__ below,  // [batch][C][H][W]: Fn's output (or unused)
                               const float* __restrict__ dy,     // [batch][Out][OH][OW]
                               float* __restrict__ dx)           // [batch][C][H][W]
{
  conv_patch_dgrad_s2_mma_body<G, T, Fn, void>(w, below, dy, dx, nullptr, nullptr);
}

// The stem's weight gradient in place of dx (G0: the stem, layer 0; Fn its activation).
template <class G, class T, class Fn, class G0>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_dgrad_s2_mma_stem_wgrad(const float* __restrict__ w,      // [Out][C][K][K]
                                          const float* __restrict__ below,  // [batch][C][H][W]: the stem's output
                                          const float* __restrict__ dy,     // [batch][Out][OH][OW]
                                          const float* __restrict__ x0,     // [batch][C0][H][W]: the stem's input
                                          float* __restrict__ partials)     // [blocks][E]
{
  conv_patch_dgrad_s2_mma_body<G, T, Fn, G0>(w, below, dy, nullptr, x0, partials);
}

template <class G, class Fn = identity_fn, class T = ConvPatchS2Mma<G>>
void launch_conv_patch_dgrad_s2_mma(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch,
                                    const float* below = nullptr) {
  launch_conv_patch_dgrad_s2_kernel<G, T, kernel_conv_patch_dgrad_s2_mma<G, T, Fn>>(stream, w, dy, dx, batch, below,
                                                                                  "TF32");
}

// The stem's weight gradient in the backward data (kernel_conv_patch_dgrad_s2_mma_stem_wgrad): which
// layer pairs (G above the stem G0's activation), the partials it writes (ctx.workspace), the launch:
// the kernel, then sum_partials into dw0 and db0 (both dependent launches). No dx.
template <class G, class G0>
constexpr bool conv_s2_stem_wgrad_fits() {
  if constexpr (!conv_patch_dgrad_s2_mma_fits<G>() || !stem_wgrad_epilogue_shape<G, G0>()) return false;
  else {
    using T = ConvPatchS2Mma<G>;
    return G::OH % T::TH == 0 && StemWgradEpilogue<G0>::template smem_bytes<2 * T::TH, T::WN> <= T::smem_bytes;
  }
}
template <class G, class G0>
constexpr std::size_t conv_s2_stem_wgrad_workspace_floats(int max_batch) {
  if constexpr (!conv_s2_stem_wgrad_fits<G, G0>()) return 0;
  else return std::size_t(max_batch) * ConvPatchS2Mma<G>::row_tiles * StemWgradEpilogue<G0>::E;
}
template <class G, class G0, class Fn>
void launch_conv_patch_dgrad_s2_mma_stem_wgrad(cudaStream_t stream, const float* w, const float* below, const float* dy,
                                               const float* x0, float* partials, float* dw0, float* db0, int batch) {
  static_assert(conv_s2_stem_wgrad_fits<G, G0>(), "see conv_s2_stem_wgrad_fits");
  using T = ConvPatchS2Mma<G>;
  if (!conv_patch_fp32_aligned(w, dy, below) || !aligned_to(partials, 16))
    throw std::invalid_argument("ctnn: Conv backward (TF32 stride-2 patch kernel with the stem's weight gradient): "
                                "weights, dy, the stem's output and the partials must be 16-byte aligned");
  launch_with_stem_wgrad<G0, kernel_conv_patch_dgrad_s2_mma_stem_wgrad<G, T, Fn, G0>, T::threads, T::smem_bytes,
                         T::row_tiles>(stream, w, below, dy, x0, partials, dw0, db0, batch);
}

// Either kernel (stride 1: conv_patch.cuh's, stride 2: the one above) with the stem's weight gradient in
// its epilogue, where one fits.
template <class G, class G0>
constexpr bool conv_stem_wgrad_fits() {
  return conv_patch_stem_wgrad_fits<G, G0>() || conv_s2_stem_wgrad_fits<G, G0>();
}
template <class G, class G0>
constexpr std::size_t conv_stem_wgrad_workspace_floats(int max_batch) {
  return max_of(conv_patch_stem_wgrad_workspace_floats<G, G0>(max_batch),
                conv_s2_stem_wgrad_workspace_floats<G, G0>(max_batch));
}
template <class G, class G0, class Fn>
void launch_conv_dgrad_stem_wgrad(cudaStream_t stream, const float* w, const float* below, const float* dy,
                                  const float* x0, float* partials, float* dw0, float* db0, int batch) {
  if constexpr (conv_patch_stem_wgrad_fits<G, G0>())
    launch_conv_patch_stem_wgrad<G, G0, Fn>(stream, w, below, dy, x0, partials, dw0, db0, batch);
  else launch_conv_patch_dgrad_s2_mma_stem_wgrad<G, G0, Fn>(stream, w, below, dy, x0, partials, dw0, db0, batch);
}

// --- The TF32 rule for backward data -------------------------------------------------------------------
// Stride-1 "same" layers: conv_patch.cuh's kernel where its rule takes it; stride 2: the kernel above;
// else conv_mma.cuh's gathering kernels.
//
// Backward data with the backward of the activation Fn below the layer folded into its store (below:
// that activation's output, the layer's input), where the rule takes a patch kernel; false, having
// launched nothing, elsewhere (its caller then runs the activation's backward).
template <class G, class Fn>
bool launch_conv_tf32_dgrad_act(cudaStream_t stream, const float* w, const float* dy, const float* below, float* dx,
                                int batch) {
  if constexpr (conv_patch_fits<G>())
    if (conv_patch_chosen<G>(batch) && conv_patch_aligned(w, dy, dx) && aligned_to(below, 8)) {
      launch_conv_patch_auto<ConvPatchDgrad<G>, Fn>(stream, w, below, dy, dx, batch);
      return true;
    }
  if constexpr (conv_patch_dgrad_s2_mma_fits<G>())
    if (conv_patch_fp32_aligned(w, dy, dx) && aligned_to(below, 16)) {
      launch_conv_patch_dgrad_s2_mma<G, Fn>(stream, w, dy, dx, batch, below);
      return true;
    }
  return false;
}

// Backward data: the patch kernels as above (no activation: below unused), else the gathering ones.
template <class G>
void launch_conv_tf32_dgrad(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch) {
  if (!launch_conv_tf32_dgrad_act<G, identity_fn>(stream, w, dy, nullptr, dx, batch))
    launch_conv_dgrad_mma_auto<G>(stream, w, dy, dx, batch);
}

}  // namespace ctnn::kernels
