#pragma once
// Dense's two backward products on the TF32 tensor cores (CudaContext::math == Math::tf32), with the
// mma.sync tiles, fragment loads and cp.async pipeline of conv_mma.cuh. For W [N][I], x [B][I], dy [B][N]:
//
//   weights   dW[n][i] = Σ_b dy[b][n]·x[b][i],  db[n] = Σ_b dy[b][n]
//             rows n, columns i, k = b: both operands k-major (a sample's row of dy, of x), staged as
//             such (rows of BM + 4 and BN + 4 floats per k, MmaTile::KMA and KM);
//   data      dx[b][i] = Σ_n dy[b][n]·W[n][i]
//             rows b, columns i, k = n: A = dy k-contiguous (rows of BK + 8 floats), B = W k-major.
//
// Every operand row is copied 16 bytes at a time (N and I multiples of 4, the arrays 16-byte
// aligned), zero-filled past the batch and past N. Each output is one block's, summed over the whole
// k (no split, no partials): the order is fixed by k alone (mma k slots, then slices in increasing k),
// so two runs, and every tile shape, give the same bits. db is summed in FP32 from the unrounded dy by
// the first column of blocks. Operands are rounded to TF32 as they leave shared memory (tf32_round).
//
// Why not cuBLAS: its TF32 GEMM needs the handle and so the main stream, where a network would rather
// run the weight gradient on its second stream; and ctnn's FP32 weight-gradient reduction, which runs
// there, is FP32 SIMT. The forward stays on cuBLAS: a split-K kernel on these tiles (branch
// dense-mma-forward) took 8.0 µs against cuBLAS's 7.0 for a CIFAR head at batch 64 in the training step
// (H200), and the epochs were 1.5% slower.
#include <cstddef>
#include <type_traits>

#include "conv_mma.cuh"
#include "launch.cuh"

namespace ctnn::kernels {

// Dense layers these kernels take: rows of 16 bytes.
template <int N, int I>
inline constexpr bool dense_mma_fits = N % 4 == 0 && I % 4 == 0;

// --- Weight gradient ----------------------------------------------------------------------------------
template <class T>
struct DenseMmaWgradTiles {
  static constexpr int a_floats = T::BK * T::KMA, b_floats = T::BK * T::KM;
  static constexpr int smem_bytes = T::stages * (a_floats + b_floats) * 4;
};

// Block (blockIdx.x, blockIdx.y): columns i0 = BN·x.., rows n0 = BM·y.. of dW; blocks with x == 0 also
// write db for their rows.
template <int N, int I, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_dense_wgrad_mma(const float* __restrict__ x,   // [batch][I]
                       const float* __restrict__ dy,  // [batch][N]
                       float* __restrict__ dw,        // [N][I]
                       float* __restrict__ db,        // [N]
                       int batch)
{
  using Tiles = DenseMmaWgradTiles<T>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, NT = T::threads, MI = T::MI, NJ = T::NJ;
  // Preconditions
  static_assert(dense_mma_fits<N, I>, "rows of whole 16-byte quads");

  float* As = conv_mma_smem();                    // (stages, BK, KMA): dy, k-major
  float* Bs = As + T::stages * Tiles::a_floats;   // (stages, BK, KM): x, k-major
  const int i0 = int(blockIdx.x) * BN, n0 = int(blockIdx.y) * BM;
  // (The four copy loops below differ in their operands' layout; a shared helper taking the source as a
  // lambda made this kernel 16% slower at batch 256 on an H200: 10.5 against 9.0 µs.)
  auto load = [&](int stage, int step) {
    const int b0 = step * BK;
    float* A = As + stage * Tiles::a_floats;
    float* B = Bs + stage * Tiles::b_floats;
#pragma unroll
    for (int j = 0; j < ceil_div(BK * BM / 4, NT); ++j) {
      const int e = threadIdx.x + j * NT, kk = e / (BM / 4), v = e % (BM / 4), b = b0 + kk, n = n0 + 4 * v;
      const bool ok = b < batch && n < N;  // N % 4 == 0: a quad is all in or all out
      if ((BK * BM / 4) % NT == 0 || e < BK * BM / 4)
        cp_async_f32x4(A + kk * T::KMA + 4 * v, ok ? dy + std::size_t(b) * N + n : dy, ok);
    }
#pragma unroll
    for (int j = 0; j < ceil_div(BK * BN / 4, NT); ++j) {
      const int e = threadIdx.x + j * NT, kk = e / (BN / 4), v = e % (BN / 4), b = b0 + kk, i = i0 + 4 * v;
      const bool ok = b < batch && i < I;
      if ((BK * BN / 4) % NT == 0 || e < BK * BN / 4)
        cp_async_f32x4(B + kk * T::KM + 4 * v, ok ? x + std::size_t(b) * I + i : x, ok);
    }
  };

  const MmaLane<T> lane;
  float acc[MI][NJ][4] = {};  // (m tile, n tile, fragment)
  // db: by the warps of the first warp column in the first column of blocks; each lane sums its own
  // k slots, the four lanes of a group are added at the end.
  float bsum[MI][2] = {};
  const bool sums_bias = blockIdx.x == 0 && (threadIdx.x / 32) % T::WN == 0;
  const int a_at = lane.a_kmajor_at(), b_at = lane.template b_at<true>();
  cp_async_pipeline<T::stages>(ceil_div(batch, BK), load, [&](int stage) {
    mma_slice<T, true, true>(As + stage * Tiles::a_floats + a_at, Bs + stage * Tiles::b_floats + b_at, acc,
                             [&](int i, float2 lo, float2 hi) {
                               if (sums_bias) bsum[i][0] += lo.x + lo.y, bsum[i][1] += hi.x + hi.y;
                             });
  });

#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int n = n0 + lane.mw + 16 * i + 8 * h + lane.g;
      if (sums_bias) {  // warp-uniform: every lane takes part in the shuffles
        const float v = mma_group_sum(bsum[i][h]);
        if (lane.t == 0 && n < N) db[n] = v;
      }
      if (n >= N) continue;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int col = i0 + lane.nw + 8 * j + 2 * lane.t;  // even, and I % 4 == 0: both or neither
        if (col < I)
          *reinterpret_cast<float2*>(dw + std::size_t(n) * I + col) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
    }
}

// --- Data gradient ------------------------------------------------------------------------------------
template <class T>
struct DenseMmaDgradTiles {
  static constexpr int a_floats = T::BM * T::KC, b_floats = T::BK * T::KM;
  static constexpr int smem_bytes = T::stages * (a_floats + b_floats) * 4;
};

// Block (blockIdx.x, blockIdx.y): columns i0 = BN·x.., rows (samples) b0 = BM·y.. of dx.
template <int N, int I, class T>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_dense_dgrad_mma(const float* __restrict__ w,   // [N][I]
                       const float* __restrict__ dy,  // [batch][N]
                       float* __restrict__ dx,        // [batch][I]
                       int batch)
{
  using Tiles = DenseMmaDgradTiles<T>;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, NT = T::threads, MI = T::MI, NJ = T::NJ;
  // Preconditions
  static_assert(dense_mma_fits<N, I>, "rows of whole 16-byte quads");

  float* As = conv_mma_smem();                    // (stages, BM, KC): dy, k-contiguous
  float* Bs = As + T::stages * Tiles::a_floats;   // (stages, BK, KM): W, k-major
  const int i0 = int(blockIdx.x) * BN, b0 = int(blockIdx.y) * BM;
  auto load = [&](int stage, int step) {
    const int k0 = step * BK;
    float* A = As + stage * Tiles::a_floats;
    float* B = Bs + stage * Tiles::b_floats;
#pragma unroll
    for (int j = 0; j < ceil_div(BM * BK / 4, NT); ++j) {
      const int e = threadIdx.x + j * NT, mm = e / (BK / 4), v = e % (BK / 4), b = b0 + mm, n = k0 + 4 * v;
      const bool ok = b < batch && n < N;
      if ((BM * BK / 4) % NT == 0 || e < BM * BK / 4)
        cp_async_f32x4(A + mm * T::KC + 4 * v, ok ? dy + std::size_t(b) * N + n : dy, ok);
    }
#pragma unroll
    for (int j = 0; j < ceil_div(BK * BN / 4, NT); ++j) {
      const int e = threadIdx.x + j * NT, kk = e / (BN / 4), v = e % (BN / 4), n = k0 + kk, i = i0 + 4 * v;
      const bool ok = n < N && i < I;
      if ((BK * BN / 4) % NT == 0 || e < BK * BN / 4)
        cp_async_f32x4(B + kk * T::KM + 4 * v, ok ? w + std::size_t(n) * I + i : w, ok);
    }
  };

  const MmaLane<T> lane;
  float acc[MI][NJ][4] = {};
  const int a_at = lane.a_at(), b_at = lane.template b_at<true>();
  cp_async_pipeline<T::stages>(ceil_div(N, BK), load, [&](int stage) {
    mma_slice<T, true>(As + stage * Tiles::a_floats + a_at, Bs + stage * Tiles::b_floats + b_at, acc,
                       [](int, float2, float2) {});
  });

#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int b = b0 + lane.mw + 16 * i + 8 * h + lane.g;
      if (b >= batch) continue;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const int col = i0 + lane.nw + 8 * j + 2 * lane.t;
        if (col < I)
          *reinterpret_cast<float2*>(dx + std::size_t(b) * I + col) = make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
    }
}

// --- Launch -------------------------------------------------------------------------------------------
// The tiles (4 warps each) and the rule: the weight gradient's 64 × 128 tile where it makes about a
// block per SM (120 of an H100's or H200's 132), else 64 × 64; the data gradient's 64 × 64 tile where
// the batch gives that many blocks, else cuBLAS (dgrad_wins). Measured on an H200 (dense_bench, one CUDA
// graph a sample, µs): a 4096 -> 256 head's weight gradient 4.6 (64 × 128) against 4.7 (64 × 64) and 8.6
// for the FP32 reduction at batch 64, 9.0 against 10.0 and cuBLAS's 8.5 (+ sum) at 256; 1024 -> 512's
// 3.4 (64 × 64) against 3.8 at batch 64. The head's data gradient at batch 256 7.8-8.0 against
// cuBLAS's 7.3 alone, but the epochs 1% shorter with it (vgg, cifar_bench); at batch 64 the narrower
// tiles matched cuBLAS alone (4.9 µs) and made the epochs 0.7% longer, so cuBLAS stays there.
using DenseMmaLarge = MmaTile<64, 128, 2, 2>;
using DenseMmaWide = MmaTile<64, 64, 2, 2>;
inline constexpr long long dense_mma_min_blocks = 120;
template <class T>
constexpr long long dense_mma_blocks(long long rows, long long cols) {
  return ceil_div<long long>(rows, T::BM) * ceil_div<long long>(cols, T::BN);
}
template <int N, int I>
using DenseMmaWgradTile =
    std::conditional_t<dense_mma_blocks<DenseMmaLarge>(N, I) >= dense_mma_min_blocks, DenseMmaLarge, DenseMmaWide>;
template <int I>
constexpr bool dense_mma_dgrad_wins(int batch) {
  return dense_mma_blocks<DenseMmaWide>(batch, I) >= dense_mma_min_blocks;
}

// Whether the operands allow the kernels (16-byte aligned arrays); the layer falls back to cuBLAS if not.
template <int N, int I, class T = DenseMmaWgradTile<N, I>>
bool launch_dense_wgrad_mma(cudaStream_t stream, const float* x, const float* dy, float* dw, float* db, int batch) {
  if (!aligned_to(x, 16) || !aligned_to(dy, 16) || !aligned_to(dw, 16)) return false;
  constexpr int bytes = DenseMmaWgradTiles<T>::smem_bytes;
  request_dynamic_smem<kernel_dense_wgrad_mma<N, I, T>, bytes>();
  const dim3 grid(unsigned(ceil_div(I, T::BN)), unsigned(ceil_div(N, T::BM)));
  kernel_dense_wgrad_mma<N, I, T><<<grid, T::threads, bytes, stream>>>(x, dy, dw, db, batch);
  CTNN_CHECK_LAUNCH();
  return true;
}

template <int N, int I, class T = DenseMmaWide>
bool launch_dense_dgrad_mma(cudaStream_t stream, const float* w, const float* dy, float* dx, int batch) {
  if (!aligned_to(w, 16) || !aligned_to(dy, 16) || !aligned_to(dx, 16)) return false;
  constexpr int bytes = DenseMmaDgradTiles<T>::smem_bytes;
  request_dynamic_smem<kernel_dense_dgrad_mma<N, I, T>, bytes>();
  const dim3 grid(unsigned(ceil_div(I, T::BN)), unsigned(ceil_div(batch, T::BM)));
  kernel_dense_dgrad_mma<N, I, T><<<grid, T::threads, bytes, stream>>>(w, dy, dx, batch);
  CTNN_CHECK_LAUNCH();
  return true;
}

}  // namespace ctnn::kernels
