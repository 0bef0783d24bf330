#pragma once
// TF32 weight gradient from staged patches: conv_patch_fp32.cuh's kernel_conv_patch_wgrad (same layers,
// same staging, same splits and reduction) with the products on the tensor cores.
//
// dW[m][c][tap] = Σ over pixels p of dy[m][p] · x[c][p shifted by the tap] is a GEMM of M = Out rows,
// N = C·K·K columns and the pixels as k. A block owns BM = 32 output channels × CK = 8·CG input channels
// (all their taps) and a range of steps; a step stages TH output rows of one sample (dy: the 32 channels'
// rows; x: the CK channels' S·(TH − 1) + K input rows, zero halo). Its warps are CG × KG: warp (kg, cg)
// holds the whole 32 × (8·K·K) tile of channels c0 + 8·cg .., and the KG warps of a column take the
// step's k-steps of 8 pixels (8 columns of one output row) in turn:
//   A (16 × 8 per m tile): dy[m][the 8 pixels], read once per k-step;
//   B (8 × 8 per tap):     x[c][row S·y + ky][S·(x0 + k) + kx − P], n = the 8 input channels: per tap the
//                          same staged rows read at another offset, so one k-step is 2·K·K mma per
//                          A fragment pair.
// The mma's k slots t and t + 4 of lane (g, t) are pixels 2·t and 2·t + 1 (any fixed permutation of k
// is the same product), so a lane reads its dy in 8-byte pairs and, per row of taps, one run of S + K
// input columns (3×3: 4 at stride 1, 5 at stride 2) in 2-3 loads, rounded once, that feeds all K taps
// of the row: a k-step is 18 mma for 4 + 9 loads at stride 1 (4 + 6 at stride 2; 8 + 18 with a load
// per fragment register). Operands are rounded to TF32 when they leave shared memory (tf32_round,
// conv_mma.cuh); the bias gradient sums the unrounded dy in FP32 (ConvWgradBias). At the end the tiles
// of each column's KG warps are added in group order and written as the block's partial, which
// sum_partials adds in split order: deterministic.
#include <cstddef>
#include <type_traits>

#include "conv_patch_fp32.cuh"

namespace ctnn::kernels {

// Pixels: about this many output pixels a step (TH whole rows dividing OH). 64, i.e. 2 k-steps a warp,
// measured fastest (2026-11-27, H100, conv_bench, µs at batch 64 / 256, against 128): 32->64 s2 @32
// 16.5 / 39.5 against 21.7 / 55.7 (128 pixels there are 8 rows and a patch of 17 input rows, 78 KB a
// block: 2 blocks an SM, so 512 blocks took two waves; 41 KB at 64), 32->64 @16 13.5 / 28.0 against
// 14.7 / 28.8, 32->32 @32 18.3 / 50.4 against 19.2 / 50.2, 64->64 @16 19.0 / 49.6 against 19.9 / 49.6;
// the 8×8 and stride-2 16-column layers get 8 rows either way. 32 was faster at batch 64 on a few layers
// (0.3-0.5 µs) but up to 1.2× slower at 256.
template <class G, int Pixels = 64, int CG_ = 1, int KG_ = 4, int Stages = 2>
struct ConvPatchWgradMma {
  // CG warps side by side over CG·8 input channels (all of them read the same staged dy), KG groups of
  // such warps taking turns over the step's k-steps (their tiles added at the end, in group order).
  static constexpr int CG = CG_, KG = KG_;
  static constexpr int BM = 32, MI = BM / 16, CK = 8 * CG, warps = CG * KG, threads = 32 * warps;
  static constexpr int min_blocks = max_of(1, 512 / threads);  // at most 128 registers
  static constexpr int K = G::K, KK = K * K, P = G::P, S = G::S, W = G::W, H = G::H, OW = G::OW, OH = G::OH;
  static constexpr int PGR = OW / 8;  // k-steps (8 columns) per output row
  // Output rows a step: about Pixels pixels, dividing OH.
  static constexpr int TH = [] {
    for (int th = max_of(1, Pixels / OW); th > 1; --th)
      if (OH % th == 0) return th;
    return 1;
  }();
  static constexpr int SEGS = TH * PGR, PR = S * (TH - 1) + K, RS = W + 8;
  // A lane reads dy in 8-byte pairs (rows DS ≡ 8 (mod 32) apart: a half warp's pairs on 32 distinct banks)
  // and a run of S + K input columns from 2·S·t − P, in pairs at stride 1 (XS ≡ 8 (mod 32), as dy) and
  // 16-byte loads at stride 2 (XS ≡ 16: a quarter warp's on 32 distinct banks).
  static constexpr int DS = TH * OW + ((8 - TH * OW % 32) + 32) % 32;
  static constexpr int XS = PR * RS + (((S == 1 ? 8 : 16) - PR * RS % 32) + 32) % 32;
  static constexpr int x_align = S == 1 ? 2 : 4;                             // floats: the run's alignment
  static constexpr int x_lead = ((4 - P) % x_align + x_align) % x_align;     // its first column's offset from it
  static constexpr int d_floats = BM * DS, x_floats = CK * XS, stages = Stages;
  // A lane's sums at the end, LS floats apart: odd, so that the lanes' stores of one sum and the reads of
  // neighbouring taps fall on distinct banks.
  static constexpr int LS = MI * KK * 4 + (MI * KK * 4 % 2 == 0 ? 1 : 0);
  static constexpr int red_floats = warps * 32 * LS;
  static constexpr int smem_bytes = max_of(stages * (d_floats + x_floats), red_floats) * 4;
  // About 512 blocks of 4 warps' worth in all (as many warps whatever the block).
  using Splits = ConvWgradSplits<G, BM, CK * KK, TH * OW, 2048 / warps>;
  static_assert(OW % 8 == 0 && OH % TH == 0, "k-steps of 8 columns of one row; steps of whole samples");
  static constexpr bool fits = conv_patch_wgrad_shape<G>() && smem_bytes <= 200 * 1024;
};

// v = p[0 .. N), where p sits Lead floats past an Align-float boundary (Align = 1, 2 or 4): 16- and 8-byte
// loads where they are aligned, single ones elsewhere (the offsets are constants once unrolled; a loop
// whose step varies would not unroll, and v would go to local memory).
template <int Align, int Lead, int N, int J = 0>
__device__ __forceinline__ void load_run(const float* p, float (&v)[N]) {
  constexpr int at = (Lead + J) % Align;
  if constexpr (J >= N) {
    return;
  } else if constexpr (Align == 4 && at == 0 && J + 4 <= N) {
    const float4 q = *reinterpret_cast<const float4*>(p + J);
    v[J] = q.x, v[J + 1] = q.y, v[J + 2] = q.z, v[J + 3] = q.w;
    load_run<Align, Lead, N, J + 4>(p, v);
  } else if constexpr (Align % 2 == 0 && at % 2 == 0 && J + 2 <= N) {
    const float2 q = *reinterpret_cast<const float2*>(p + J);
    v[J] = q.x, v[J + 1] = q.y;
    load_run<Align, Lead, N, J + 2>(p, v);
  } else {
    v[J] = p[J];
    load_run<Align, Lead, N, J + 1>(p, v);
  }
}

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
  const ConvWgradCopies<G, T> copies(x, dy, c0, m0);
  auto load_step = [&](int stage, int t) { copies.load(Ds + stage * T::d_floats, Xs + stage * T::x_floats, first + t); };

  // Warp (kg, cg): input channels c0 + 8·cg .., k-steps kg, kg + KG, ... of each step.
  const int warp = threadIdx.x / 32, cg = warp % T::CG, kg = warp / T::CG, lane = threadIdx.x % 32, g = lane / 4,
            t = lane % 4;
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
    const float* D = Ds + stage * T::d_floats + g * T::DS + 2 * t;  // row g, pixel 2·t
    // channel 8·cg + g, column 2·S·t − P
    const float* X = Xs + stage * T::x_floats + (8 * cg + g) * T::XS + 4 - T::P + 2 * S * t;
#pragma unroll
    for (int s0 = 0; s0 < T::SEGS; s0 += T::KG) {
      const int seg = s0 + kg;
      if (T::SEGS % T::KG != 0 && seg >= T::SEGS) break;
      const int yl = seg / T::PGR, x0 = seg % T::PGR * 8;
      unsigned a[MI][4];
#pragma unroll
      for (int i = 0; i < MI; ++i) {  // rows g, g + 8; pixels 2·t, 2·t + 1 (k slots t, t + 4)
        const float2 lo = *reinterpret_cast<const float2*>(D + (16 * i) * T::DS + yl * OW + x0);
        const float2 hi = *reinterpret_cast<const float2*>(D + (16 * i + 8) * T::DS + yl * OW + x0);
        a[i][0] = tf32_round(lo.x), a[i][1] = tf32_round(hi.x), a[i][2] = tf32_round(lo.y), a[i][3] = tf32_round(hi.y);
      }
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        // The S + K input columns that pixels 2·t and 2·t + 1 read over the row's taps, rounded once.
        float v[S + K];
        load_run<T::x_align, T::x_lead>(X + (S * yl + ky) * T::RS + S * x0, v);
        unsigned r[S + K];
#pragma unroll
        for (int j = 0; j < S + K; ++j) r[j] = tf32_round(v[j]);
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          const unsigned b[2] = {r[kx], r[S + kx]};  // pixels 2·t, 2·t + 1; channel g
#pragma unroll
          for (int i = 0; i < MI; ++i) mma_m16n8k8_tf32(acc[i][ky * K + kx], a[i], b);
        }
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
  constexpr int run = T::CK * KK;  // a channel m's taps of channels c0 .. c0 + CK: contiguous in dW
  const int valid_run = min_of(run, (G::C - c0) * KK);
  for (int e = threadIdx.x; e < T::BM * run; e += T::threads) {
    const int mm = e / run, r = e % run;
    if (m0 + mm >= G::Out) break;
    if (r >= valid_run) continue;
    // Accumulator (row mm, column cc = r / KK) of tap r % KK: warp cc / 8 of each group, lane (g = mm % 8,
    // t = cc % 8 / 2), fragment 2·(mm % 16 / 8) + cc % 2 of m tile mm / 16.
    const int cc = r / KK, c8 = cc % 8;
    const int at = ((cc / 8) * 32 + 4 * (mm % 8) + c8 / 2) * LS + (mm / 16 * KK + r % KK) * 4 + 2 * (mm % 16 / 8) + c8 % 2;
    float v = sums[at];
#pragma unroll
    for (int k = 1; k < T::KG; ++k) v += sums[k * T::CG * 32 * LS + at];
    part[std::size_t(m0 + mm) * G::CKK + c0 * KK + r] = v;
  }
}

// The rule's tile: at stride 1 4 warps over 8 channels taking turns (CG = 1, KG = 4, 2 stages); at stride 2
// 4 × 4 warps over 32 channels, 3 stages. From conv_bench on an H100 (2026-11-28, µs at batch 64 / 256,
// the kernels launched back to back): stride 1, 32->32 @32 17.1 / 46.6 (4 × 4: 18.6 / 50.4), 32->64 @16
// 12.6 / 25.8 (12.7 / 25.5), 64->64 @16 17.8 / 45.4 (18.1 / 47.9); stride 2, 32->64 s2 @32 15.3 / 34.5
// (1 × 4: 20.5 / 39.1), 64->128 s2 @16 16.0 / 36.5 (16.3 / 41.6), 64->64 s2 @16 12.5 / 22.8 (12.5 / 24.0).
template <class G>
using ConvPatchWgradMmaRule = std::conditional_t<G::S == 1, ConvPatchWgradMma<G>,
                                                 ConvPatchWgradMma<G, 64, min_of(4, ceil_div(G::C, 8)), 4, 3>>;

template <class G>
constexpr bool conv_patch_wgrad_mma_fits() {
  if constexpr (!conv_patch_wgrad_shape<G>()) return false;  // the tile exists only for these
  else return ConvPatchWgradMmaRule<G>::fits;
}
template <class G>
constexpr std::size_t conv_patch_wgrad_mma_workspace_floats(int max_batch) {
  if constexpr (!conv_patch_wgrad_mma_fits<G>()) return 0;
  else return ConvPatchWgradMmaRule<G>::Splits::workspace_floats(max_batch);
}

// Stage 1 into `partials` (conv_patch_wgrad_mma_workspace_floats<G>(batch) floats), then stage 2.
template <class G, class T = ConvPatchWgradMmaRule<G>>
void launch_conv_patch_wgrad_mma(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                                 float* db, int batch) {
  launch_conv_patch_wgrad_kernel<G, T, kernel_conv_patch_wgrad_mma<G, T>>(stream, x, dy, partials, dw, db, batch);
}

// The TF32 rule for the weight gradient of the implicit-GEMM family: this kernel where it fits (and x
// and dy are aligned), else conv_mma.cuh's gathering one. Where C <= 4 and the batch is at most
// tf32_wgrad_fp32_stem_max_batch, the FP32 patch kernel's tile of 4-channel lanes instead: this
// kernel's m16n8k8 tiles hold 3 channels of 8 there, and its splits are short. vgg's TF32 epochs
// (cifar_bench, H100, 2026-11-28, with the Dense change of that day where it applies): batch 32 0.2134 ->
// 0.2053-0.2062 s, 64 0.1407 -> 0.1362-0.1364; but 128 0.1022-0.1040 -> 0.1032-0.1035 and 256
// 0.0862-0.0869 -> 0.0869-0.0877, where the FP32 kernel, beside the 32->32 weight gradient at the end of
// the step, lasts longer than this one (58 against 55 µs at 256 on the timeline).
inline constexpr int tf32_wgrad_fp32_stem_max_batch = 64;
template <class G>
void launch_conv_tf32_wgrad(cudaStream_t stream, const float* x, const float* dy, float* partials, float* dw,
                            float* db, int batch) {
  if constexpr (G::C <= 4 && conv_patch_wgrad_fits<G>())
    if (batch <= tf32_wgrad_fp32_stem_max_batch && conv_patch_wgrad_aligned(x, dy))
      return launch_conv_patch_wgrad<G>(stream, x, dy, partials, dw, db, batch);
  if constexpr (conv_patch_wgrad_mma_fits<G>())
    if (conv_patch_wgrad_aligned(x, dy)) return launch_conv_patch_wgrad_mma<G>(stream, x, dy, partials, dw, db, batch);
  launch_conv_wgrad_mma<G>(stream, x, dy, partials, dw, db, batch);
}

}  // namespace ctnn::kernels
