#pragma once
// The TF32 forward of an RGB stem on the mma.sync tensor cores: a stride-1 "same" convolution of at
// most 4 input channels (3 for RGB), which the FP32 rule runs on the direct kernel. With Math::tf32
// cuda_layer<Conv> takes it where it fits. The stem writes Out values per 3 inputs, so the kernel is
// bound by its stores: a persistent loop over units of TH output rows of one sample with the next
// units' input copies in flight (cp.async), the results staged for 16-byte stores, and the products
// cheap: 27 per output, padded to 40 on the tensor cores.
//
// The GEMM's rows are pixels, its columns output channels, its k (tap, channel) with the channels
// padded to 4, two taps per m16n8k8 step (k = 4·j + c: tap 2s + j of step s, channel c; an odd number
// of taps ends with a tap of zeros). The input of a unit is staged channel-innermost, (row, column, 4
// channels): the 8 pixels × 4 channels of an A fragment are 32 consecutive floats (no bank conflict);
// the halo columns and padding channels are zeros written once, rows outside the image zero-filled
// copies. Operands are rounded to TF32 (conv_mma.cuh's tf32_round) when loaded for the mma; each output
// is summed whole by one warp from the bias, in an order fixed by the layout (any tile, same bits).
#include <cstddef>
#include <cstdint>

#include "../layers/activation.hpp"
#include "conv_direct.cuh"
#include "conv_mma.cuh"
#include "launch.cuh"

namespace ctnn::kernels {

// Which layers: stride 1, no dilation, "same" padding with K 3 or 5 (a zero column for the padding tap),
// C <= 4, whole n8 tiles of output channels (at most 64: a warp's accumulators and weights), and rows
// of a multiple of 8 pixels (an A fragment's 8 rows in one image row; 16-byte stores).
template <class G>
constexpr bool conv_stem_mma_fits() {
  return G::S == 1 && G::D == 1 && G::K % 2 == 1 && G::K >= 3 && G::K <= 5 && 2 * G::P == G::K - 1 && G::C <= 4 &&
         G::Out % 8 == 0 && G::Out <= 64 && G::W % 8 == 0 && G::W <= 256;
}

// The patch of TH output rows: input rows y0 − P .. y0 + TH + P − 1 as (row, column, 4 channels),
// FP32 as in memory (rounded to TF32 when a fragment is loaded); P zero columns either side, zero
// channels from C on, zero rows outside the image.
template <class G, int TH_>
struct StemPatch {
  static constexpr int TH = TH_, PR = TH + G::K - 1, PW = G::W + 2 * G::P, floats = PR * PW * 4;
  static constexpr int KK = G::K * G::K, KS = (KK + 1) / 2;  // taps; m16n8k8 steps (two taps each)
};
// The most output rows up to Max that divide H, make whole 16-pixel m tiles and keep `floats(TH)` of
// shared memory within 48 KB (0: none).
template <class G, int Max, class Floats>
constexpr int stem_rows(Floats floats) {
  for (int th = Max; th >= 1; --th)
    if (G::H % th == 0 && (th * G::W) % 16 == 0 && floats(th) * 4 <= 48 * 1024) return th;
  return 0;
}

// Zero the patch's pad columns and channels (once: the copies below never write them).
template <class G, class Pt>
__device__ __forceinline__ void zero_stem_patch_pads(float* patch) {
  for (int i = threadIdx.x; i < Pt::PR * Pt::PW; i += blockDim.x) {
    const int col = i % Pt::PW;
    if (col < G::P || col >= G::P + G::W) reinterpret_cast<float4*>(patch)[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    else
      for (int c = G::C; c < 4; ++c) patch[4 * i + c] = 0.f;
  }
}
// Start the copies of the image's part of the patch of rows y0 .. (xs: the sample's [C][H][W]), 4 bytes
// each, rows outside the image zero-filled; the caller commits and waits. (The shared address is taken
// once: cp_async_f32's address form.)
template <class G, class Pt>
__device__ __forceinline__ void copy_stem_patch(float* patch, const float* __restrict__ xs, int y0) {
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(patch));
  for (int i = threadIdx.x; i < G::C * Pt::PR * G::W; i += blockDim.x) {
    const int col = i % G::W, r = i / G::W % Pt::PR, c = i / G::W / Pt::PR, iy = y0 - G::P + r;
    const bool inside = iy >= 0 && iy < G::H;
    const float* src = inside ? xs + (std::size_t(c) * G::H + iy) * G::W + col : xs;
    cp_async_f32(base + 4u * unsigned((r * Pt::PW + G::P + col) * 4 + c), src, inside);
  }
}

// --- The forward ---------------------------------------------------------------------------------------
// A block takes units of TH output rows of one sample (all Out channels), units blockIdx.x,
// blockIdx.x + gridDim.x, ..., with the patches of the next Stages − 1 units in flight. It stages the
// weights once (TF32), and each warp keeps its B fragments in registers and takes 16-pixel m tiles in
// turn; the results go through shared memory ([o][pixels], rows ≡ 4 mod 32 floats: the lanes' (2t, g)
// on distinct banks) so that the block writes a unit's TH rows of each channel, contiguous in y, in
// 16-byte stores.
template <class G, int TargetBlocks = 264, int Stages = 3>
struct ConvStemMmaTile {
  static constexpr int out_stride(int th) { return (th * G::W + 31) / 32 * 32 + 4; }
  static constexpr int weight_stride = 8 * ((G::K * G::K + 1) / 2) + 4;  // ≡ 4 (mod 8)
  static constexpr int TH = stem_rows<G, 4>([](int th) {
    return G::Out * out_stride(th) + Stages * (th + G::K - 1) * (G::W + 2 * G::P) * 4 + G::Out * weight_stride;
  });
  using Pt = StemPatch<G, TH>;
  static constexpr int KS = Pt::KS, KK = Pt::KK, NJ = G::Out / 8, M_TILES = TH * G::W / 16, OS = out_stride(TH);
  static constexpr int WS = weight_stride, stages = Stages;
  static constexpr int warps = 8, threads = 32 * warps;
  static constexpr int min_blocks = G::Out <= 32 ? 3 : 2;  // resident blocks an SM (registers: 85 or 128)
  static constexpr bool fits = conv_stem_mma_fits<G>() && TH > 0;
  static constexpr int units(int batch) { return batch * (G::H / TH); }
  static constexpr int blocks(int batch) { return units(batch) < TargetBlocks ? units(batch) : TargetBlocks; }
};
template <class G>
using ConvStemMma = ConvStemMmaTile<G>;

template <class G, class T, class Fn = identity_fn>
__global__ void __launch_bounds__(T::threads, T::min_blocks)
kernel_conv_stem_mma(const float* __restrict__ w,  // [Out][C][K][K]
                     const float* __restrict__ b,  // [Out]
                     const float* __restrict__ x,  // [batch][C][H][W]
                     float* __restrict__ y,        // [batch][Out][H][W], 16-byte aligned
                     int units) {
  using Pt = typename T::Pt;
  static_assert(T::fits, "see conv_stem_mma_fits");
  __shared__ __align__(16) float patch[T::stages][Pt::floats];
  __shared__ __align__(16) float out[G::Out * T::OS];
  __shared__ unsigned wts[G::Out * T::WS];
  __shared__ float bias[G::Out];
  auto issue = [&](int k) {  // the copies of this block's k-th unit (if any), one commit group either way
    const int u = blockIdx.x + k * gridDim.x;
    if (u < units)
      copy_stem_patch<G, Pt>(patch[k % T::stages], x + std::size_t(u / (G::H / T::TH)) * G::C * G::H * G::W,
                             (u % (G::H / T::TH)) * T::TH);
    cp_async_commit();
  };
  for (int s = 0; s < T::stages; ++s) zero_stem_patch_pads<G, Pt>(patch[s]);
  for (int k = 0; k < T::stages - 1; ++k) issue(k);
  // The weights as (o, k = 8s + 4j + c): tap 2s + j, channel c; zero past the taps and channels.
  for (int i = threadIdx.x; i < G::Out * T::KS * 8; i += T::threads) {
    const int o = i / (T::KS * 8), k = i % (T::KS * 8), tap = 2 * (k / 8) + (k % 8) / 4, c = k % 4;
    wts[o * T::WS + k] = tap < T::KK && c < G::C ? tf32_round(__ldg(w + (o * G::C + c) * T::KK + tap)) : 0u;
  }
  for (int o = threadIdx.x; o < G::Out; o += T::threads) bias[o] = __ldg(b + o);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  unsigned wf[T::KS][T::NJ][2];  // B fragments: (k = t, t + 4; column o = 8·jn + g)
#pragma unroll
  for (int s = 0; s < T::KS; ++s)
#pragma unroll
    for (int jn = 0; jn < T::NJ; ++jn) {
      const unsigned* at = wts + (8 * jn + g) * T::WS + 8 * s + t;
      wf[s][jn][0] = at[0], wf[s][jn][1] = at[4];
    }

  for (int k = 0, u = blockIdx.x; u < units; ++k, u += gridDim.x) {
    issue(k + T::stages - 1);
    cp_async_wait<T::stages - 1>();
    __syncthreads();  // unit k's patch has landed; the previous unit's stores have read `out`
    const float* pk = patch[k % T::stages];
    for (int mt = warp; mt < T::M_TILES; mt += T::warps) {
      // This lane's pixels: rows g and g + 8 of the m tile (8 columns on in the same image row where
      // W % 16 == 0); their patch offsets at tap (0, 0), channel t. A tap (ky, kx) adds a constant.
      const int p0 = 16 * mt + g, p1 = p0 + 8;
      const int at0 = ((p0 / G::W) * Pt::PW + p0 % G::W) * 4 + t;
      const int at1 = G::W % 16 == 0 ? at0 + 32 : ((p1 / G::W) * Pt::PW + p1 % G::W) * 4 + t;
      float acc[T::NJ][4];
#pragma unroll
      for (int jn = 0; jn < T::NJ; ++jn)
        acc[jn][0] = acc[jn][2] = bias[8 * jn + 2 * t], acc[jn][1] = acc[jn][3] = bias[8 * jn + 2 * t + 1];
#pragma unroll
      for (int s = 0; s < T::KS; ++s) {
        unsigned a[4] = {0u, 0u, 0u, 0u};  // (the padding tap of an odd count: zeros, as its weights)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int tap = 2 * s + j, off = (tap / G::K * Pt::PW + tap % G::K) * 4;
          if (tap < T::KK) a[2 * j] = tf32_round(pk[at0 + off]), a[2 * j + 1] = tf32_round(pk[at1 + off]);
        }
#pragma unroll
        for (int jn = 0; jn < T::NJ; ++jn) mma_m16n8k8_tf32(acc[jn], a, wf[s][jn]);
      }
#pragma unroll
      for (int jn = 0; jn < T::NJ; ++jn)
#pragma unroll
        for (int q = 0; q < 4; ++q) out[(8 * jn + 2 * t + q % 2) * T::OS + (q < 2 ? p0 : p1)] = Fn::apply(acc[jn][q]);
    }
    __syncthreads();  // `out` complete; every warp is done with this unit's patch
    constexpr int V = T::TH * G::W / 4;  // float4s of a channel's rows
    float* ys = y + (std::size_t(u / (G::H / T::TH)) * G::Out * G::H + (u % (G::H / T::TH)) * T::TH) * G::W;
    for (int i = threadIdx.x; i < G::Out * V; i += T::threads) {
      const int o = i / V, q = i % V;
      const float4 v = reinterpret_cast<const float4*>(out + o * T::OS)[q];
      reinterpret_cast<float4*>(ys + std::size_t(o) * G::H * G::W)[q] = v;
    }
  }
  cp_async_wait<0>();  // (no copies left in flight at exit: the last groups are empty)
}

// Launch where it fits, y 16-byte aligned: true; false (nothing launched) otherwise.
template <class G, class Fn = identity_fn, class T = ConvStemMma<G>>
bool launch_conv_stem_mma(cudaStream_t stream, const float* w, const float* b, const float* x, float* y,
                          int batch) {
  if constexpr (!T::fits) return false;
  else {
    if (reinterpret_cast<std::uintptr_t>(y) % 16 != 0) return false;
    check_batch(batch, "Conv forward");
    kernel_conv_stem_mma<G, T, Fn><<<unsigned(T::blocks(batch)), T::threads, 0, stream>>>(w, b, x, y, T::units(batch));
    CTNN_CHECK_LAUNCH();
    return true;
  }
}

}  // namespace ctnn::kernels
