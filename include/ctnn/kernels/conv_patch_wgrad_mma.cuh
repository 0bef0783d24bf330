#pragma once
// TF32 weight gradient from staged patches: conv_patch_fp32.cuh's kernel_conv_patch_wgrad (same layers,
// same staging, same splits and reduction) with the products on the tensor cores.
//
// dW[m][c][tap] = Σ over pixels p of dy[m][p] · x[c][p shifted by the tap] is a GEMM of M = Out rows,
// N = C·K·K columns and the pixels as k. A block owns BM = 32 output channels × 8 input channels (all
// their taps) and a range of steps; a step stages TH output rows of one sample (dy: the 32 channels'
// rows; x: the 8 channels' S·(TH − 1) + K input rows, zero halo). A warp takes k-steps of 8 pixels (8
// columns of one output row) in turn with the others and holds the whole 32 × (8·K·K) tile:
//   A (16 × 8 per m tile): dy[m][the 8 pixels], read once per k-step;
//   B (8 × 8 per tap):     x[c][row S·y + ky][S·(x0 + k) + kx − P], n = the 8 input channels: per tap the
//                          same staged rows read at another offset, so one k-step is 2·K·K mma per
//                          A fragment pair (3×3: 18 mma for 8 + 18 fragment loads).
// Layouts: DS ≡ 4 (mod 32) and XS/4 odd, so that the lanes (g, t) of a fragment load hit 32 distinct banks
// at stride 1 (stride 2: two-way conflicts on B). Operands are rounded to TF32 when they leave shared
// memory (tf32_round, conv_mma.cuh); the bias gradient sums the unrounded dy in FP32 (ConvWgradBias).
// At the end the warps' tiles are added in warp order and written as the block's partial, which
// sum_partials adds in split order: deterministic.
#include <cstddef>

#include "conv_patch_fp32.cuh"

namespace ctnn::kernels {

// Pixels: about this many output pixels a step (TH whole rows dividing OH). 64, i.e. 2 k-steps a warp,
// measured fastest (2026-11-27, H100, conv_bench, µs at batch 64 / 256, against 128): 32->64 s2 @32
// 16.5 / 39.5 against 21.7 / 55.7 (128 pixels there are 8 rows and a patch of 17 input rows, 78 KB a
// block: 2 blocks an SM, so 512 blocks took two waves; 41 KB at 64), 32->64 @16 13.5 / 28.0 against
// 14.7 / 28.8, 32->32 @32 18.3 / 50.4 against 19.2 / 50.2, 64->64 @16 19.0 / 49.6 against 19.9 / 49.6;
// the 8×8 and stride-2 16-column layers get 8 rows either way. 32 was faster at batch 64 on a few layers
// (0.3-0.5 µs) but up to 1.2× slower at 256.
template <class G, int Pixels = 64>
struct ConvPatchWgradMma {
  static constexpr int BM = 32, MI = BM / 16, CK = 8, warps = 4, threads = 32 * warps, min_blocks = 4;
  static constexpr int K = G::K, KK = K * K, P = G::P, S = G::S, W = G::W, H = G::H, OW = G::OW, OH = G::OH;
  static constexpr int PGR = OW / 8;  // k-steps (8 columns) per output row
  // Output rows a step: about Pixels pixels, dividing OH.
  static constexpr int TH = [] {
    for (int th = max_of(1, Pixels / OW); th > 1; --th)
      if (OH % th == 0) return th;
    return 1;
  }();
  static constexpr int SEGS = TH * PGR, PR = S * (TH - 1) + K, RS = W + 8;
  static constexpr int DS = TH * OW + ((4 - TH * OW % 32) + 32) % 32;  // ≡ 4 (mod 32)
  static constexpr int XS = PR * RS + (PR * RS / 4 % 2 == 0 ? 4 : 0);   // XS / 4 odd
  static constexpr int d_floats = BM * DS, x_floats = CK * XS, stages = 2;
  static constexpr int LS = MI * KK * 4;  // a lane's sums at the end
  static constexpr int red_floats = warps * 32 * LS;
  static constexpr int smem_bytes = max_of(stages * (d_floats + x_floats), red_floats) * 4;
  using Splits = ConvWgradSplits<G, BM, CK * KK, TH * OW>;
  static_assert(OW % 8 == 0 && OH % TH == 0, "k-steps of 8 columns of one row; steps of whole samples");
  static constexpr bool fits = conv_patch_wgrad_shape<G>() && smem_bytes <= 100 * 1024;
};

template <class G, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_patch_wgrad_mma(const float* __restrict__ x,   // [batch][C][H][W]
                            const float* __restrict__ dy,  // [batch][Out][OH][OW]
                            float* __restrict__ partials,  // [splits][E]
                            int per_split, int steps) {
  wait_for_prior_grids();  // launched dependent (launch.cuh): its launch overlaps the previous kernel's end
  constexpr int MI = T::MI, K = T::K, KK = T::KK, S = T::S, OW = T::OW, LS = T::LS;
  float* Ds = conv_mma_smem();               // (stages, d_floats)
  float* Xs = Ds + T::stages * T::d_floats;  // (stages, x_floats)
  const int c0 = blockIdx.y * T::CK, m0 = blockIdx.z * T::BM;
  const int first = blockIdx.x * per_split, count = min_of(per_split, steps - first);

  conv_patch_wgrad_zero_halo<T>(Xs);
  auto load_step = [&](int stage, int t) {
    conv_patch_wgrad_load_step<G, T>(Ds + stage * T::d_floats, Xs + stage * T::x_floats, first + t, x, dy, c0, m0);
  };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  using Bias = ConvWgradBias<G, T>;
  float acc[MI][KK][4], bsum[Bias::rows];  // (m tile, tap, fragment)
#pragma unroll
  for (int r = 0; r < Bias::rows; ++r) bsum[r] = 0.f;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int k = 0; k < KK; ++k) acc[i][k][0] = acc[i][k][1] = acc[i][k][2] = acc[i][k][3] = 0.f;

  cp_async_pipeline<T::stages>(count, load_step, [&](int stage) {
    Bias::add(Ds + stage * T::d_floats, bsum);
    const float* D = Ds + stage * T::d_floats + g * T::DS + t;                        // row g, pixel t
    const float* X = Xs + stage * T::x_floats + g * T::XS + 4 - T::P + S * t;         // channel g, column S·t − P
#pragma unroll
    for (int s0 = 0; s0 < T::SEGS; s0 += T::warps) {
      const int seg = s0 + warp;
      if (T::SEGS % T::warps != 0 && seg >= T::SEGS) break;
      const int yl = seg / T::PGR, x0 = seg % T::PGR * 8;
      unsigned a[MI][4];
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // rows g, g + 8; pixels t, t + 4
          a[i][q] = tf32_round(D[(16 * i + 8 * (q % 2)) * T::DS + yl * OW + x0 + 4 * (q / 2)]);
        }
#pragma unroll
      for (int ky = 0; ky < K; ++ky)
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const float* xr = X + (S * yl + ky) * T::RS + S * x0 + kx;
          const unsigned b[2] = {tf32_round(xr[0]), tf32_round(xr[4 * S])};  // pixels t, t + 4; channel g
#pragma unroll
          for (int i = 0; i < MI; ++i) mma_m16n8k8_tf32(acc[i][ky * K + kx], a[i], b);
        }
    }
  });

  // The warps' tiles, added in warp order (the barrier orders everyone's last reads of the staging
  // before these stores).
  __syncthreads();
  float* red = conv_mma_smem() + (warp * 32 + lane) * LS;
#pragma unroll
  for (int i = 0; i < MI; ++i) {
#pragma unroll
    for (int k = 0; k < KK; ++k)
#pragma unroll
      for (int q = 0; q < 4; ++q) red[(i * KK + k) * 4 + q] = acc[i][k][q];
  }
  __syncthreads();
  const float* sums = conv_mma_smem();
  float* part = partials + std::size_t(blockIdx.x) * T::Splits::E;
  Bias::store(bsum, part, m0);
  constexpr int run = T::CK * KK;  // a channel m's taps of channels c0 .. c0 + 8: contiguous in dW
  const int valid_run = min_of(run, (G::C - c0) * KK);
  for (int e = threadIdx.x; e < T::BM * run; e += T::threads) {
    const int mm = e / run, r = e % run;
    if (m0 + mm >= G::Out) break;
    if (r >= valid_run) continue;
    // Accumulator (row mm, column cc = r / KK) of tap r % KK: lane (g = mm % 8, t = cc / 2), fragment
    // 2·(mm % 16 / 8) + cc % 2 of m tile mm / 16.
    const int cc = r / KK, at = (4 * (mm % 8) + cc / 2) * LS + (mm / 16 * KK + r % KK) * 4 + 2 * (mm % 16 / 8) + cc % 2;
    float v = sums[at];
#pragma unroll
    for (int w = 1; w < T::warps; ++w) v += sums[w * 32 * LS + at];
    part[std::size_t(m0 + mm) * G::CKK + c0 * KK + r] = v;
  }
}

template <class G>
constexpr bool conv_patch_wgrad_mma_fits() {
  if constexpr (!conv_patch_wgrad_shape<G>()) return false;  // the tile exists only for these
  else return ConvPatchWgradMma<G>::fits;
}
template <class G>
constexpr std::size_t conv_patch_wgrad_mma_workspace_floats(int max_batch) {
  if constexpr (!conv_patch_wgrad_mma_fits<G>()) return 0;
  else return ConvPatchWgradMma<G>::Splits::workspace_floats(max_batch);
}

// Stage 1 into `partials` (conv_patch_wgrad_mma_workspace_floats<G>(batch) floats), then stage 2.
template <class G, class T = ConvPatchWgradMma<G>>
void launch_conv_patch_wgrad_mma(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                                 float* db, int batch) {
  launch_conv_patch_wgrad_kernel<G, T, kernel_conv_patch_wgrad_mma<G, T>>(stream, x, dy, partials, dw, db, batch);
}

// The TF32 rule for the weight gradient of the implicit-GEMM family: this kernel where it fits (and x
// and dy are aligned), else conv_mma.cuh's gathering one.
template <class G>
void launch_conv_tf32_wgrad(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                            float* db, int batch) {
  if constexpr (conv_patch_wgrad_mma_fits<G>())
    if (conv_patch_wgrad_aligned(x, dy)) return launch_conv_patch_wgrad_mma<G>(stream, x, dy, partials, dw, db, batch);
  launch_conv_wgrad_mma<G>(stream, x, dy, partials, dw, db, batch);
}

}  // namespace ctnn::kernels
