#pragma once
// TF32 convolution from an input patch staged in shared memory: the forward of stride-1, "same"
// convolutions (2P = K − 1, so OH = H and OW = W), and their backward data, which is the same problem
// on dy with the kernel flipped and its two channel axes swapped (docs/conv_kernels.md).
//
// conv_mma.cuh gathers the implicit GEMM's B operand one 4-byte element per (k, column): for a 3×3
// window each input value is copied nine times, and the instructions of those copies, not the mma,
// set the pace. Here a block owns BM output channels × TH whole output rows of one sample, and per step
// of 8 input channels copies
//   the patch: the TH + K − 1 input rows those outputs read, whole rows of all 8 channels, in 16-byte
//     copies (rows of x are contiguous in NCHW; W % 4 == 0), zero halo around them;
//   the weights of the BM channels for those 8 input channels, all K·K taps, in 16-byte copies;
// and then runs K·K mma k-steps of 8 (one per tap, k = the 8 channels): B(c, (y, x)) of tap (ky, kx) is
// patch[c][y + ky][x + kx], read straight from the patch. Each input value is copied once per block.
//
// Layouts (floats), chosen so that every fragment load of a warp touches 32 distinct banks (K odd):
//   patch  (8 channels, PR = TH + K − 1 rows, RS = W + 8 columns): input column x at x + 4 (a zero
//          16-byte halo either side, P <= 4); channel stride CS ≡ 8 (mod 32), so lanes (g, t) of a B
//          fragment (channel t, column g) sit on bank 8t + g + const.
//   weights, forward: (BM rows m, AS = 8·K·K + 4): w's row m from channel c0 on, as in memory
//          (c, ky, kx); AS/4 odd, so lanes (g, t) (row g, channel t: g·AS + t·K·K) are distinct.
//   weights, backward data: (8 channels o, OS ≡ 8 (mod 32)): w[o][m0 .. m0 + BM)[K][K], a contiguous
//          run of memory per o (A(m, (o, tap)) = w[o][m][flipped tap]); lanes on t·OS + g·K·K.
// A warp owns (BM / WM) rows × TH / WN whole output rows; its B fragments need one base register.
//
// Operands are rounded to TF32 as in conv_mma.cuh (tf32_round) when they leave shared memory; the
// products accumulate in FP32 from the bias. Summation order fixed by the tile (channel steps, taps,
// mma k slots): two runs give the same bits; it differs from conv_mma.cuh's order.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../layers/activation.hpp"
#include "conv_mma.cuh"
#include "conv_stem_wgrad_epilogue.cuh"

namespace ctnn::kernels {

// --- Problems ------------------------------------------------------------------------------------------
// Which convolutions the patch kernels run: stride 1, no dilation, "same" padding (OH = H, OW = W), K
// odd and at most 5 (the halo fits in a 16-byte chunk; the weights of a step, BM × 8·K·K, fit the
// shared memory of every tile), W a multiple of 8 (an mma's 8 columns lie in one row; rows start
// 16-byte aligned) and at most 64, both channel counts multiples of 8 (one mma k-step of the reduced
// channels; 16-byte copies of the weights).
template <class G>
constexpr bool conv_patch_fits() {
  return G::S == 1 && G::D == 1 && G::K % 2 == 1 && G::K <= 5 && 2 * G::P == G::K - 1 && G::W % 8 == 0 &&
         G::W <= 64 && G::C % 8 == 0 && G::Out % 8 == 0;
}

// Forward: out = y [batch][Out][H][W] from src = x [batch][C][H][W] and w [Out][C][K][K].
template <class G>
struct ConvPatchFwd {
  static constexpr int M = G::Out, SC = G::C, H = G::H, W = G::W, K = G::K, P = G::P, WK = G::K, S = 1;
  static constexpr bool has_bias = true, dgrad = false;
};
// Backward data: out = dx [batch][C][H][W] from src = dy [batch][Out][H][W]: the forward with the
// window flipped (P' = K − 1 − P = P) and w read as [o][c].
template <class G>
struct ConvPatchDgrad {
  static constexpr int M = G::C, SC = G::Out, H = G::H, W = G::W, K = G::K, P = G::K - 1 - G::P, WK = G::K, S = 1;
  static constexpr bool has_bias = false, dgrad = true;
};

// cp_async_f32x4 through L1 (.ca): the weights, which every block of a BM tile reads.
__device__ __forceinline__ void cp_async_f32x4_l1(float* dst_smem, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(dst_smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#else
  cp_async_f32x4(dst_smem, src, valid);
#endif
}

// Smallest y >= x with y ≡ 8 (mod 32).
constexpr int round_to_8_mod_32(int x) { return x + ((8 - x % 32) + 32) % 32; }

// --- Staging layout (shared by the TF32 kernel here and the FP32 ones of conv_patch_fp32.cuh) ----------
// One stage holds the weights of BM output rows for CK reduced channels (8: one mma k-step) (a_floats) and the patch of
// those channels for TH output rows (b_floats); Threads copy them. A problem Pb names the source (SC
// channels, H × W), the window its TH rows read (K rows from row y0 − P on: TH + K − 1 source rows) and
// the weights' window WK (K, except for the stride-2 backward data, whose patch is dy).
template <class Pb, int BM_, int TH_, int Stages_, int Threads_, bool L1Weights_, int CK_ = 8>
struct ConvPatchLayout {
  static constexpr int BM = BM_, TH = TH_, stages = Stages_, threads = Threads_, CK = CK_;  // CK: channels per step
  static constexpr bool l1_weights = L1Weights_;
  static constexpr int KK = Pb::WK * Pb::WK;  // taps of the weights
  static constexpr int PR = TH + Pb::K - 1, RS = Pb::W + 8, CS = round_to_8_mod_32(PR * RS);
  static constexpr int AS = CK * KK + 4;                     // forward weights: row stride
  static constexpr int OS = round_to_8_mod_32(BM * KK);      // backward-data weights: channel stride
  static constexpr int a_floats = Pb::dgrad ? CK * OS : BM * AS, b_floats = CK * CS;
  static constexpr int smem_bytes = stages * (a_floats + b_floats) * 4;
  static constexpr int row_tiles = ceil_div(Pb::H, TH), steps = Pb::SC / CK;
  static_assert(Pb::SC % CK == 0 && Pb::M % 4 == 0 && Pb::W % 8 == 0, "see conv_patch_fits");
  static_assert(stages >= 2, "double buffering at least");
  static_assert(smem_bytes <= 227 * 1024, "the shared memory of one block on sm_90");
  // What the rules take: two blocks per SM on Hopper (228 KB per SM). Larger tiles (a 5×5 window's
  // weights with 64 rows) run only when forced (tests, benchmarks).
  static constexpr bool within_budget = smem_bytes <= 100 * 1024;
};

// The patch's halo and its rows outside the image are zero in every stage, written once before the
// pipeline: the copies of ConvPatchCopies never touch them (the pipeline's first __syncthreads
// orders these stores).
template <class Pb, class T>
__device__ __forceinline__ void conv_patch_zero_halo(float* Bs, int y0) {
  constexpr int PR = T::PR, RS = T::RS, CS = T::CS, CK = T::CK, W = Pb::W;
  for (int line = threadIdx.x; line < T::stages * CK * PR; line += T::threads) {
    const int r = line % PR, y = y0 - Pb::P + r;
    float* row = Bs + (line / (CK * PR)) * T::b_floats + (line / PR % CK) * CS + r * RS;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    *reinterpret_cast<float4*>(row) = zero;
    *reinterpret_cast<float4*>(row + 4 + W) = zero;
    if (y < 0 || y >= Pb::H)
      for (int v = 1; v <= W / 4; ++v) *reinterpret_cast<float4*>(row + 4 * v) = zero;
  }
}

// --- The copies of a channel step -----------------------------------------------------------------------
// Rows × Quads 16-byte copies shared by Threads threads: thread t takes quad q0 = t % Quads of rows
// r0 = t / Quads + j · row_step (Threads ≥ Quads: row_step = Threads / Quads rows a pass; threads from
// row_step · Quads on copy nothing), or quads t + i · Threads of every row (Threads < Quads). A thread's
// copies then lie at compile-time strides from its first one, whose offsets it works out once: a step
// issues each copy with an immediate offset (the copies' index arithmetic per step was 15% of the
// instructions of the FP32 stride-2 backward data at batch 64).
template <int Rows, int Quads, int Threads>
struct CopyGrid {
  static constexpr bool by_rows = Threads >= Quads;
  static constexpr int row_step = by_rows ? Threads / Quads : 1;
  static constexpr int row_passes = ceil_div(Rows, row_step), quad_passes = by_rows ? 1 : ceil_div(Quads, Threads);
  static constexpr bool idle_threads = by_rows && Threads % Quads != 0;
  __device__ static int first_row() { return by_rows ? int(threadIdx.x) / Quads : 0; }
  __device__ static int first_quad() { return by_rows ? int(threadIdx.x) % Quads : int(threadIdx.x); }
  // Whether copy (quad pass i, row pass j) of the thread whose first copy is (r0, q0) exists.
  __device__ static bool has(int r0, int q0, int i, int j) {
    const bool row_in = Rows % row_step == 0 && !idle_threads ? true : r0 < row_step && r0 + j * row_step < Rows;
    return row_in && (Quads % Threads == 0 || by_rows || q0 + i * Threads < Quads);
  }
  // Calls f(i, r, q) for each copy the thread (first copy (r0, q0)) has: quad pass i, r rows and q quads
  // from its first copy.
  template <class F>
  __device__ __forceinline__ static void for_each(int r0, int q0, F&& f) {
#pragma unroll
    for (int j = 0; j < row_passes; ++j)
#pragma unroll
      for (int i = 0; i < quad_passes; ++i)
        if (has(r0, q0, i, j)) f(i, j * row_step, i * Threads);
  }
};

// The copies (cp.async, 16 bytes each) of one channel step into a stage: the weights of output rows
// m0 .. m0 + BM and the patch of output rows y0 .. y0 + TH of the sample whose source is src_n (Pb and
// T as ConvPatchLayout). The weights' rows: forward, BM rows m of CK·KK floats (w[m][c0 ..], row stride
// SC·KK); backward data, CK rows o of BM·KK floats (w[c0 + o][m0 ..], row stride M·KK). The patch's:
// CK channels of PR·W / 4 quads (the window's source rows, contiguous in memory; quad u is row
// u / (W / 4) of the window).
template <class Pb, class T>
class ConvPatchCopies {
  static constexpr int CK = T::CK, KK = T::KK, NT = T::threads, W4 = Pb::W / 4, plane = Pb::H * Pb::W;
  static constexpr int w_rows = Pb::dgrad ? CK : T::BM, w_quads = (Pb::dgrad ? T::BM : CK) * KK / 4;
  static constexpr int w_src_row = (Pb::dgrad ? Pb::M : Pb::SC) * KK, w_dst_row = Pb::dgrad ? T::OS : T::AS;
  static constexpr int w_src_step = Pb::dgrad ? CK * Pb::M * KK : CK * KK;
  static constexpr bool full_tiles = Pb::M % T::BM == 0;  // no zero-filled weights
  using WG = CopyGrid<w_rows, w_quads, NT>;
  using PG = CopyGrid<CK, T::PR * W4, NT>;
  static_assert((long long)Pb::SC * plane < (1ll << 31) && (long long)Pb::M * Pb::SC * KK < (1ll << 31), "32-bit offsets");
  static_assert((Pb::dgrad ? T::BM : CK) * KK % 4 == 0, "weight rows of whole quads");

  const float* w_;
  const float* src_n_;
  int w_src_, w_dst_, w_r0_, w_q0_, w_limit_;  // w_limit_: rows (forward) or quads (backward data) of real weights
  int p_src_, p_r0_, p_q0_, p_dst_[PG::quad_passes];
  bool p_in_[PG::quad_passes];  // the quad's source row lies in the image

 public:
  __device__ ConvPatchCopies(const float* w, const float* src_n, int m0, int y0) : w_(w), src_n_(src_n) {
    w_r0_ = WG::first_row(), w_q0_ = WG::first_quad();
    w_src_ = (Pb::dgrad ? w_r0_ * w_src_row + m0 * KK : (m0 + w_r0_) * w_src_row) + 4 * w_q0_;
    w_dst_ = w_r0_ * w_dst_row + 4 * w_q0_;
    w_limit_ = Pb::dgrad ? (Pb::M - m0) * KK / 4 : Pb::M - m0;  // M % 4 == 0: a quad is all in or all out
    p_r0_ = PG::first_row(), p_q0_ = PG::first_quad();
    p_src_ = p_r0_ * plane + (y0 - Pb::P) * Pb::W + 4 * p_q0_;
#pragma unroll
    for (int i = 0; i < PG::quad_passes; ++i) {
      const int u = p_q0_ + i * NT, r = u / W4, y = y0 - Pb::P + r;
      p_dst_[i] = p_r0_ * T::CS + r * T::RS + 4 + 4 * (u % W4);
      p_in_[i] = y >= 0 && y < Pb::H;
    }
  }

  __device__ __forceinline__ void load(float* As, float* Bs, int stage, int step) const {
    float* A = As + stage * T::a_floats + w_dst_;
    const float* from = w_ + (w_src_ + step * w_src_step);
    WG::for_each(w_r0_, w_q0_, [&](int, int r, int q) {
      const bool ok = full_tiles || (Pb::dgrad ? w_q0_ + q < w_limit_ : w_r0_ + r < w_limit_);
      const float* src = ok ? from + r * w_src_row + 4 * q : w_;
      if constexpr (T::l1_weights) cp_async_f32x4_l1(A + r * w_dst_row + 4 * q, src, ok);
      else cp_async_f32x4(A + r * w_dst_row + 4 * q, src, ok);
    });
    float* B = Bs + stage * T::b_floats;
    const float* patch = src_n_ + (p_src_ + step * CK * plane);
    PG::for_each(p_r0_, p_q0_, [&](int i, int r, int q) {
      if (p_in_[i]) cp_async_f32x4(B + p_dst_[i] + r * T::CS, patch + r * plane + 4 * q, true);
    });
  }
};

// --- Tile ----------------------------------------------------------------------------------------------
// The output rows of ConvPatchTile's TH_ = 0.
template <class Pb, int BM, int Warps, int WM_>
constexpr int conv_patch_tile_rows() {
  constexpr int WM = WM_ > 0 ? WM_ : BM / 32, WN = Warps / WM, columns = 64 * WN * WM * 32 / BM;
  return Pb::H < columns / Pb::W ? ceil_div(Pb::H, WN) * WN : max_of(WN, ceil_div(columns / Pb::W, WN) * WN);
}
// BM output channels × TH output rows (TH_ = 0: 64 columns per warp of 32 rows, so 64 accumulators
// per thread), Warps_ warps as WM × WN (WM_ = 0: 32 rows per warp); the weights copied through L1 (the
// blocks of an SM that share a BM tile read the same ones), unless !L1Weights_.
template <class Pb, int BM_, int TH_ = 0, int Stages_ = 3, int WM_ = 0, bool L1Weights_ = true, int Warps_ = 4>
struct ConvPatchTile
    : ConvPatchLayout<Pb, BM_, (TH_ > 0 ? TH_ : conv_patch_tile_rows<Pb, BM_, Warps_, WM_>()), Stages_, 32 * Warps_,
                      L1Weights_> {
  static constexpr int BM = BM_, TH = ConvPatchTile::ConvPatchLayout::TH;
  static constexpr int WM = WM_ > 0 ? WM_ : BM / 32, WN = Warps_ / WM;
  static constexpr int BN = TH * Pb::W, MI = BM / WM / 16, NJ = TH / WN * (Pb::W / 8);
  static constexpr int min_blocks = Warps_ == 4 ? 3 : 2;  // at most 168 or 128 registers
  static_assert((BM == 32 || BM == 64) && (WM == 1 || WM == 2) && BM % (16 * WM) == 0, "warps of 16, 32 or 64 rows");
  static_assert(Warps_ == 4 || Warps_ == 8, "4 or 8 warps");
  static_assert(TH % WN == 0, "each warp owns whole output rows");
};

// --- The epilogue (all the patch kernels) ----------------------------------------------------------------
// The FP32 tiles whose KS thread groups split each step's reduced channels (T::KS > 1): groups 1 .. KS − 1
// leave their sums acc[TM][TN] in shared memory (the stages are free: the pipeline waited for every
// copy) and group 0 adds them to its own in group order. Every thread calls it; thread t of group kg.
template <class T, int TM, int TN>
__device__ __forceinline__ void conv_patch_add_groups(float (&acc)[TM][TN], int kg, int t) {
  float* red = conv_mma_smem();
  __syncthreads();
  if (kg > 0)
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) red[(((kg - 1) * TM + i) * TN + j) * T::group_threads + t] = acc[i][j];
  __syncthreads();
  if (kg == 0)
#pragma unroll
    for (int g = 0; g < T::KS - 1; ++g)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += red[((g * TM + i) * TN + j) * T::group_threads + t];
}

// Stores N = 2 or 4 consecutive results v at out + at (8- or 16-byte aligned). An activation Fn in the
// store:
//   forward        Fn::apply(v): the activation that follows the layer (its output is what is stored);
//   backward data  v · Fn::derivative(y), y read at below + at, the output of the
//                  activation below the layer (which is the layer's input): that activation's backward,
//                  folded into this one. Same bits as the activation's own kernel (dy · derivative(y)).
// identity_fn: v as it is.
template <bool Dgrad, class Fn, int N>
__device__ __forceinline__ void conv_patch_store(float* out, const float* below, std::size_t at, const float (&v)[N]) {
  static_assert(N == 2 || N == 4, "8- or 16-byte stores");
  using Vec = std::conditional_t<N == 4, float4, float2>;
  float r[N];
  if constexpr (std::is_same_v<Fn, identity_fn>) {
#pragma unroll
    for (int k = 0; k < N; ++k) r[k] = v[k];
  } else if constexpr (!Dgrad) {
#pragma unroll
    for (int k = 0; k < N; ++k) r[k] = Fn::apply(v[k]);
  } else {
    const Vec y = *reinterpret_cast<const Vec*>(below + at);
    const float* ys = reinterpret_cast<const float*>(&y);
#pragma unroll
    for (int k = 0; k < N; ++k) r[k] = v[k] * Fn::derivative(ys[k]);
  }
  *reinterpret_cast<Vec*>(out + at) = *reinterpret_cast<const Vec*>(r);
}

// --- The kernel ----------------------------------------------------------------------------------------
// Block (blockIdx.x = sample · row_tiles + row tile, blockIdx.y = BM tile of the output channels). Fn:
// the activation of the store (conv_patch_store): forward, the one that follows the layer; backward
// data, the one below it, whose output `aux` holds (identity_fn: none).
// The kernel's body. G0 void: out as above. G0 the stem below Fn, backward data only
// (conv_stem_wgrad_epilogue.cuh): no out, the stem's partial weight gradient of the block's pixels into
// partials[blockIdx.x] instead, from x0.
template <class Pb, class T, class Fn, class G0>
__device__ __forceinline__ void conv_patch_body(const float* __restrict__ w, const float* __restrict__ aux,
                                                const float* __restrict__ src, float* __restrict__ out,
                                                const float* __restrict__ x0, float* __restrict__ partials) {
  wait_for_prior_grids();  // launched dependent (launch.cuh): its launch overlaps the previous kernel's end
  constexpr int BM = T::BM, KK = T::KK, K = Pb::K, W = Pb::W, H = Pb::H;
  constexpr int RS = T::RS, CS = T::CS, MI = T::MI, NJ = T::NJ;
  constexpr std::size_t plane = std::size_t(H) * W;
  // Preconditions
  static_assert(T::threads == 32 * T::WM * T::WN, "one warp per (BM / WM) × (TH / WN rows) part");

  float* As = conv_mma_smem();                     // (stages, a_floats): weights of one channel step
  float* Bs = As + T::stages * T::a_floats;        // (stages, CK, CS): the patch
  const int n = blockIdx.x / T::row_tiles, y0 = (blockIdx.x % T::row_tiles) * T::TH, m0 = blockIdx.y * BM;
  const float* src_n = src + std::size_t(n) * Pb::SC * plane;

  conv_patch_zero_halo<Pb, T>(Bs, y0);
  const ConvPatchCopies<Pb, T> copies(w, src_n, m0, y0);
  auto load_step = [&](int stage, int step) { copies.load(As, Bs, stage, step); };

  // This lane: mma group g, thread t; the warp's rows mw and first output row (in the tile) yw.
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int mw = (warp / T::WN) * (BM / T::WM), yw = (warp % T::WN) * (T::TH / T::WN);
  // A(m, c, tap) = A_s[a_at + m_step·(m − mw − g) + c_step·(c − t) + tap_step·tap].
  constexpr int m_step = Pb::dgrad ? KK : T::AS, c_step = Pb::dgrad ? T::OS : KK, tap_step = Pb::dgrad ? -1 : 1;
  const int a_at = (mw + g) * m_step + t * c_step + (Pb::dgrad ? KK - 1 : 0);
  const int b_at = t * CS + yw * RS + g + 4 - Pb::P;

  float acc[MI][NJ][4];  // (m tile, n tile, fragment)
  mma_tile_from_bias(acc, Pb::has_bias ? aux : nullptr, m0 + mw + g, Pb::M);

  cp_async_pipeline<T::stages>(T::steps, load_step, [&](int stage) {
    const float* A = As + stage * T::a_floats + a_at;
    const float* B = Bs + stage * T::b_floats + b_at;
#pragma unroll
    for (int tap = 0; tap < KK; ++tap) {
      const int ky = tap / K, kx = tap % K;
      unsigned a[MI][4], b[NJ][2];
      load_a_tf32(a, A + tap * tap_step, m_step, c_step);  // rows g, g + 8; channels t, t + 4
#pragma unroll
      for (int j = 0; j < NJ; ++j) {  // n tile j: 8 columns of output row yw + j / (W / 8)
        const int at = (j / (W / 8) + ky) * RS + (j % (W / 8)) * 8 + kx;
        b[j][0] = tf32_round(B[at]);
        b[j][1] = tf32_round(B[at + 4 * CS]);
      }
      mma_tile_tf32(acc, a, b);
    }
  });

  // A thread holds columns 2t, 2t + 1 of n tile j (one output row, 8-byte aligned: W % 8 == 0).
  const std::size_t at_n = std::size_t(n) * Pb::M * plane;
  if constexpr (!std::is_void_v<G0>) {
    static_assert(Pb::dgrad && H % T::TH == 0 && BM == Pb::M, "whole tiles of all the stem's channels");
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // g = dx · Fn'(the stem's output), in place
          const int m = mw + 16 * i + 8 * h + g;
          const float2 y = *reinterpret_cast<const float2*>(
              aux + at_n + m * plane + (y0 + yw + j / (W / 8)) * W + (j % (W / 8)) * 8 + 2 * t);
          acc[i][j][2 * h] *= Fn::derivative(y.x), acc[i][j][2 * h + 1] *= Fn::derivative(y.y);
        }
    __syncthreads();  // (the main loop's last reads of shared memory)
    // k tile j: k slot t is pixel (yw + j / (W / 8), 8·(j % (W / 8)) + 2t) of the tile, slot t + 4 the next one.
    stem_wgrad_epilogue<G0, T, T::TH, NJ, 1>(
        [&](int j, int i) -> const float(&)[4] { return acc[i][j]; },
        [&](int j) { return (yw + j / (W / 8)) * StemWgradEpilogue<G0>::XR + (j % (W / 8)) * 8 + 2 * t; },
        x0 + std::size_t(n) * G0::C * plane, As, y0, mw, partials + std::size_t(blockIdx.x) * StemWgradEpilogue<G0>::E);
  } else {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int y = y0 + yw + j / (W / 8), x = (j % (W / 8)) * 8 + 2 * t;
      if (y >= H) continue;
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m0 + mw + 16 * i + 8 * h + g;
          const std::size_t at = at_n + m * plane + y * W + x;
          const float v[2] = {acc[i][j][2 * h], acc[i][j][2 * h + 1]};
          if (m < Pb::M) conv_patch_store<Pb::dgrad, Fn>(out, aux, at, v);
        }
    }
  }
}

template <class Pb, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch(const float* __restrict__ w,    // [Out][C][K][K]
                  const float* __restrict__ aux,  // bias [M] (forward); Fn's output, as out (backward data)
                  const float* __restrict__ src,  // [batch][SC][H][W]
                  float* __restrict__ out)        // [batch][M][H][W]
{
  conv_patch_body<Pb, T, Fn, void>(w, aux, src, out, nullptr, nullptr);
}

// Backward data with the stem's weight gradient in place of dx (G0: the stem, layer 0; Fn its activation).
template <class Pb, class T, class Fn, class G0>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_stem_wgrad(const float* __restrict__ w,      // [Out][C][K][K]
                             const float* __restrict__ below,  // [batch][C][H][W]: the stem's output
                             const float* __restrict__ dy,     // [batch][Out][H][W]
                             const float* __restrict__ x0,     // [batch][C0][H][W]: the stem's input
                             float* __restrict__ partials)     // [blocks][E]
{
  conv_patch_body<Pb, T, Fn, G0>(w, below, dy, nullptr, x0, partials);
}

// --- Launch --------------------------------------------------------------------------------------------
// The copies are 16 bytes wide: the weights and the source must be 16-byte aligned, the output 8-byte.
inline bool conv_patch_aligned(const float* w, const float* src, const float* out) {
  return reinterpret_cast<std::uintptr_t>(w) % 16 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(out) % 8 == 0;
}

// The FP32 patch kernels (conv_patch_fp32.cuh, conv_patch_dgrad_s2.cuh) also store 16 bytes at a time.
inline bool conv_patch_fp32_aligned(const float* w, const float* src, const float* out) {
  return conv_patch_aligned(w, src, out) && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
}

// Rows of a tile of about `threads` threads when a row takes `per_row` threads (the FP32 patch
// kernels' tiles): whole warps, at least one row.
constexpr int conv_patch_rows_for(int per_row, int threads) {
  for (int th = max_of(1, threads / per_row); th >= 1; --th)
    if (th * per_row % 32 == 0) return th;
  for (int th = 2;; ++th)
    if (th * per_row % 32 == 0) return th;
}

// Any patch kernel (this one, conv_patch_fp32.cuh's, conv_patch_dgrad_s2.cuh's, conv_patch_fwd_s2.cuh's)
// over batch × row tiles × ceil(M / BM) blocks, launched dependent: each of them starts with
// wait_for_prior_grids (launch.cuh).
template <class Pb, class T, auto Kernel>
void launch_conv_patch_kernel(cudaStream_t stream, const float* w, const float* aux, const float* src, float* out,
                              int batch) {
  const long long blocks = (long long)batch * T::row_tiles;
  if (blocks > 0x7fffffffLL)
    throw std::invalid_argument("ctnn: Conv: batch " + std::to_string(batch) + " is too large");
  if (batch <= 0) return;
  request_dynamic_smem<Kernel, T::smem_bytes>();
  const dim3 grid{unsigned(blocks), unsigned(ceil_div(Pb::M, T::BM))};
  launch_kernel(Kernel, grid, T::threads, T::smem_bytes, stream, 1, Launch::dependent, w, aux, src, out);
}

template <class Pb, class T, class Fn = identity_fn>
void launch_conv_patch(cudaStream_t stream, const float* w, const float* aux, const float* src, float* out,
                       int batch) {
  if (!conv_patch_aligned(w, src, out))
    throw std::invalid_argument("ctnn: Conv (TF32 patch kernel): weights and source must be 16-byte aligned, "
                                "the output 8-byte aligned");
  launch_conv_patch_kernel<Pb, T, kernel_conv_patch<Pb, T, Fn>>(stream, w, aux, src, out, batch);
}

// The tiles the rule takes, from conv_bench on an H100 (docs/conv_kernels.md):
//   tall   32 rows × 64 columns per warp (256 per block), 2 stages: the fastest wherever the image fills
//          it (2 stages 1-9% faster than 3 at B = 256);
//   short  the same with half the output rows (128 columns): more blocks where the tall tile gives
//          fewer than one per SM (16×16 images at B = 64: 4-26% faster);
//   wide   64 rows × 128 columns (2 × 2 warps), 3 stages: where the image is too small for the tall
//          tile (8×8) and the wide one still gives a block per SM (64→64 @8, B = 256: 15.3 vs 16.7 µs).
enum class ConvPatchChoice { tall, short_rows, wide };
template <class Pb>
using ConvPatchTall = ConvPatchTile<Pb, 32, 0, 2>;
template <class Pb>
using ConvPatchShort = ConvPatchTile<Pb, 32, max_of(4, ConvPatchTall<Pb>::TH / 2 / 4 * 4), 2>;
template <class Pb>
using ConvPatchWide = ConvPatchTile<Pb, 64>;

template <class Pb>
ConvPatchChoice conv_patch_plan(int batch) {
  using Tall = ConvPatchTall<Pb>;
  using Wide = ConvPatchWide<Pb>;
  constexpr long long one_wave = conv_two_waves / 2;  // a block per SM on an H100
  const long long tall_blocks = (long long)batch * Tall::row_tiles * ceil_div(Pb::M, 32);
  if (Tall::BN < 256)  // the image has fewer rows than the tall tile
    return Pb::M > 32 && Wide::within_budget && (long long)batch * Wide::row_tiles * ceil_div(Pb::M, 64) >= one_wave
               ? ConvPatchChoice::wide
               : ConvPatchChoice::tall;
  return tall_blocks < one_wave && ConvPatchShort<Pb>::BN >= 128 ? ConvPatchChoice::short_rows : ConvPatchChoice::tall;
}

template <class Pb, class Fn = identity_fn>
void launch_conv_patch_tile(ConvPatchChoice tile, cudaStream_t stream, const float* w, const float* aux,
                            const float* src, float* out, int batch) {
  switch (tile) {
    case ConvPatchChoice::tall: return launch_conv_patch<Pb, ConvPatchTall<Pb>, Fn>(stream, w, aux, src, out, batch);
    case ConvPatchChoice::short_rows:
      return launch_conv_patch<Pb, ConvPatchShort<Pb>, Fn>(stream, w, aux, src, out, batch);
    case ConvPatchChoice::wide: return launch_conv_patch<Pb, ConvPatchWide<Pb>, Fn>(stream, w, aux, src, out, batch);
  }
}

template <class Pb, class Fn = identity_fn>
void launch_conv_patch_auto(cudaStream_t stream, const float* w, const float* aux, const float* src, float* out,
                            int batch) {
  launch_conv_patch_tile<Pb, Fn>(conv_patch_plan<Pb>(batch), stream, w, aux, src, out, batch);
}

// --- The TF32 rule for the forward kind ----------------------------------------------------------------
// The patch kernel where it fits (and the pointers are aligned): faster than conv_mma.cuh's gathering
// kernels on every layer measured (1.4-2.8× forward, 1.5-3.5× backward data); those otherwise.
template <class G>
bool conv_patch_chosen(int /*batch*/) {
  if constexpr (!conv_patch_fits<G>()) return false;
  else
    return ConvPatchTall<ConvPatchFwd<G>>::within_budget && ConvPatchShort<ConvPatchFwd<G>>::within_budget &&
           ConvPatchTall<ConvPatchDgrad<G>>::within_budget && ConvPatchShort<ConvPatchDgrad<G>>::within_budget;
}

// The stem's weight gradient in the backward data (kernel_conv_patch_stem_wgrad; the tall tile, whatever
// the batch): which layer pairs (G above the stem G0's activation), the partials it writes, the launch:
// the kernel, then sum_partials into dw0 and db0 (both dependent launches). No dx.
template <class G, class G0>
constexpr bool conv_patch_stem_wgrad_fits() {
  if constexpr (!conv_patch_fits<G>() || !stem_wgrad_epilogue_shape<G, G0>()) return false;
  else {
    using T = ConvPatchTall<ConvPatchDgrad<G>>;
    return T::within_budget && T::BM == G::C && G::H % T::TH == 0 &&
           StemWgradEpilogue<G0>::template smem_bytes<T::TH, T::WN> <= T::smem_bytes;
  }
}
template <class G, class G0>
constexpr std::size_t conv_patch_stem_wgrad_workspace_floats(int max_batch) {
  if constexpr (!conv_patch_stem_wgrad_fits<G, G0>()) return 0;
  else return std::size_t(max_batch) * ConvPatchTall<ConvPatchDgrad<G>>::row_tiles * StemWgradEpilogue<G0>::E;
}
template <class G, class G0, class Fn>
void launch_conv_patch_stem_wgrad(cudaStream_t stream, const float* w, const float* below, const float* dy,
                                  const float* x0, float* partials, float* dw0, float* db0, int batch) {
  static_assert(conv_patch_stem_wgrad_fits<G, G0>(), "see conv_patch_stem_wgrad_fits");
  using Pb = ConvPatchDgrad<G>;
  using T = ConvPatchTall<Pb>;
  if (!conv_patch_aligned(w, dy, below) || reinterpret_cast<std::uintptr_t>(partials) % 16 != 0)
    throw std::invalid_argument("ctnn: Conv backward (TF32 patch kernel with the stem's weight gradient): weights and "
                                "dy must be 16-byte aligned, the stem's output 8-byte, the partials 16-byte");
  launch_with_stem_wgrad<G0, kernel_conv_patch_stem_wgrad<Pb, T, Fn, G0>, T::threads, T::smem_bytes, T::row_tiles>(
      stream, w, below, dy, x0, partials, dw0, db0, batch);
}

// The TF32 rule for the forward: conv_patch_fwd_s2.cuh (with the stride-2 patch kernel).
// The TF32 rule for backward data: conv_patch_dgrad_s2.cuh (with the stride-2 patch kernel).

}  // namespace ctnn::kernels
